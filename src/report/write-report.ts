/**
 * A run's report on disk: `<out>/index.html` (self-contained) and `<out>/charts/<chart>.png`, `<out>` being
 * `<run>/report` unless given. Each file is written whole and renamed into place, the page last, so that a
 * reader (a browser, the Web UI's link) never sees half of one. Used by `infir2 report` and by the activity
 * that writes the report at the end of every run.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { RunStatus } from '../plan/contracts.js';
import { dirProblem, makeDirs, PAGE_MARKER, pageDirProblem } from '../util/dir-probe.js';
import { writeFileAtomic } from '../util/atomic-write.js';
import { reportCharts } from './charts.js';
import type { ChartSpec } from './line-chart.js';
import { reportHtml, type RenderedChart } from './html.js';
import { parityText, parityVerdict } from './parity.js';
import { chartPng, chartSvg } from './render.js';
import { readRunData, type RunData } from './run-data.js';

export interface WrittenReport {
  page: string;
  pngs: string[];
  bytes: number;
  charts: number;
  problems: string[];
  /** A parity run's verdict as `infir2 parity` prints it (the line and one per variant); null for other runs. */
  parity: string | null;
  ms: number;
}

/**
 * Why `dir` cannot take a report or a comparison, or null: the run directory's own probe (a pseudo file system,
 * a read-only mount even for root, a full disk), so that `--out /proc/x` is refused at once instead of spinning.
 */
export function outDirProblem(dir: string, holds = 'a report'): string | null {
  return pageDirProblem(dir) ?? dirProblem(dir, holds);
}

/**
 * `<out>` and `<out>/charts`, one level at a time (Node's recursive mkdir spins forever under /proc), and the marker
 * that makes it a page directory; refused (never written into) where pageDirProblem says so: the end-of-run report
 * goes through here too, into a run directory others may write.
 */
function makeOutDir(out: string): void {
  const problem = pageDirProblem(out);
  if (problem) throw new Error(problem);
  makeDirs(out);
  if (!existsSync(join(out, 'charts'))) mkdirSync(join(out, 'charts'));
  if (!existsSync(join(out, PAGE_MARKER))) writeFileAtomic(join(out, PAGE_MARKER), 'written by infir2 report/compare, which may write over this directory\n');
}

/** Each chart as SVG, and as `<out>/charts/<id>.png` when `png`. */
export function renderCharts(specs: ChartSpec[], out: string, png: boolean): RenderedChart[] {
  makeOutDir(out);
  return specs.map((spec) => {
    const svg = chartSvg(spec);
    return { spec, svg, png: png ? writeChartPng(out, spec, svg) : null };
  });
}

/** `<out>/charts/<id>.png`, whole; its path relative to the page. */
function writeChartPng(out: string, spec: ChartSpec, svg: string): string {
  writeFileAtomic(join(out, 'charts', `${spec.id}.png`), chartPng(svg));
  return `charts/${spec.id}.png`;
}

/** `<out>/index.html`, whole or not at all. */
export function writePage(out: string, html: string): string {
  const page = join(out, 'index.html');
  writeFileAtomic(page, html);
  return page;
}

export function writeReport(runDir: string, opts: { out?: string; live?: RunStatus | null; png?: boolean; now?: Date } = {}): WrittenReport {
  const t0 = performance.now();
  const out = resolve(opts.out ?? join(runDir, 'report'));
  const data = readRunData(runDir, opts.live);
  const charts = renderCharts(reportCharts(data), out, opts.png !== false);
  const html = reportHtml(data, charts, (opts.now ?? new Date()).toISOString());
  return written(out, data, charts, writePage(out, html), html, t0);
}

function written(out: string, data: RunData, charts: RenderedChart[], page: string, html: string, t0: number): WrittenReport {
  const parity = data.parity ? parityText(parityVerdict(data, data.parity)) : null;
  return { page, pngs: charts.flatMap((c) => (c.png ? [join(out, c.png)] : [])), bytes: Buffer.byteLength(html), charts: charts.length, problems: data.problems, parity, ms: performance.now() - t0 };
}

/**
 * The report at the end of a run, in two writes: the page with its charts inline now (what the run's end waits
 * for), then `pngs()`, which writes each chart's PNG and the page again with links to them. The PNGs were two
 * thirds of the report's time (~40 ms a chart, 0.25 s of every run's end here); a reader sees one whole page or
 * the other, never a link to a PNG not yet written.
 */
export function writeReportPngsAfter(runDir: string, opts: { live?: RunStatus | null; now?: Date } = {}): { report: WrittenReport; pngs(): WrittenReport } {
  const t0 = performance.now();
  const out = resolve(join(runDir, 'report'));
  const data = readRunData(runDir, opts.live);
  const charts = renderCharts(reportCharts(data), out, false);
  const now = (opts.now ?? new Date()).toISOString();
  const html = reportHtml(data, charts, now);
  const report = written(out, data, charts, writePage(out, html), html, t0);
  return {
    report,
    pngs: () => {
      const withPngs = charts.map((c) => ({ ...c, png: writeChartPng(out, c.spec, c.svg) }));
      const full = reportHtml(data, withPngs, now);
      return written(out, data, withPngs, writePage(out, full), full, t0);
    },
  };
}
