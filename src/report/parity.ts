/**
 * The verdict of a parity run (plan/parity.ts): is FP8's loss within the BF16 seed-to-seed noise of the same run
 * length? For each variant, the figure is its final validation loss (at the last iteration every variant
 * validated), else the mean training loss of its last 50 iterations. The gap is the FP8 seeds' mean against the
 * BF16 seeds' mean; the noise floor is the mean absolute difference between two BF16 seeds; both relative to the
 * BF16 mean. `within noise` when the gap is no larger than the floor; else how many floors FP8 is worse (or
 * better) by. Pure.
 */
import { PREFIX_END, type ParitySpec } from '../plan/parity.js';
import { LAST_N, lossOf } from './compare.js';
import { Curve } from './curve.js';
import { lineChart, type ChartSpec } from './line-chart.js';
import type { RunData } from './run-data.js';
import { mean, pct } from './stats.js';

export interface ParityFigure {
  variant: string;
  precision: string;
  seed: number;
  value: number | null;
}

export interface ParityVerdict {
  metric: string;
  figures: ParityFigure[];
  bf16Mean: number | null;
  fp8Mean: number | null;
  /** (fp8 − bf16) / bf16. */
  gap: number | null;
  /** Mean |bf16_i − bf16_j| / bf16. */
  noise: number | null;
  /** `within noise`, `FP8 worse by 2.3 × the noise`, `FP8 better by …`, or why there is none yet. */
  verdict: string;
}

export function parityVerdict(data: RunData, spec: ParitySpec): ParityVerdict {
  const series = spec.variants.map((v) => data.steps.find((s) => s.id === `${v.name}.${PREFIX_END}`)?.series ?? null);
  // The last validation iteration all variants reached; else the training loss's tail.
  const valIters = series.map((s) => new Set(s ? s.validation.points().map((p) => p.x) : []));
  const common = [...(valIters[0] ?? [])].filter((x) => valIters.every((set) => set.has(x))).sort((a, b) => a - b).at(-1);
  const metric = common !== undefined ? `validation loss at iteration ${common}` : `mean training loss of the last ${LAST_N} iterations`;
  const figures = spec.variants.map((v, i) => {
    const s = series[i];
    let value: number | null = null;
    if (s && common !== undefined) value = s.validation.yAt(common) ?? null;
    else if (s?.loss.length) value = mean(s.loss.values(-LAST_N));
    return { variant: v.name, precision: v.precision, seed: v.seed, value };
  });
  const of = (p: string) => figures.filter((f) => f.precision === p && f.value !== null).map((f) => f.value!);
  const bf16 = of('bf16');
  const fp8 = of('fp8');
  const missing = figures.filter((f) => f.value === null).map((f) => f.variant);
  if (missing.length || bf16.length < 2 || !fp8.length) {
    return { metric, figures, bf16Mean: bf16.length ? mean(bf16) : null, fp8Mean: fp8.length ? mean(fp8) : null, gap: null, noise: null, verdict: `no verdict yet: ${missing.length ? `no figure for ${missing.join(', ')}` : 'fewer than two BF16 seeds'}` };
  }
  const ref = mean(bf16);
  const pairs = bf16.flatMap((a, i) => bf16.slice(i + 1).map((b) => Math.abs(a - b)));
  const noise = mean(pairs) / Math.abs(ref);
  const gap = (mean(fp8) - ref) / Math.abs(ref);
  const times = noise > 0 ? Math.abs(gap) / noise : Infinity;
  const verdict = Math.abs(gap) <= noise ? 'within noise' : `FP8 ${gap > 0 ? 'worse' : 'better'} by ${times.toFixed(1)} × the noise`;
  return { metric, figures, bf16Mean: ref, fp8Mean: mean(fp8), gap, noise, verdict };
}

/** `FP8 vs BF16 (…): gap +0.31 %, BF16 seed-to-seed noise 0.35 %: within noise`, and a line per variant. */
export function parityText(v: ParityVerdict): string {
  const figs = v.figures.map((f) => `  ${f.variant.padEnd(14)} ${f.value === null ? '–' : f.value.toFixed(6)}`);
  const head = v.gap === null || v.noise === null ? `parity: ${v.verdict}` : `parity (${v.metric}): FP8 vs BF16 ${pct(v.gap)}, BF16 seed-to-seed noise ${(v.noise * 100).toFixed(2)} % → ${v.verdict}`;
  return [head, ...figs].join('\n');
}

/** The variants' training loss overlaid: BF16 solid, FP8 dashed. */
export function parityChart(data: RunData, spec: ParitySpec): ChartSpec | null {
  const lines = spec.variants.map((v) => ({
    name: v.name,
    points: Curve.concat(data.steps.filter((s) => s.id.startsWith(`${v.name}.`)).flatMap((s) => lossOf(s) ?? [])),
    dashed: v.precision === 'fp8',
  }));
  return lineChart({
    id: 'parity-loss',
    title: 'Parity: training loss, FP8 and BF16 seeds',
    caption: `the first ${spec.iterations} iterations of CPT in each precision and seed (solid BF16, dashed FP8)`,
    xName: 'iteration',
    yName: 'loss',
    lines,
  });
}
