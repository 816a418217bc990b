/**
 * One series of a report (a loss per iteration, a reward per rollout): points sorted by x, one y per x, the last
 * value put for an x winning (a resumed attempt trains some iterations again: the series is the trajectory the
 * kept checkpoints carry). Held in two Float64Arrays, 16 bytes a point where an array of {x, y} objects takes
 * about 60, and never more than `max` points: past that the curve keeps only the x on a grid twice as coarse
 * (every 2nd x, then every 4th…, `grid`), so that a step log of any length is read in bounded memory. No real
 * step logs a million iterations (InfiR2's 7B CPT: ~80 000): full resolution in practice, a coarser chart and
 * a note in the report beyond. Pure.
 */

export interface Point {
  x: number;
  y: number;
}

/** Points a curve holds at most (16 MiB). */
export const MAX_CURVE_POINTS = 1 << 20;

export class Curve {
  private xs: Float64Array;
  private ys: Float64Array;
  private n = 0;
  /** 1, or the step between the x kept once the curve reached `max` points. */
  grid = 1;

  constructor(private readonly max = MAX_CURVE_POINTS) {
    this.xs = new Float64Array(Math.min(16, max));
    this.ys = new Float64Array(Math.min(16, max));
  }

  /** A curve of the given points (sorted here; the last of an x wins). */
  static of(points: Iterable<Point>, max = MAX_CURVE_POINTS): Curve {
    const c = new Curve(max);
    for (const p of points) c.put(p.x, p.y);
    return c;
  }

  /** All the curves' points on one (their x ranges are expected apart, as CPT's phases are). */
  static concat(curves: Curve[]): Curve {
    const c = new Curve(Math.max(MAX_CURVE_POINTS, curves.reduce((t, x) => t + x.length, 0)));
    for (const k of curves) for (let i = 0; i < k.length; i++) c.put(k.x(i), k.y(i));
    return c;
  }

  get length(): number {
    return this.n;
  }

  x(i: number): number {
    return this.xs[i]!;
  }

  y(i: number): number {
    return this.ys[i]!;
  }

  /** The i-th point (from the end when negative), as an object. */
  at(i: number): Point | undefined {
    const k = i < 0 ? this.n + i : i;
    return k >= 0 && k < this.n ? { x: this.xs[k]!, y: this.ys[k]! } : undefined;
  }

  last(): Point | undefined {
    return this.at(-1);
  }

  /** Points `from` (negative: from the end) to `to`, as objects: for a few, not a whole long curve. */
  points(from = 0, to = this.n): Point[] {
    const [a, b] = this.range(from, to);
    const out: Point[] = [];
    for (let i = a; i < b; i++) out.push({ x: this.xs[i]!, y: this.ys[i]! });
    return out;
  }

  /** As JSON: its points (`[{x, y}, …]`). */
  toJSON(): Point[] {
    return this.points();
  }

  /** The y values `from` (negative: from the end) to `to`. */
  values(from = 0, to = this.n): number[] {
    const [a, b] = this.range(from, to);
    return Array.from(this.ys.subarray(a, b));
  }

  /** The y at `x`, if the curve has that x. */
  yAt(x: number): number | undefined {
    const i = this.lowerBound(x);
    return i < this.n && this.xs[i] === x ? this.ys[i] : undefined;
  }

  /** The same points, each x moved by `dx`. */
  shifted(dx: number): Curve {
    const c = new Curve(this.max);
    for (let i = 0; i < this.n; i++) c.put(this.xs[i]! + dx, this.ys[i]!);
    return c;
  }

  /** Add a point; no y (or a non-finite one) is no point, an x off the grid is dropped. */
  put(x: number, y: number | undefined): void {
    if (y === undefined || !Number.isFinite(y) || !Number.isFinite(x)) return;
    if (this.grid > 1 && x % this.grid !== 0) return;
    const n = this.n;
    if (n === 0 || x > this.xs[n - 1]!) return this.insert(n, x, y);
    const i = this.lowerBound(x);
    if (this.xs[i] === x) this.ys[i] = y;
    else this.insert(i, x, y);
  }

  private insert(i: number, x: number, y: number): void {
    if (this.n === this.xs.length && !this.grow()) {
      this.coarsen();
      if (x % this.grid !== 0) return;
      i = this.lowerBound(x);
    }
    if (i < this.n) {
      this.xs.copyWithin(i + 1, i, this.n);
      this.ys.copyWithin(i + 1, i, this.n);
    }
    this.xs[i] = x;
    this.ys[i] = y;
    this.n++;
  }

  /** Double the room, up to `max`; false when at `max` already. */
  private grow(): boolean {
    if (this.xs.length >= this.max) return false;
    const size = Math.min(this.max, this.xs.length * 2);
    const xs = new Float64Array(size);
    const ys = new Float64Array(size);
    xs.set(this.xs.subarray(0, this.n));
    ys.set(this.ys.subarray(0, this.n));
    this.xs = xs;
    this.ys = ys;
    return true;
  }

  /** Keep the x on a grid twice as coarse, until there is room. */
  private coarsen(): void {
    while (this.n >= this.xs.length) {
      this.grid *= 2;
      let k = 0;
      for (let i = 0; i < this.n; i++) {
        if (this.xs[i]! % this.grid !== 0) continue;
        this.xs[k] = this.xs[i]!;
        this.ys[k++] = this.ys[i]!;
      }
      this.n = k;
    }
  }

  private lowerBound(x: number): number {
    let lo = 0;
    let hi = this.n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.xs[mid]! < x) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private range(from: number, to: number): [number, number] {
    const a = Math.max(0, from < 0 ? this.n + from : from);
    const b = Math.min(this.n, to < 0 ? this.n + to : to);
    return [a, Math.max(a, b)];
  }
}
