/**
 * Runs side by side (`infir2 compare`): per training step that the runs share, the figures a reader judges two
 * runs by, each run against the first (the reference):
 *   - the final validation loss (the last logged validation), and the mean training loss of the last N points;
 *   - the EMA-smoothed per-iteration gap of the training loss, relative to the reference, at the end and at its
 *     largest after warm-up (how DeepSeek-V3 reports its FP8 runs against BF16: the smoothed curves' relative
 *     error), over the iterations both runs logged;
 *   - evaluation deltas per benchmark and model (percentage points for rates);
 *   - the throughput ratio (medians).
 * Pure: RunData in, rows and charts out.
 */
import { diffValues, describeChanges } from '../util/json-diff.js';
import { headlineScore } from '../views/step-figures.js';
import { type ChartSpec, lineChart } from './line-chart.js';
import type { RunData, StepReport } from './run-data.js';
import type { Point } from './step-series.js';
import { mean, pct } from './stats.js';

/** Smoothing of the per-iteration losses before their gap is taken (TensorBoard's 0.9: weight of the past). */
export const EMA_WEIGHT = 0.9;
/** Points averaged for "mean training loss of the last N". */
export const LAST_N = 50;

export interface CompareRow {
  stage: string;
  metric: string;
  /** One per run; null where the run has no such figure. */
  values: (number | null)[];
  /** Per run after the first: its difference from the reference, as shown (`+0.17 %`, `0.98×`, `+1.2 pp`). */
  vsRef: (string | null)[];
  /** The number behind `vsRef` (a relative difference, a ratio, or a difference in points); null where none. */
  delta: (number | null)[];
}

export interface Comparison {
  runs: string[];
  rows: CompareRow[];
  /** Differences between the runs' recipes (allowed; named so that a reader knows what was compared). */
  warnings: string[];
  charts: ChartSpec[];
}

const TRAINING = new Set(['cpt', 'sft', 'rl']);

/** The training loss a step logged: Megatron iterations, else slime steps. */
export function lossOf(s: StepReport | undefined): Point[] {
  if (!s?.series) return [];
  return s.series.loss.length ? s.series.loss : s.series.stepLoss;
}

export function ema(points: Point[], weight = EMA_WEIGHT): Point[] {
  let acc: number | null = null;
  return points.map((p) => {
    acc = acc === null ? p.y : weight * acc + (1 - weight) * p.y;
    return { x: p.x, y: acc };
  });
}

/**
 * The relative gap (b − a) / |a| of the EMA-smoothed curves at every iteration both logged; the smoothing runs
 * over the common iterations only, so that one run's extra points do not shift the other's average.
 */
export function emaGap(a: Point[], b: Point[]): Point[] {
  const bx = new Map(b.map((p) => [p.x, p.y]));
  const common = a.filter((p) => bx.has(p.x));
  const ea = ema(common);
  const eb = ema(common.map((p) => ({ x: p.x, y: bx.get(p.x)! })));
  return ea.map((p, i) => ({ x: p.x, y: p.y !== 0 ? (eb[i]!.y - p.y) / Math.abs(p.y) : 0 }));
}

const median = (xs: number[]): number | null => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const rel = (v: number | null, ref: number | null) => (v === null || ref === null || ref === 0 ? null : (v - ref) / Math.abs(ref));

function row(stage: string, metric: string, values: (number | null)[], kind: 'rel' | 'ratio'): CompareRow {
  const ref = values[0] ?? null;
  const delta = values.slice(1).map((v) => (kind === 'rel' ? rel(v, ref) : v === null || ref === null || ref === 0 ? null : v / ref));
  return { stage, metric, values, delta, vsRef: delta.map((d) => (d === null ? null : kind === 'rel' ? pct(d) : `${d.toFixed(3)}×`)) };
}

