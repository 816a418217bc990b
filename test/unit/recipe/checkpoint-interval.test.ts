/** The checkpoint-interval arithmetic (src/recipe/checkpoint-interval.ts) and its use on recipes (goodput-advice.ts). */
import { describe, expect, it } from 'vitest';
import {
  adviseInterval,
  divisors,
  goodput,
  jobMtbfSec,
  LLAMA3_FAILURES_PER_GPU_HOUR,
  youngDalySec,
  type IntervalInputs,
} from '../../../src/recipe/checkpoint-interval.js';
import { checkpointAdvice } from '../../../src/recipe/goodput-advice.js';
import { loadRecipe } from '../../../src/recipe/load.js';

const HOUR = 3600;
const DAY = 24 * HOUR;

describe('the failure rate', () => {
  it("defaults to Llama 3's: 419 interruptions in 54 days on 16,384 GPUs", () => {
    expect(LLAMA3_FAILURES_PER_GPU_HOUR).toBeCloseTo(1.9733e-5, 8);
  });

  it.each([
    // GPUs, MTBF of the job (hours) at Llama 3's rate
    [1, 50_677],
    [8, 6334.5],
    [32, 1583.6],
    [1024, 49.49],
    [16384, 3.093],
  ])('a job on %i GPUs fails every %f hours', (gpus, hours) => {
    expect(jobMtbfSec(LLAMA3_FAILURES_PER_GPU_HOUR, gpus) / HOUR).toBeCloseTo(hours, 0);
  });

  it('scales with the GPU count: twice the GPUs, half the time between failures; none without GPUs', () => {
    const rate = 1e-4;
    for (const g of [1, 8, 64, 512]) expect(jobMtbfSec(rate, 2 * g)).toBeCloseTo(jobMtbfSec(rate, g) / 2, 6);
    expect(jobMtbfSec(rate, 0)).toBe(Infinity);
  });
});

describe('Young–Daly and the first-order goodput', () => {
  it.each([
    // δ (s), M (s), τ* = √(2δM) (s)
    [60, DAY, 3219.94],
    [30, 6 * HOUR, 1138.42],
    [90, 30 * DAY, 21_600],
    [1, 50, 10],
  ])('save %ss, MTBF %ss: optimum period %ss', (save, mtbf, tau) => {
    expect(youngDalySec(save, mtbf)).toBeCloseTo(tau, 1);
  });

  it.each([
    // τ, δ, R, M, goodput = 1 − δ/τ − (τ/2 + R)/M
    [3600, 60, 600, DAY, 1 - 60 / 3600 - 2400 / DAY],
    [600, 30, 0, 6 * HOUR, 1 - 30 / 600 - 300 / (6 * HOUR)],
    [1, 60, 0, DAY, 0], // saving costs more than the period: clamped
  ])('goodput of a %ss period (save %ss, restart %ss, MTBF %ss) is %f', (tau, save, restart, mtbf, expected) => {
    expect(goodput(tau, { saveSec: save, restartSec: restart, mtbfSec: mtbf })).toBeCloseTo(expected, 9);
  });

  it.each([
    [60, 600, DAY],
    [30, 300, 6 * HOUR],
    [300, 0, 30 * DAY],
    [5, 60, HOUR],
  ])('no period beats the optimum (save %ss, restart %ss, MTBF %ss)', (save, restart, mtbf) => {
    const c = { saveSec: save, restartSec: restart, mtbfSec: mtbf };
    const best = goodput(youngDalySec(save, mtbf), c);
    expect(best).toBeCloseTo(1 - Math.sqrt((2 * save) / mtbf) - restart / mtbf, 9);
    for (const f of [0.1, 0.5, 0.8, 0.95, 1.05, 1.25, 2, 10]) expect(goodput(f * youngDalySec(save, mtbf), c)).toBeLessThan(best);
  });
});

