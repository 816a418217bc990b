/** The report's curves (curve.ts): sorted, last value of an x wins, never more than their bound. */
import { describe, expect, it } from 'vitest';
import { Curve } from '../../../src/report/curve.js';

describe('Curve', () => {
  it('keeps the points sorted by x, the last value put for an x, and no non-finite value', () => {
    const c = new Curve();
    for (const [x, y] of [[3, 30], [1, 10], [2, 20], [2, 21], [5, Number.NaN], [4, Number.POSITIVE_INFINITY], [6, 60]] as const) c.put(x, y);
    c.put(7, undefined);
    expect(c.points()).toEqual([{ x: 1, y: 10 }, { x: 2, y: 21 }, { x: 3, y: 30 }, { x: 6, y: 60 }]);
    expect(c.length).toBe(4);
    expect(c.last()).toEqual({ x: 6, y: 60 });
    expect(c.at(-2)).toEqual({ x: 3, y: 30 });
    expect(c.yAt(2)).toBe(21);
    expect(c.yAt(5)).toBeUndefined();
    expect(c.values(-2)).toEqual([30, 60]);
    expect(c.points(1, 3)).toEqual([{ x: 2, y: 21 }, { x: 3, y: 30 }]);
    expect(c.shifted(10).points().map((p) => p.x)).toEqual([11, 12, 13, 16]);
  });

  it('a resumed attempt that trains iterations again replaces their values and goes on', () => {
    const c = new Curve();
    for (let i = 1; i <= 500; i++) c.put(i, 1);
    for (let i = 401; i <= 600; i++) c.put(i, 2);
    expect(c.length).toBe(600);
    expect(c.yAt(400)).toBe(1);
    expect(c.yAt(401)).toBe(2);
    expect(c.yAt(600)).toBe(2);
  });

  it('never holds more than its bound: past it, only x on a coarser grid, the newest points still taken', () => {
    const c = new Curve(64);
    for (let i = 1; i <= 1000; i++) c.put(i, i * 10);
    expect(c.length).toBeLessThanOrEqual(64);
    expect(c.grid).toBe(16);
    const xs = c.points().map((p) => p.x);
    expect(xs.every((x) => x % 16 === 0)).toBe(true);
    expect(xs.at(-1)).toBe(992); // the last multiple of 16 up to 1000
    expect(c.yAt(992)).toBe(9920);
    // A later value of a kept x still wins; an x off the grid is dropped.
    c.put(992, 1);
    c.put(993, 1);
    expect(c.yAt(992)).toBe(1);
    expect(c.yAt(993)).toBeUndefined();
  });

  it('coarsens a curve logged every 10th iteration too (its x are all even: the grid doubles until some go)', () => {
    const c = new Curve(8);
    for (let i = 10; i <= 200; i += 10) c.put(i, i);
    expect(c.length).toBeLessThanOrEqual(8);
    expect(c.points().every((p) => p.x % c.grid === 0)).toBe(true);
    expect(c.last()!.x).toBe(c.grid * Math.floor(200 / c.grid));
  });

  it('concatenates curves (CPT phases on one axis) and builds from points', () => {
    const a = Curve.of([{ x: 2, y: 2 }, { x: 1, y: 1 }]);
    const b = Curve.of([{ x: 3, y: 3 }]);
    expect(Curve.concat([b, a]).points()).toEqual([{ x: 1, y: 1 }, { x: 2, y: 2 }, { x: 3, y: 3 }]);
  });
});
