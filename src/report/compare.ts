/**
 * Runs side by side (`infir2 compare`): per training step that the runs share, the figures a reader judges two
 * runs by, each run against the first (the reference):
 *   - the final validation loss (the last logged validation: never the test split), and the mean training loss
 *     of the last N points;
 *   - the EMA-smoothed per-iteration gap of the training loss at the end and at its largest after warm-up, over
 *     the iterations both runs logged: relative to the reference for a cross-entropy (how DeepSeek-V3 reports
 *     FP8 against BF16), absolute where the loss sits near zero (RL), and said which (loss-gap.ts);
 *   - evaluation deltas per benchmark and model (percentage points for rates);
 *   - the throughput ratio (medians).
 * With warnings where the figures cannot be taken at face value (compare-warnings.ts). Pure: RunData in, rows
 * and charts out.
 */
import { headlineScore } from '../views/step-figures.js';
import { compareWarnings, lossOf } from './compare-warnings.js';
import { Curve } from './curve.js';
import { type ChartSpec, lineChart } from './line-chart.js';
import { EMA_WEIGHT, emaGap, gapMeasure, showGap, type GapMeasure } from './loss-gap.js';
import type { RunData, StepReport } from './run-data.js';
import { mean } from './stats.js';

export { ema, emaGap, EMA_WEIGHT } from './loss-gap.js';
export { lossOf } from './compare-warnings.js';
/** Points averaged for "mean training loss of the last N". */
export const LAST_N = 50;

export interface CompareRow {
  stage: string;
  metric: string;
  /** One per run; null where the run has no such figure (a gap row has none: it is only a difference). */
  values: (number | null)[];
  /** Per run after the first: its difference from the reference, as shown (`+0.17 %`, `+0.0012`, `0.98×`, `+1.2 pp`). */
  vsRef: (string | null)[];
  /** The number behind `vsRef` (a relative or absolute difference, a ratio, or a difference in points); null where none. */
  delta: (number | null)[];
}

export interface Comparison {
  runs: string[];
  rows: CompareRow[];
  /** What to know before trusting the figures: recipes that differ, runs still running, other iterations covered. */
  warnings: string[];
  /** How figures were taken where it is not the usual way (an absolute loss gap). */
  notes: string[];
  charts: ChartSpec[];
}

const TRAINING = new Set(['cpt', 'sft', 'rl']);