describe('adviseInterval', () => {
  const base: IntervalInputs = { iterationSec: 90, saveSec: 60, restartSec: 600, failuresPerGpuHour: LLAMA3_FAILURES_PER_GPU_HOUR, gpus: 8 };

  it('gives the whole number of iterations nearest τ* with the better goodput, never beaten by another interval', () => {
    const a = adviseInterval(1000, base);
    expect(a.optimum.iterations).toBe(Math.round(youngDalySec(60, a.mtbfSec) / 90));
    for (const n of [1, 10, 100, 300, 500, 579, 580, 582, 583, 700, 1000, 5000, 40_000]) {
      expect(adviseInterval(n, base).current.goodput).toBeLessThanOrEqual(a.optimum.goodput);
    }
    expect(a.suggested).toEqual({ iterations: a.optimum.iterations, goodput: a.optimum.goodput });
  });

  it('caps the optimum at the span that is saved anyway, where longer intervals change nothing', () => {
    const a = adviseInterval(1000, { ...base, span: 200 });
    expect(a.optimum.iterations).toBe(200);
    expect(a.current.goodput).toBe(a.optimum.goodput);
  });

  it('suggests the best interval that divides alignTo', () => {
    const a = adviseInterval(1000, { ...base, alignTo: 5000 });
    expect(a.optimum.iterations).toBe(581);
    expect(a.suggested.iterations).toBe(625);
    for (const d of divisors(5000)) expect(adviseInterval(d, base).current.goodput).toBeLessThanOrEqual(a.suggested.goodput);
  });

  it('has an optimum of at least one iteration', () => {
    expect(adviseInterval(5, { ...base, iterationSec: DAY }).optimum.iterations).toBe(1);
  });

  it.each([
    [1, [1]],
    [12, [1, 2, 3, 4, 6, 12]],
    [16, [1, 2, 4, 8, 16]],
    [10240, divisors(10240)],
  ])('divisors(%i)', (n, ds) => {
    expect(divisors(n)).toEqual(ds);
    for (const d of ds) expect(n % d).toBe(0);
  });
});

describe('checkpointAdvice on the 7B recipe', () => {
  const ESTIMATES = [
    'cpt.estimates={iterationTime: 90s, saveTime: 1m}',
    'sft.0.estimates={iterationTime: 20s, saveTime: 1m}',
    'rl.estimates={iterationTime: 10m, saveTime: 90s}',
  ];

  it.each([
    // failure rate, then per stage: [path, GPUs, goodput of the preset's interval, optimum, suggested].
    // cpt: 1000 × 90 s between saves; at Llama 3's rate M = 3600 / (1.9733e-5 × 8) = 22.8e6 s, so
    // goodput = 1 − 60/90000 − (45000 + 600)/22.8e6 = 0.99733; the optimum √(2 × 60 × M) / 90 s = 581, and the
    // phase boundaries 5000 and 35000 make it 625. rl: every curriculum stage is 10240 rollouts.
    [
      LLAMA3_FAILURES_PER_GPU_HOUR,
      [
        ['cpt', 8, 0.99733, 581, 625],
        ['sft.0', 16, 0.99607, 1850, 1850],
        ['rl', 32, 0.99134, 53, 64],
      ],
    ],
    [
      2e-3,
      [
        ['cpt', 8, 0.79667, 58, 50],
        ['sft.0', 16, 0.90278, 184, 184],
        ['rl', 32, 0.87517, 5, 5],
      ],
    ],
  ] as const)('at %f failures per GPU-hour', async (rate, expected) => {
    const { recipe } = await loadRecipe('recipes/qwen2.5-7b-fp8.yaml', { sets: [...ESTIMATES, `goodput.failureRate=${rate}`] });
    const byPath = new Map(checkpointAdvice(recipe).map((s) => [s.path, s]));
    for (const [path, gpus, current, optimum, suggested] of expected) {
      const s = byPath.get(path)!;
      expect(s.gpus).toBe(gpus);
      expect(s.advice!.current.goodput).toBeCloseTo(current, 4);
      expect(s.advice!.optimum.iterations).toBe(optimum);
      expect(s.advice!.suggested.iterations).toBe(suggested);
    }
    expect(byPath.get('sft.1')).toMatchObject({ gpus: 16, saveInterval: 1000, missing: 'estimates' });
  });

  it('has nothing to advise where a stage runs without GPUs', async () => {
    const { recipe } = await loadRecipe('tiny', { sets: ['cpt.estimates={iterationTime: 1, saveTime: 1}'] });
    expect(checkpointAdvice(recipe).map((s) => [s.path, s.missing])).toEqual([
      ['cpt', 'gpus'],
      ['sft.0', 'gpus'],
      ['sft.1', 'gpus'],
      ['rl', 'gpus'],
    ]);
  });
});
