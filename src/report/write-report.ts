/**
 * A run's report on disk: `<out>/index.html` (self-contained) and `<out>/charts/<chart>.png`, `<out>` being
 * `<run>/report` unless given. Each file is written whole and renamed into place, the page last, so that a
 * reader (a browser, the Web UI's link) never sees half of one. Used by `infir2 report` and by the activity
 * that writes the report at the end of every run.
 */
import { accessSync, constants, mkdirSync, writeFileSync, renameSync, existsSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { RunStatus } from '../plan/contracts.js';
import { writeFileAtomic } from '../util/atomic-write.js';
import { reportCharts } from './charts.js';
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

export function writeReport(runDir: string, opts: { out?: string; live?: RunStatus | null; png?: boolean; now?: Date } = {}): WrittenReport {
  const t0 = performance.now();
  const out = resolve(opts.out ?? join(runDir, 'report'));
  const data = readRunData(runDir, opts.live);
  const specs = reportCharts(data);
  mkdirSync(join(out, 'charts'), { recursive: true });
  const pngs: string[] = [];
  const charts: RenderedChart[] = specs.map((spec) => {
    const svg = chartSvg(spec);
    let png: string | null = null;
    if (opts.png !== false) {
      const file = join(out, 'charts', `${spec.id}.png`);
      writeFileSync(`${file}.tmp-${process.pid}`, chartPng(svg));
      renameSync(`${file}.tmp-${process.pid}`, file);
      pngs.push(file);
      png = `charts/${spec.id}.png`;
    }
    return { spec, svg, png };
  });
  const html = reportHtml(data, charts, (opts.now ?? new Date()).toISOString());
  const page = join(out, 'index.html');
  writeFileAtomic(page, html);
  return { page, pngs, bytes: Buffer.byteLength(html), charts: charts.length, problems: data.problems, ms: performance.now() - t0 };
}
