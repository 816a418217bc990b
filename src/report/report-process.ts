/**
 * Runs' reports written in a process of their own: `node report-process.js` reads jobs `{ runDir, status }`, one
 * JSON line each, on stdin, writes each report (write-report.ts) and answers each with one JSON line on stdout,
 * `{ page, charts, bytes, problems }` or `{ error }`, as soon as the page is written (its charts inline), then writes
 * the charts' PNGs and the page again with links to them (write-report.ts); it exits when stdin ends. The worker
 * renders every run's end-of-run report this way (activities/run-report.ts): rendering is synchronous CPU work
 * (0.3–0.4 s, hundreds of MB at its peak for a long run's charts), which on the worker's own event loop held up
 * every trainer it supervised and every workflow it ran while 100 runs ended together (issue 33). One process
 * takes job after job, so its start (loading the chart library) is paid once per burst of runs, not once per run.
 */
import { createInterface } from 'node:readline';
import type { RunStatus } from '../plan/contracts.js';
import { Curve } from './curve.js';
import { lineChart } from './line-chart.js';
import { chartPng, chartSvg } from './render.js';
import { writeReportPngsAfter } from './write-report.js';

export interface ReportJob {
  runDir: string;
  status: RunStatus;
}

/**
 * One throwaway chart, drawn before the first job: the chart library's code runs cold the first time (the first
 * report of a fresh worker took 0.1–0.15 s longer than the next, all of it at the run's end). A renderer starts
 * while a step trains, at a low priority, so this costs no run anything.
 */
function warmUp(): void {
  const spec = lineChart({ id: 'warm-up', title: 'warm-up', caption: '', xName: 'x', yName: 'y', lines: [{ name: 'y', points: Curve.of([{ x: 0, y: 1 }, { x: 1, y: 0 }]) }] });
  if (spec) chartPng(chartSvg(spec));
}
warmUp();

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  let answer: unknown;
  let pngs: (() => unknown) | null = null;
  try {
    const job = JSON.parse(line) as ReportJob;
    const staged = writeReportPngsAfter(job.runDir, { live: job.status });
    const w = staged.report;
    pngs = staged.pngs;
    answer = { page: w.page, charts: w.charts, bytes: w.bytes, problems: w.problems.length };
  } catch (err) {
    answer = { error: err instanceof Error ? err.message : String(err) };
  }
  // Written before the PNGs (a pipe's write is synchronous on Linux): the run ends on the page, not on them.
  process.stdout.write(`${JSON.stringify(answer)}\n`);
  try {
    pngs?.();
  } catch (err) {
    // The page stands, whole, without PNG links.
    process.stderr.write(`the report's PNGs were not written: ${err instanceof Error ? err.message : String(err)}\n`);
  }
}