/** The middle value (NaN-free input); null for none. */
function median(c: Curve | null): number | null {
  if (!c?.length) return null;
  const s = Float64Array.from(c.values()).sort();
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function row(stage: string, metric: string, values: (number | null)[], kind: GapMeasure | 'ratio'): CompareRow {
  const ref = values[0] ?? null;
  const delta = values.slice(1).map((v) => {
    if (v === null || ref === null) return null;
    if (kind === 'absolute') return v - ref;
    return ref === 0 ? null : kind === 'relative' ? (v - ref) / Math.abs(ref) : v / ref;
  });
  return { stage, metric, values, delta, vsRef: delta.map((d) => (d === null ? null : kind === 'ratio' ? `${d.toFixed(3)}×` : showGap(d, kind))) };
}

function stepRows(id: string, steps: (StepReport | undefined)[], lastN: number, notes: string[]): CompareRow[] {
  const rows: CompareRow[] = [];
  const val = steps.map((s) => s?.series?.validation.last()?.y ?? null);
  if (val.some((v) => v !== null)) rows.push(row(id, 'final validation loss', val, 'relative'));
  const losses = steps.map(lossOf);
  const ref = losses[0];
  const measure = gapMeasure(steps[0]?.kind, ref ?? new Curve());
  const label = measure === 'absolute' ? ', absolute' : '';
  if (measure === 'absolute' && losses.some((l) => l?.length)) {
    notes.push(`${id}: loss differences are absolute, not relative: ${steps[0]?.kind === 'rl' ? 'an RL loss sits near zero and changes sign' : `the reference's loss comes near zero`}, where a relative gap divides by ~0`);
  }
  if (losses.some((l) => l?.length)) rows.push(row(id, `mean training loss, last ${lastN}${label}`, losses.map((l) => (l?.length ? mean(l.values(-lastN)) : null)), measure));
  if (ref?.length && losses.slice(1).some((l) => l?.length)) {
    const gaps = losses.slice(1).map((l) => (l?.length ? emaGap(ref, l, measure) : new Curve()));
    const end = gaps.map((g) => g.last()?.y ?? null);
    // After warm-up: the EMA's first tenth still leans on its first points.
    const max = gaps.map((g) => {
      if (!g.length) return null;
      let m = 0;
      for (let i = Math.floor(g.length / 10); i < g.length; i++) if (Math.abs(g.y(i)) > Math.abs(m)) m = g.y(i);
      return m;
    });
    const gapRow = (metric: string, d: (number | null)[]): CompareRow => ({ stage: id, metric, values: steps.map(() => null), delta: d, vsRef: d.map((x) => (x === null ? null : showGap(x, measure))) });
    rows.push(gapRow(`EMA loss gap (${EMA_WEIGHT})${label}, at the end`, end));
    rows.push(gapRow(`EMA loss gap${label}, largest after warm-up`, max));
  }
  const tput = steps.map((s) => median(s?.series ? (s.series.throughput.length ? s.series.throughput : s.series.rolloutThroughput) : null));
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

/** The charts `compare` overlays per shared step: the report's, one line per run. */
const NONE = new Curve(1);
const OVERLAID: { key: string; title: string; y: string; x?: string; atLeast?: number; points: (s: StepReport | undefined) => Curve }[] = [
  { key: '', title: 'training loss', y: 'loss', points: (s) => lossOf(s) ?? NONE },
  { key: 'validation', title: 'validation loss', y: 'loss', atLeast: 2, points: (s) => s?.series?.validation ?? NONE },
  { key: 'lr', title: 'learning rate', y: 'learning rate', points: (s) => (s?.series ? (s.series.lr.length ? s.series.lr : s.series.stepLr) : NONE) },
  { key: 'throughput', title: 'throughput', y: 'throughput', points: (s) => (s?.series ? (s.series.throughput.length ? s.series.throughput : s.series.rolloutThroughput) : NONE) },
  { key: 'grad-norm', title: 'grad norm', y: 'grad norm', points: (s) => (s?.series ? (s.series.gradNorm.length ? s.series.gradNorm : s.series.stepGradNorm) : NONE) },
  { key: 'reward', title: 'reward per rollout', y: 'reward', x: 'rollout', points: (s) => s?.series?.reward ?? NONE },
  { key: 'length', title: 'response length per rollout', y: 'tokens', x: 'rollout', points: (s) => s?.series?.responseLength ?? NONE },
];

function overlay(id: string, title: string, xName: string, yName: string, lines: { name: string; points: Curve }[]): ChartSpec | null {
  const named = lines.filter((l) => l.points.length).map((l) => l.name);
  return lineChart({ id, title, caption: `one line per run (${named.join(', ')})`, xName, yName, lines });
}

export function compareRuns(runs: RunData[], opts: { lastN?: number } = {}): Comparison {
  const lastN = opts.lastN ?? LAST_N;
  const ids = runs.map((r) => r.plan.runId);
  const names = ids.map((id, i) => (ids.indexOf(id) === i ? id : `${id} (${i + 1})`));
  const shared = runs[0]!.plan.steps.filter((s) => TRAINING.has(s.kind) && runs.every((r) => r.steps.some((x) => x.id === s.id))).map((s) => s.id);
  const rows: CompareRow[] = [];
  const notes: string[] = [];
  const charts: ChartSpec[] = [];
  for (const id of shared) {
    const steps = runs.map((r) => r.steps.find((s) => s.id === id));
    rows.push(...stepRows(id, steps, lastN, notes));
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
  return { runs: names, rows, warnings: compareWarnings(runs, names, shared), notes, charts };
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