function stepRows(id: string, steps: (StepReport | undefined)[], lastN: number): CompareRow[] {
  const rows: CompareRow[] = [];
  const val = steps.map((s) => s?.series?.validation.at(-1)?.y ?? null);
  if (val.some((v) => v !== null)) rows.push(row(id, 'final validation loss', val, 'rel'));
  const losses = steps.map(lossOf);
  if (losses.some((l) => l.length)) rows.push(row(id, `mean training loss, last ${lastN}`, losses.map((l) => (l.length ? mean(l.slice(-lastN).map((p) => p.y)) : null)), 'rel'));
  if (losses[0]!.length && losses.slice(1).some((l) => l.length)) {
    const gaps = losses.slice(1).map((l) => emaGap(losses[0]!, l));
    // After warm-up: the EMA's first tenth still leans on its first points.
    const settled = gaps.map((g) => g.slice(Math.floor(g.length / 10)));
    const end = gaps.map((g) => g.at(-1)?.y ?? null);
    const max = settled.map((g) => (g.length ? g.reduce((m, p) => (Math.abs(p.y) > Math.abs(m) ? p.y : m), 0) : null));
    rows.push({ stage: id, metric: `EMA loss gap (${EMA_WEIGHT}), at the end`, values: [null, ...end], delta: end, vsRef: end.map((d) => (d === null ? null : pct(d))) });
    rows.push({ stage: id, metric: 'EMA loss gap, largest after warm-up', values: [null, ...max], delta: max, vsRef: max.map((d) => (d === null ? null : pct(d))) });
  }
  const tput = steps.map((s) => median((s?.series?.throughput.length ? s.series.throughput : (s?.series?.rolloutThroughput ?? [])).map((p) => p.y)));
  const unit = steps.find((s) => s?.series?.throughputUnit)?.series?.throughputUnit;
  if (tput.some((t) => t !== null)) rows.push(row(id, `throughput (${unit ?? '?'}), median`, tput, 'ratio'));
  return rows;
}

function evalRows(runs: RunData[]): CompareRow[] {
  const keys = [...new Set(runs.flatMap((r) => r.evals.map((e) => `${e.model}|${e.benchmark}`)))];
  return keys.map((k) => {
    const [model, bench] = k.split('|') as [string, string];
    const cells = runs.map((r) => r.evals.find((e) => e.model === model && e.benchmark === bench)?.score ?? null);
    const values = cells.map((c) => c?.value ?? null);
    const percent = cells.some((c) => c?.percent);
    const delta = values.slice(1).map((v) => (v === null || values[0] === null ? null : v - values[0]!));
    return {
      stage: `eval ${model}`,
      metric: `${bench} ${cells.find((c) => c)?.label ?? headlineScore(null)?.label ?? 'score'}`,
      values,
      delta,
      vsRef: delta.map((d) => (d === null ? null : percent ? `${d >= 0 ? '+' : ''}${(d * 100).toFixed(1)} pp` : `${d >= 0 ? '+' : ''}${d.toPrecision(3)}`)),
    };
  });
}

/** What differs between the runs' recipes, beside the first's (the run directory always does: not named). */
function recipeWarnings(runs: RunData[]): string[] {
  const out: string[] = [];
  const ids = runs.map((r) => r.plan.runId);
  runs.slice(1).forEach((r, i) => {
    if (r.plan.recipe !== runs[0]!.plan.recipe) out.push(`${ids[i + 1]} ran recipe ${r.plan.recipe}, ${ids[0]} ran ${runs[0]!.plan.recipe}`);
    if (!runs[0]!.recipe || !r.recipe) return;
    const changes = diffValues(runs[0]!.recipe, r.recipe).filter((c) => c.path !== 'runDir');
    if (changes.length) out.push(`${ids[i + 1]} differs from ${ids[0]} in ${describeChanges(changes)}`);
  });
  return out;
}

