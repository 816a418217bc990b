/**
 * The adaptive stall limits, driven by timestamps and progress events only: the issue's cases (a 1 s-iteration
 * hang caught within 30 s; a 90 s silent checkpoint load, a save silent for 20 iterations' time and RL rollouts of
 * 5–60 s not killed) and the rules behind them.
 */
import { describe, expect, it } from 'vitest';
import type { ProgressEvent } from '../../../src/engine-logs/progress-parsers.js';
import { fixedStallSpec, MIN_GAPS, newRhythm, observe, quantile, rhythmLimitSec, saveAllowanceSec, stallLimit, type Rhythm } from '../../../src/activities/stall-policy.js';
import { describeStallSpec, shortDuration } from '../../../src/plan/stall-words.js';
import type { StallSpec } from '../../../src/plan/types.js';

/** The recipe's defaults for training and for RL (src/recipe/schema-common.ts), with the 7B stall timeouts. */
const TRAIN: StallSpec = { startupSec: 1800, factor: 10, floorSec: 20, basis: 'p95', saveSec: 1800, evalSec: 1800, saveEvery: 100, evalEvery: null, capSec: 7200 };
const RL: StallSpec = { startupSec: 2700, factor: 3, floorSec: 600, basis: 'max', saveSec: 1800, evalSec: 1800, saveEvery: 20, evalEvery: null, capSec: 10800 };

/**
 * Replay a trainer: `events` are [seconds after launch, event]. Returns, at every second up to `until`, whether the
 * watchdog would have stopped it (silence longer than the limit in force), and the first such second.
 */
function replay(spec: StallSpec, events: [number, ProgressEvent][], until: number, longestSaveSec: number | null = null): { killedAt: number | null; r: Rhythm } {
  const t0 = 1_000_000;
  const r = newRhythm(t0, longestSaveSec);
  let i = 0;
  for (let sec = 0; sec <= until; sec += 0.25) {
    while (i < events.length && events[i]![0] <= sec) observe(spec, r, events[i++]![1], t0 + events[i - 1]![0] * 1000);
    const silent = (t0 + sec * 1000 - r.lastAdvance) / 1000;
    if (silent > stallLimit(spec, r).limitSec) return { killedAt: sec, r };
  }
  return { killedAt: null, r };
}

const iters = (from: number, to: number, at: (k: number) => number): [number, ProgressEvent][] =>
  Array.from({ length: to - from + 1 }, (_, j) => [at(from + j), { iteration: from + j }] as [number, ProgressEvent]);

describe('the issue\'s cases, with the default limits and no stallTimeout set', () => {
  it('a trainer of 1 s iterations that hangs at iteration 30 is stopped within 30 s of its last iteration', () => {
    const { killedAt } = replay(TRAIN, iters(1, 30, (k) => 5 + k), 200);
    expect(killedAt).not.toBeNull();
    expect(killedAt! - 35).toBeLessThanOrEqual(30);
    expect(killedAt! - 35).toBeGreaterThanOrEqual(20); // the floor: not on the first slow iteration
  });

  it('a silent 90 s checkpoint load, then normal training, is not stopped', () => {
    const events: [number, ProgressEvent][] = [[1, { loadingCheckpoint: true }], ...iters(101, 130, (k) => 91 + (k - 100))];
    expect(replay(TRAIN, events, 125).killedAt).toBeNull();
  });

  it('a 20 s checkpoint save of 1 s iterations, announced or not, is not stopped', () => {
    const announced: [number, ProgressEvent][] = [...iters(1, 100, (k) => k), [100.1, { savingCheckpoint: true }], [120, { checkpointSaved: 100 }], ...iters(101, 110, (k) => 120 + (k - 100))];
    expect(replay(TRAIN, announced, 131).killedAt).toBeNull();
    // Silent saves (no "saving" line): the gap after a multiple of saveInterval is a save's.
    const silent: [number, ProgressEvent][] = [...iters(1, 100, (k) => k), ...iters(101, 110, (k) => 120 + (k - 100))];
    expect(replay(TRAIN, silent, 131).killedAt).toBeNull();
    // The same silence elsewhere is a hang.
    const hang: [number, ProgressEvent][] = [...iters(1, 50, (k) => k), ...iters(51, 60, (k) => 100 + (k - 50))];
    expect(replay(TRAIN, hang, 111).killedAt).toBe(70.25);
  });

  it('a hang right after a save the trainer reported finished is held to the training limit, not the save allowance', () => {
    // Saved at iteration 100 (a multiple of the interval), then silent: a rank stopped in the next all-reduce.
    const events: [number, ProgressEvent][] = [...iters(1, 100, (k) => k), [100.1, { savingCheckpoint: true }], [101, { checkpointSaved: 100 }]];
    expect(replay(TRAIN, events, 300).killedAt).toBe(121.25);
    // Saved without a "saving" line first: the same.
    expect(replay(TRAIN, [...iters(1, 100, (k) => k), [101, { checkpointSaved: 100 }]], 300).killedAt).toBe(121.25);
  });

  it('RL rollouts of 5 to 60 s are not stopped; a hung rollout is, within minutes', () => {
    const lengths = [5, 60, 12, 5, 45, 30, 5, 60, 8, 20, 55, 5];
    let t = 30;
    const events = lengths.map((len, j) => [(t += len), { iteration: j + 1 }] as [number, ProgressEvent]);
    expect(replay(RL, events, t + 1).killedAt).toBeNull();
    const { killedAt } = replay(RL, events, t + 3600);
    expect(killedAt! - t).toBeGreaterThan(599); // max(10 min floor, 3 × 60 s)
    expect(killedAt! - t).toBeLessThan(601);
  });
});

