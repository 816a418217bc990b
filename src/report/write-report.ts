/**
 * A run's report on disk: `<out>/index.html` (self-contained) and `<out>/charts/<chart>.png`, `<out>` being
 * `<run>/report` unless given. Each file is written whole and renamed into place, the page last, so that a
 * reader (a browser, the Web UI's link) never sees half of one. Used by `infir2 report` and by the activity
 * that writes the report at the end of every run.
 */
import { accessSync, constants, existsSync, mkdirSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { RunStatus } from '../plan/contracts.js';
import { writeFileAtomic } from '../util/atomic-write.js';
import { reportCharts, type ChartSpec } from './charts.js';
import { reportHtml, type RenderedChart } from './html.js';
import { chartPng, chartSvg } from './render.js';
import { readRunData } from './run-data.js';

export interface WrittenReport {
  page: string;
  pngs: string[];
  bytes: number;
  charts: number;
  problems: string[];
  ms: number;
}

/** Why `dir` cannot take the report, or null (the nearest existing ancestor must be a writable directory). */
export function outDirProblem(dir: string): string | null {
  let d = resolve(dir);
  while (!existsSync(d)) {
    const up = dirname(d);
    if (up === d) break;
    d = up;
  }
  if (!statSync(d).isDirectory()) return `${d} is not a directory`;
  try {
    accessSync(d, constants.W_OK);
  } catch {
    return `${d} is not writable`;
  }
  return null;
}

/** Each chart as SVG, and as `<out>/charts/<id>.png` when `png`. */
export function renderCharts(specs: ChartSpec[], out: string, png: boolean): RenderedChart[] {
  mkdirSync(join(out, 'charts'), { recursive: true });
  return specs.map((spec) => {
    const svg = chartSvg(spec);
    if (!png) return { spec, svg, png: null };
    const file = join(out, 'charts', `${spec.id}.png`);
    writeFileSync(`${file}.tmp-${process.pid}`, chartPng(svg));
    renameSync(`${file}.tmp-${process.pid}`, file);
    return { spec, svg, png: `charts/${spec.id}.png` };
  });
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
  const page = writePage(out, html);
  return { page, pngs: charts.flatMap((c) => (c.png ? [join(out, c.png)] : [])), bytes: Buffer.byteLength(html), charts: charts.length, problems: data.problems, ms: performance.now() - t0 };
}
