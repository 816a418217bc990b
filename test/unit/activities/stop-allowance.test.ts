/** The allowance of a graceful stop, from the stall policy's limits (table tests, no processes). */
import { describe, expect, it } from 'vitest';
import { newRhythm, observe } from '../../../src/activities/stall-policy.js';
import { launchAllowanceSec, stopAllowanceMs } from '../../../src/activities/stop-allowance.js';
import type { StallSpec } from '../../../src/plan/types.js';

const spec: StallSpec = { startupSec: 600, factor: 3, floorSec: 20, basis: 'p95', saveSec: 300, evalSec: 120, saveEvery: 100, evalEvery: null, capSec: 3600 };

/** A rhythm after iterations 1..n, `gapSec` apart. */
function trained(n: number, gapSec: number) {
  const r = newRhythm(0);
  for (let i = 1; i <= n; i++) observe(spec, r, { iteration: i }, i * gapSec * 1000);
  return r;
}

describe('stopAllowanceMs', () => {
  it('gives a training attempt the rest of an iteration and a save: the training limit plus the saving limit', () => {
    // 10 s iterations: training limit max(20, 3 × 10) = 30 s; saving max(30, 300) = 300 s.
    expect(stopAllowanceMs(spec, trained(10, 10), 30_000)).toBe(330_000);
  });

  it('never less than the kill grace', () => {
    const small: StallSpec = { ...spec, floorSec: 1, saveSec: 1 };
    const r = newRhythm(0);
    for (let i = 1; i <= 10; i++) observe(small, r, { iteration: i }, i * 100);
    expect(stopAllowanceMs(small, r, 30_000)).toBe(30_000);
  });

  it('gives an attempt that has not trained (loading, no iteration yet) only the kill grace: it has nothing new to save', () => {
    expect(stopAllowanceMs(spec, newRhythm(0), 30_000)).toBe(30_000);
    const loading = trained(5, 10);
    observe(spec, loading, { loadingCheckpoint: true }, 60_000);
    expect(stopAllowanceMs(spec, loading, 30_000)).toBe(30_000);
  });

  it("is held by the cap (the recipe's stallTimeout) in each part", () => {
    expect(stopAllowanceMs({ ...spec, capSec: 60 }, trained(10, 10), 1_000)).toBe((30 + 60) * 1000);
  });
});

describe('launchAllowanceSec', () => {
  it('an iteration at the floor and a save, within the cap, never below the kill grace', () => {
    expect(launchAllowanceSec(spec, 30_000)).toBe(320);
    expect(launchAllowanceSec({ ...spec, capSec: 100 }, 30_000)).toBe(100);
    expect(launchAllowanceSec({ ...spec, floorSec: 1, saveSec: 1 }, 30_000)).toBe(30);
  });
});
