/**
 * Long series made short enough to draw, without hiding a spike. A 100 000-iteration CPT has 100 000 points per
 * series; a chart 1 000 pixels wide shows at most ~1 000 columns. The points are cut into buckets of equal
 * count and each bucket keeps its minimum and its maximum, in the order they occur (the "min-max" reduction
 * that time-series databases use for plotting): every column of the chart still reaches the extremes of the
 * points it stands for, so a loss spike of one iteration survives, where averaging or taking every k-th point
 * would flatten or skip it. The first and last points are always kept.
 */
import type { Curve, Point } from './curve.js';

/** Points kept per series at most (a bucket gives two). */
export const MAX_POINTS = 2_000;

export function downsample(c: Curve, max = MAX_POINTS): Point[] {
  if (c.length <= max) return c.points();
  const buckets = Math.max(1, Math.floor((max - 2) / 2));
  const inner = c.length - 2;
  const out: Point[] = [c.at(0)!];
  for (let b = 0; b < buckets; b++) {
    const from = 1 + Math.floor((b * inner) / buckets);
    const to = 1 + Math.floor(((b + 1) * inner) / buckets);
    if (to <= from) continue;
    let lo = from;
    let hi = from;
    for (let i = from + 1; i < to; i++) {
      if (c.y(i) < c.y(lo)) lo = i;
      if (c.y(i) > c.y(hi)) hi = i;
    }
    if (lo === hi) out.push(c.at(lo)!);
    else out.push(c.at(Math.min(lo, hi))!, c.at(Math.max(lo, hi))!);
  }
  out.push(c.last()!);
  return out;
}
