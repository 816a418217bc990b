/**
 * A run's report written in a process of its own: `node report-process.js` reads `{ runDir, status }` as JSON on
 * stdin, writes the report (write-report.ts) and prints `{ page, charts, bytes, problems }` as JSON. The worker
 * renders every run's end-of-run report this way (activities/run-report.ts): rendering is synchronous CPU work
 * (0.3–0.4 s, hundreds of MB at its peak for a long run's charts), which on the worker's own event loop held up
 * every trainer it supervised and every workflow it ran while 100 runs ended together (issue 33).
 */
import type { RunStatus } from '../plan/contracts.js';
import { writeReport } from './write-report.js';

export interface ReportJob {
  runDir: string;
  status: RunStatus;
}

async function main(): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  const job = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ReportJob;
  const w = writeReport(job.runDir, { live: job.status });
  process.stdout.write(JSON.stringify({ page: w.page, charts: w.charts, bytes: w.bytes, problems: w.problems.length }));
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
