/**
 * `infir2 compare <runA> <runB> [<runC>...] [--out DIR] [--last N] [--json]`: the runs side by side, each against
 * the first (src/report/compare.ts): a table per training stage (final validation loss, mean training loss of the
 * last N points, the EMA-smoothed loss gap, throughput ratio) and the evaluation deltas, printed; and a page with
 * the runs' loss curves overlaid (`./infir2-compare-<runA>-vs-<runB>/index.html` unless --out). Runs of
 * different recipes are compared too, with a warning naming what differs.
 */
import { parseVerbArgs, type Options } from './args.js';
import { UsageError } from '../errors.js';
import { visible, visibleJson, visibleLines } from '../util/visible.js';
import { compareHtml } from '../report/compare-html.js';
import { compareRuns, comparisonTable } from '../report/compare.js';
import { NotARunDir, readRunData } from '../report/run-data.js';
import { renderCharts, writePage } from '../report/write-report.js';
import { checkOutDir, locateRuns } from './run-files.js';

export const USAGE = 'infir2 compare <runA> <runB> [<runC>...] [--out DIR] [--last N] [--json]';
export const OPTIONS = { out: { type: 'string' }, last: { type: 'string' }, json: { type: 'boolean' } } satisfies Options;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals: refs } = parseVerbArgs('compare', argv, OPTIONS, USAGE);
  if (refs.length < 2) throw new UsageError(`compare: expected at least two runs, got ${refs.length} (usage: ${USAGE})`);
  const lastN = values.last === undefined ? undefined : Number(values.last);
  if (lastN !== undefined && !(Number.isInteger(lastN) && lastN > 0)) throw new UsageError(`--last: expected a positive whole number, got '${values.last}'`);
  if (values.out !== undefined) checkOutDir(values.out, '--out', 'comparison');
  const located = await locateRuns(refs);
  const data = located.map((l, i) => {
    try {
      return readRunData(l.runDir, l.live);
    } catch (err) {
      if (err instanceof NotARunDir) throw new UsageError(`${refs[i]}: ${err.message}`);
      throw err;
    }
  });
  const c = compareRuns(data, lastN !== undefined ? { lastN } : {});
  // Warnings quote recipes' values and the table runs' step ids: others' text, shown escaped.
  for (const w of c.warnings) process.stderr.write(`warning: ${visible(w)}\n`);
  if (values.json) {
    process.stdout.write(visibleJson({ runs: c.runs, warnings: c.warnings, notes: c.notes, rows: c.rows }) + '\n');
    return 0;
  }
  // Not inside a run's directory: comparing must leave every run as it was.
  const out = values.out ?? `infir2-compare-${data.map((d) => d.plan.runId).join('-vs-')}`;
  if (values.out === undefined) checkOutDir(out, 'the current directory', 'comparison');
  const charts = renderCharts(c.charts, out, true);
  const page = writePage(out, compareHtml(c, charts, new Date().toISOString()));
  process.stdout.write(visibleLines(`${comparisonTable(c)}\n${c.notes.map((n) => `note: ${n}\n`).join('')}\ncharts: ${page}`) + '\n');
  return 0;
}