describe('the save allowance learns from the step\'s own saves', () => {
  // As compile.ts renders it: 4× the longest save made, at least the training limit, at most saveSec.
  const LEARN: StallSpec = { ...TRAIN, saveFactor: 4 };
  /** 1 s iterations; a save announced after every multiple of 100 taking `saveSec`; then silent from `hangAt` on. */
  function savesThenSilence(saveSec: number, untilIteration: number): [number, ProgressEvent][] {
    const ev: [number, ProgressEvent][] = [];
    let t = 0;
    for (let k = 1; k <= untilIteration; k += 1) {
      ev.push([(t += 1), { iteration: k }]);
      if (k % 100 === 0) {
        ev.push([t + 0.1, { savingCheckpoint: true }]);
        ev.push([(t += saveSec), { checkpointSaved: k }]);
      }
    }
    return ev;
  }

  it('a rank that hangs during the third save, after two 20 s saves, is stopped at 4 × 20 s, not after 30 min', () => {
    // Iteration 300, its save announced, then nothing: the other ranks wait in the save's collective.
    const events = savesThenSilence(20, 299);
    const last = events.at(-1)![0];
    events.push([last + 1, { iteration: 300 }], [last + 1.1, { savingCheckpoint: true }]);
    const { killedAt, r } = replay(LEARN, events, last + 2000);
    expect(r.longestSaveSec).toBeCloseTo(20, 0);
    expect(killedAt! - (last + 1)).toBeGreaterThanOrEqual(80);
    expect(killedAt! - (last + 1)).toBeLessThan(81);
    // A save a little slower than the ones before is not a hang.
    const slower = savesThenSilence(20, 299);
    const l2 = slower.at(-1)![0];
    slower.push([l2 + 1, { iteration: 300 }], [l2 + 1.1, { savingCheckpoint: true }], [l2 + 61, { checkpointSaved: 300 }], [l2 + 62, { iteration: 301 }]);
    expect(replay(LEARN, slower, l2 + 62).killedAt).toBeNull();
  });

  it('the first save of a step gets saveSec; a resumed attempt starts from the saves its step made before', () => {
    const first = [...iters(1, 100, (k) => k), [100.1, { savingCheckpoint: true }]] as [number, ProgressEvent][];
    expect(replay(LEARN, first, 3000).killedAt! - 100).toBeGreaterThan(1799);
    // Attempt 2, after attempt 1's saves of 30 s: its first save is held to 120 s.
    expect(replay(LEARN, first, 3000, 30).killedAt! - 100).toBeCloseTo(120, 0);
  });

  it('floor: saves of milliseconds leave the training limit; bound: a 10-minute save still gets only saveSec', () => {
    expect(saveAllowanceSec(LEARN, 0.05)).toBeCloseTo(0.2);
    const r = newRhythm(0, 0.05);
    for (let k = 1; k <= 99; k += 1) observe(LEARN, r, { iteration: k }, k * 1000);
    observe(LEARN, r, { iteration: 100 }, 100_000);
    expect(stallLimit(LEARN, r)).toEqual({ phase: 'saving', limitSec: 20 });
    expect(saveAllowanceSec(LEARN, 600)).toBe(1800);
    // A plan recorded before the rule (no saveFactor) keeps saveSec whatever it has seen.
    expect(saveAllowanceSec(TRAIN, 5)).toBe(1800);
  });

  it('a save a trainer does not announce is measured from its interval\'s iteration to the next progress', () => {
    const r = newRhythm(0);
    for (let k = 1; k <= 100; k += 1) observe(LEARN, r, { iteration: k }, k * 1000);
    expect(r.phase).toBe('saving');
    observe(LEARN, r, { iteration: 101 }, 125_000);
    expect(r.longestSaveSec).toBe(25);
    expect(describeStallSpec(LEARN)).toBe('startup 30m, then max(20s, 10×p95 gap); save 30m (then 4×longest save); at most 2h');
  });
});

