/**
 * `infir2 report <run> [--out DIR] [--no-png]`: the run's report, one self-contained HTML page and a PNG per
 * chart (src/report/). <run> is a run id (its directory from the server's record, its step statuses live) or a
 * run directory (no server needed: a report from the files alone). For a running, failed or cancelled run too.
 */
import { join } from 'node:path';
import { parseVerbArgs, positionals, type Options } from './args.js';
import { UsageError } from '../errors.js';
import { visibleLines } from '../util/visible.js';
import { NotARunDir } from '../report/run-data.js';
import { writeReport } from '../report/write-report.js';
import { checkOutDir, locateRuns, type LocatedRun } from './run-files.js';

export const USAGE = 'infir2 report <run> [--out DIR] [--no-png]';
export const OPTIONS = { out: { type: 'string' }, 'no-png': { type: 'boolean' } } satisfies Options;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals: pos } = parseVerbArgs('report', argv, OPTIONS, USAGE);
  const [ref] = positionals('report', pos, ['run'], USAGE);
  // A given --out is checked before the run is looked up (no server asked for a page that cannot be written).
  if (values.out !== undefined) checkOutDir(values.out, '--out', 'report');
  const [{ runDir, live }] = (await locateRuns([ref!])) as [LocatedRun];
  const out = values.out ?? join(runDir, 'report');
  if (values.out === undefined) checkOutDir(out, 'the run directory', 'report');
  let w;
  try {
    w = writeReport(runDir, { out, live, png: !values['no-png'] });
  } catch (err) {
    if (err instanceof NotARunDir) throw new UsageError(`${ref}: ${err.message}`);
    throw err;
  }
  // Notes carry text from the run's files (a trainer's output, a hostile plan.json): shown escaped.
  // A parity run's verdict too: after `parity --detach`, this is where it is read.
  const lines = [`report: ${w.page} (${w.charts} charts, ${(w.bytes / 1024).toFixed(0)} KiB${w.pngs.length ? `; PNGs in ${join(out, 'charts')}` : ''})`, ...(w.parity ? [w.parity] : []), ...w.problems.map((p) => `note: ${p}`)];
  process.stdout.write(visibleLines(lines.join('\n')) + '\n');
  return 0;
}
