/**
 * How `compare` measures the gap between two runs' training losses: both curves smoothed with an exponential
 * moving average over the iterations both logged, then their difference at each of them. Relative to the
 * reference ((b − a) / |a|, how DeepSeek-V3 reports FP8 against BF16) for a cross-entropy, which stays well
 * above zero; absolute (b − a) where the reference's loss sits near zero or changes sign, as RL's policy-gradient
 * loss does (a relative gap of −0.0117 against 0.00005 reads +25 103 %: a division by ~0, not a difference).
 * Pure.
 */
import type { PlanStep } from '../plan/types.js';
import { Curve } from './curve.js';
import { pct } from './stats.js';

/** Smoothing of the per-iteration losses before their gap is taken (TensorBoard's 0.9: weight of the past). */
export const EMA_WEIGHT = 0.9;

export type GapMeasure = 'relative' | 'absolute';

/** Below this a smoothed loss counts as near zero (a cross-entropy this low is a memorised training set). */
export const NEAR_ZERO = 0.01;

export function ema(points: Curve, weight = EMA_WEIGHT): Curve {
  const out = new Curve(Math.max(points.length, 1));
  let acc: number | null = null;
  for (let i = 0; i < points.length; i++) {
    acc = acc === null ? points.y(i) : weight * acc + (1 - weight) * points.y(i);
    out.put(points.x(i), acc);
  }
  return out;
}

/** The iterations both curves logged, with each one's value: a merge of two sorted curves. */
function common(a: Curve, b: Curve): { a: Curve; b: Curve } {
  const ca = new Curve(Math.max(1, Math.min(a.length, b.length)));
  const cb = new Curve(Math.max(1, Math.min(a.length, b.length)));
  for (let i = 0, j = 0; i < a.length && j < b.length; ) {
    if (a.x(i) < b.x(j)) i++;
    else if (a.x(i) > b.x(j)) j++;
    else {
      ca.put(a.x(i), a.y(i));
      cb.put(b.x(j), b.y(j));
      i++;
      j++;
    }
  }
  return { a: ca, b: cb };
}

/**
 * The gap of b's EMA-smoothed curve to a's at every iteration both logged; the smoothing runs over the common
 * iterations only, so that one run's extra points do not shift the other's average.
 */
export function emaGap(a: Curve, b: Curve, measure: GapMeasure = 'relative'): Curve {
  const c = common(a, b);
  const ea = ema(c.a);
  const eb = ema(c.b);
  const out = new Curve(Math.max(ea.length, 1));
  for (let i = 0; i < ea.length; i++) {
    const d = eb.y(i) - ea.y(i);
    out.put(ea.x(i), measure === 'absolute' ? d : ea.y(i) !== 0 ? d / Math.abs(ea.y(i)) : 0);
  }
  return out;
}

/** Absolute for RL, and for a reference whose smoothed loss comes near zero or below it; else relative. */
export function gapMeasure(kind: PlanStep['kind'] | undefined, reference: Curve): GapMeasure {
  if (kind === 'rl') return 'absolute';
  const e = ema(reference);
  for (let i = 0; i < e.length; i++) if (e.y(i) < NEAR_ZERO) return 'absolute';
  return 'relative';
}

/** A gap as shown: `+0.17 %` relative, `+0.00123` absolute. */
export function showGap(d: number, measure: GapMeasure): string {
  if (measure === 'relative') return pct(d);
  return `${d >= 0 ? '+' : ''}${Number(d.toPrecision(3))}`;
}