/** The charts `compare` overlays per shared step: the report's, one line per run. */
const OVERLAID: { key: string; title: string; y: string; x?: string; atLeast?: number; points: (s: StepReport | undefined) => Point[] }[] = [
  { key: '', title: 'training loss', y: 'loss', points: lossOf },
  { key: 'validation', title: 'validation loss', y: 'loss', atLeast: 2, points: (s) => s?.series?.validation ?? [] },
  { key: 'lr', title: 'learning rate', y: 'learning rate', points: (s) => (s?.series?.lr.length ? s.series.lr : (s?.series?.stepLr ?? [])) },
  { key: 'throughput', title: 'throughput', y: 'throughput', points: (s) => (s?.series?.throughput.length ? s.series.throughput : (s?.series?.rolloutThroughput ?? [])) },
  { key: 'grad-norm', title: 'grad norm', y: 'grad norm', points: (s) => (s?.series?.gradNorm.length ? s.series.gradNorm : (s?.series?.stepGradNorm ?? [])) },
  { key: 'reward', title: 'reward per rollout', y: 'reward', x: 'rollout', points: (s) => s?.series?.reward ?? [] },
  { key: 'length', title: 'response length per rollout', y: 'tokens', x: 'rollout', points: (s) => s?.series?.responseLength ?? [] },
];

function overlay(id: string, title: string, xName: string, yName: string, lines: { name: string; points: Point[] }[]): ChartSpec | null {
  const named = lines.filter((l) => l.points.length).map((l) => l.name);
  return lineChart({ id, title, caption: `one line per run (${named.join(', ')})`, xName, yName, lines });
}

export function compareRuns(runs: RunData[], opts: { lastN?: number } = {}): Comparison {
  const lastN = opts.lastN ?? LAST_N;
  const ids = runs.map((r) => r.plan.runId);
  const names = ids.map((id, i) => (ids.indexOf(id) === i ? id : `${id} (${i + 1})`));
  const shared = runs[0]!.plan.steps.filter((s) => TRAINING.has(s.kind) && runs.every((r) => r.steps.some((x) => x.id === s.id))).map((s) => s.id);
  const rows: CompareRow[] = [];
  const charts: ChartSpec[] = [];
  for (const id of shared) {
    const steps = runs.map((r) => r.steps.find((s) => s.id === id));
    rows.push(...stepRows(id, steps, lastN));
    for (const m of OVERLAID) {
      const lines = steps.map((s, i) => ({ name: names[i]!, points: m.points(s) }));
      if (lines.filter((l) => l.points.length >= (m.atLeast ?? 1)).length < 1) continue;
      const unit = m.key === 'throughput' ? (steps.find((s) => s?.series?.throughputUnit)?.series?.throughputUnit ?? 'throughput') : m.y;
      const x = m.x ?? (steps.some((s) => s?.series?.loss.length) ? 'iteration' : 'step');
      const c = overlay(`compare-${id}${m.key ? `-${m.key}` : ''}`, `${id}: ${m.title}`, x, unit, lines);
      if (c) charts.push(c);
    }
  }
  rows.push(...evalRows(runs));
  return { runs: names, rows, warnings: recipeWarnings(runs), charts };
}

/** The comparison as text: one block per stage, a column per run and one per run after the first against it. */
export function comparisonTable(c: Comparison): string {
  const fmt = (v: number | null) => (v === null ? '–' : Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(3) : Number(v.toPrecision(5)).toString());
  const head = ['', ...c.runs, ...c.runs.slice(1).map((r) => `${r} vs ${c.runs[0]}`)];
  const lines: string[][] = [];
  let stage = '';
  for (const r of c.rows) {
    if (r.stage !== stage) {
      lines.push([r.stage]);
      stage = r.stage;
    }
    lines.push([`  ${r.metric}`, ...r.values.map(fmt), ...r.vsRef.map((d) => d ?? '–')]);
  }
  const widths = head.map((h, i) => Math.max(h.length, ...lines.filter((l) => l.length > 1).map((l) => (l[i] ?? '').length)));
  const pad = (cells: string[]) => cells.map((x, i) => (i === 0 ? x.padEnd(widths[0]!) : x.padStart(widths[i]!))).join('  ').trimEnd();
  return [pad(head), ...lines.map((l) => (l.length === 1 ? l[0]! : pad(l)))].join('\n');
}