describe('the phases', () => {
  it('startup until MIN_GAPS gaps have been seen, then the rhythm', () => {
    const t0 = 0;
    const r = newRhythm(t0);
    expect(stallLimit(TRAIN, r)).toEqual({ phase: 'startup', limitSec: 1800 });
    for (let k = 1; k <= MIN_GAPS; k += 1) {
      observe(TRAIN, r, { iteration: k }, k * 3000);
      expect(stallLimit(TRAIN, r).phase).toBe('startup');
    }
    observe(TRAIN, r, { iteration: MIN_GAPS + 1 }, (MIN_GAPS + 1) * 3000);
    expect(r.gaps).toEqual([3, 3, 3]);
    expect(stallLimit(TRAIN, r)).toEqual({ phase: 'training', limitSec: 30 }); // 10 × 3 s over the 20 s floor
  });

  it('saves, evaluations and loads neither shorten the limit nor enter the rhythm', () => {
    const spec = { ...TRAIN, saveEvery: 10, evalEvery: 5 };
    const r = newRhythm(0);
    for (let k = 1; k <= 5; k += 1) observe(spec, r, { iteration: k }, k * 1000);
    expect(stallLimit(spec, r)).toEqual({ phase: 'evaluating', limitSec: 1800 });
    observe(spec, r, { iteration: 6 }, 65_000); // a 60 s evaluation
    expect(r.gaps).toEqual([1, 1, 1, 1]);
    observe(spec, r, { loadingCheckpoint: true }, 66_000);
    expect(stallLimit(spec, r).phase).toBe('startup');
    observe(spec, r, { iteration: 7 }, 300_000);
    expect(r.gaps).toEqual([1, 1, 1, 1]);
    expect(stallLimit(spec, r)).toEqual({ phase: 'training', limitSec: 20 });
    observe(spec, r, { savingCheckpoint: true }, 301_000);
    expect(stallLimit(spec, r)).toEqual({ phase: 'saving', limitSec: 1800 });
    observe(spec, r, { checkpointSaved: 7 }, 400_000);
    expect(r.lastAdvance).toBe(400_000);
    expect(stallLimit(spec, r).phase).toBe('training');
  });

  it('with --log-interval 10 the rhythm is the gap between printed lines: it is learned, not stuck at startup', () => {
    const r = newRhythm(0);
    // 0.5 s iterations printed every 10: a line every 5 s (issue 34: "stall limit 5m (startup)" at 360/480).
    for (let k = 10; k <= 60; k += 10) observe(TRAIN, r, { iteration: k }, k * 500);
    expect(stallLimit(TRAIN, r)).toEqual({ phase: 'training', limitSec: 50 });
  });

  it('a resume (a checkpoint load, then a jump in iterations) is not a gap', () => {
    const r = newRhythm(0);
    observe(TRAIN, r, { iteration: 1 }, 1000);
    observe(TRAIN, r, { iteration: 2 }, 2000);
    observe(TRAIN, r, { loadingCheckpoint: true }, 2500);
    for (const [k, t] of [[50, 30], [51, 31]]) observe(TRAIN, r, { iteration: k! }, t! * 1000);
    expect(r.gaps).toEqual([1, 1]);
  });

  it('stallTimeout bounds every limit; a step without adaptive limits has its stall timeout throughout', () => {
    const capped = { ...TRAIN, capSec: 300 };
    expect(stallLimit(capped, newRhythm(0))).toEqual({ phase: 'startup', limitSec: 300 });
    const fixed = fixedStallSpec(5);
    const r = newRhythm(0);
    for (let k = 1; k <= 10; k += 1) observe(fixed, r, { iteration: k }, k * 100);
    expect(stallLimit(fixed, r).limitSec).toBe(5);
    expect(describeStallSpec(fixed)).toBe('5s fixed');
  });
});

describe('the rule of the gaps', () => {
  it('p95 of steady training ignores a rare slow iteration; max follows the longest rollout', () => {
    const gaps = [...Array(99).fill(2), 40];
    expect(quantile(gaps, 0.95)).toBe(2);
    expect(rhythmLimitSec(TRAIN, gaps)).toBe(20);
    expect(rhythmLimitSec({ ...TRAIN, floorSec: 5 }, gaps)).toBe(20);
    expect(rhythmLimitSec(RL, gaps)).toBe(600);
    expect(rhythmLimitSec({ ...RL, floorSec: 60 }, gaps)).toBe(120);
  });

  it('7B CPT: 20 s iterations give a limit of minutes, not the scripts\' 2 h', () => {
    expect(rhythmLimitSec(TRAIN, Array(50).fill(20))).toBe(200);
  });

  it('says the limits in words', () => {
    expect(shortDuration(90)).toBe('90s');
    expect(shortDuration(200)).toBe('3m20s');
    expect(shortDuration(3600)).toBe('1h');
    expect(shortDuration(5400)).toBe('90m');
    expect(shortDuration(9000)).toBe('2h30m');
    expect(describeStallSpec({ ...TRAIN, evalEvery: 100 })).toBe('startup 30m, then max(20s, 10×p95 gap); save 30m, eval 30m; at most 2h');
  });
});
