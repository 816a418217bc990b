/** A step's log as series (step-series.ts) and their downsampling (downsample.ts). */
import { describe, expect, it } from 'vitest';
import { Curve } from '../../../src/report/curve.js';
import { downsample } from '../../../src/report/downsample.js';
import { stepSeries } from '../../../src/report/step-series.js';

const it_ = (i: number, loss: number) =>
  ` [2026-01-01 00:00:0${i % 10}] iteration ${String(i).padStart(8)}/      10 | consumed samples: ${i * 16} | elapsed time per iteration (ms): 50.0 | throughput per GPU (TFLOP/s/GPU): 0.0 | learning rate: 1.000000E-03 | global batch size:    16 | lm loss: ${loss.toExponential(6)} | loss scale: 1.0 | grad norm: 0.500 | number of skipped iterations:   0 | number of nan iterations:   0 |`;

describe('stepSeries', () => {
  it('keeps the resumed attempt value of an iteration trained twice, and the attempts with their ends', () => {
    const s = stepSeries(
      [
        '[infir2 2026-01-01T00:00:00.000Z] attempt 1 starting fresh: python main.py cpt',
        it_(1, 3), it_(2, 2.5), it_(3, 2.4),
        '[infir2 2026-01-01T00:00:05.000Z] attempt 1 ended: signal SIGKILL',
        '[infir2 2026-01-01T00:00:05.000Z] attempt 1 failed: crash: killed by SIGKILL',
        '[infir2 2026-01-01T00:00:10.000Z] attempt 2 resuming from iteration 2: python main.py cpt',
        it_(3, 2.3), it_(4, 2.2),
        '[infir2 2026-01-01T00:00:12.000Z] attempt 2 ended: exit code 0',
      ].join('\n'),
    );
    expect(s.loss.points()).toEqual([{ x: 1, y: 3 }, { x: 2, y: 2.5 }, { x: 3, y: 2.3 }, { x: 4, y: 2.2 }]);
    expect(s.throughput.at(0)).toEqual({ x: 1, y: 20 }); // 1000 / 50 ms: the CPU trainer counts no FLOPs
    expect(s.throughputUnit).toBe('it/s');
    expect(s.attempts).toEqual([
      { attempt: 1, start: '2026-01-01T00:00:00.000Z', end: '2026-01-01T00:00:05.000Z', resumedFrom: null, failure: { class: 'crash', reason: 'killed by SIGKILL' } },
      { attempt: 2, start: '2026-01-01T00:00:10.000Z', end: '2026-01-01T00:00:12.000Z', resumedFrom: 2 },
    ]);
    expect(s.totalIterations).toBe(10);
  });

  it('reads slime lines behind a Ray prefix, and says where a rotated log was cut', () => {
    const s = stepSeries(
      [
        "(MegatronTrainRayActor pid=7) step 0: {'train/loss': 0.9, 'train/grad_norm': np.float64(1.5), 'train/lr-pg_0': 1e-05}",
        "(RolloutManager pid=8) rollout 0: {'rollout/raw_reward': 0.25, 'rollout/response_lengths': 812.5, 'rollout/zero_std_groups': 4/16}",
        "(RolloutManager pid=8) perf 0: {'perf/rollout_time': 3.1, 'perf/tokens_per_gpu_per_sec': 1850.5}",
        "(RolloutManager pid=8) eval 0: {'eval/aime': 0.3, 'eval/aime-truncated_ratio': 0.1}",
        '[infir2 2026-01-01T00:00:00.000Z] log rotated: 12.0 MB dropped between here and the newest part (cap logs.maxMB=16)',
      ].join('\n'),
    );
    expect(s.stepLoss.points()).toEqual([{ x: 0, y: 0.9 }]);
    expect(s.stepGradNorm.points()).toEqual([{ x: 0, y: 1.5 }]);
    expect(s.stepLr.points()).toEqual([{ x: 0, y: 1e-5 }]);
    expect(s.reward.points()).toEqual([{ x: 0, y: 0.25 }]);
    expect(s.responseLength.points()).toEqual([{ x: 0, y: 812.5 }]);
    expect(s.rolloutThroughput.points()).toEqual([{ x: 0, y: 1850.5 }]);
    expect(s.throughputUnit).toBe('tokens/s/GPU');
    expect(s.rolloutEvals).toEqual([{ rollout: 0, scores: { aime: 0.3 } }]);
    expect(s.cut).toBe('12.0 MB dropped between here and the newest part (cap logs.maxMB=16)');
  });
});

describe('held-out losses', () => {
  const val = (it: number, loss: number, tail = '') => ` validation loss at iteration ${it}${tail} | lm loss value: ${loss.toExponential(6)} | lm loss PPL: 1.0E+01 | `;
  it("reads Megatron's periodic and final validation as one series and keeps the test split apart", () => {
    const s = stepSeries([it_(1, 3), val(2, 2.9), it_(2, 2.8), val(4, 2.7), val(4, 2.65, ' on validation set'), val(4, 2.75, ' on test set'), ' validation-1 loss at iteration 4 | lm loss value: 3.100000E+00 | '].join('\n'));
    expect(s.validation.points()).toEqual([{ x: 2, y: 2.9 }, { x: 4, y: 2.65 }]); // the final line of 4 after the periodic one
    expect(s.test.points()).toEqual([{ x: 4, y: 2.75 }]);
    expect(s.otherValidation).toEqual([{ name: 'validation-1', points: expect.anything() }]);
    expect(s.otherValidation[0]!.points.points()).toEqual([{ x: 4, y: 3.1 }]);
  });

  it('counts skipped and NaN iterations once each, the resumed attempt replacing what it trains again', () => {
    const line = (i: number, skipped: number, nan: number) => it_(i, 2).replace('skipped iterations:   0 | number of nan iterations:   0', `skipped iterations:   ${skipped} | number of nan iterations:   ${nan}`);
    const s = stepSeries([line(1, 0, 0), line(2, 3, 1), line(3, 2, 2), '[infir2 2026-01-01T00:00:10.000Z] attempt 2 resuming from iteration 2: x', line(3, 0, 0), line(4, 1, 0)].join('\n'));
    expect([s.skippedIterations, s.nanIterations]).toEqual([4, 1]);
  });
});

describe('downsample', () => {
  it('leaves a short series alone', () => {
    const pts = Array.from({ length: 50 }, (_, i) => ({ x: i, y: i }));
    expect(downsample(Curve.of(pts), 100)).toEqual(pts);
  });

  it('keeps a one-point spike and a one-point dip, the ends, and at most the budget', () => {
    const pts = Array.from({ length: 100_000 }, (_, i) => ({ x: i, y: 2 + Math.sin(i / 500) * 0.1 }));
    pts[31_337]!.y = 50;
    pts[77_001]!.y = -5;
    const d = downsample(Curve.of(pts), 2_000);
    expect(d.length).toBeLessThanOrEqual(2_000);
    expect(d).toContainEqual({ x: 31_337, y: 50 });
    expect(d).toContainEqual({ x: 77_001, y: -5 });
    expect(d[0]).toEqual(pts[0]);
    expect(d.at(-1)).toEqual(pts.at(-1));
    expect(d.every((p, i) => i === 0 || p.x > d[i - 1]!.x)).toBe(true); // in order, no point twice
  });
});
