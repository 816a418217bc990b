/**
 * One step's log as series to chart: training loss, learning rate, grad norm, throughput per iteration
 * (Megatron's lines, the reference trainer's), validation and test loss apart; loss per step (slime SFT/RL);
 * reward, response length and evaluation scores per rollout (slime, the reference RL trainer); and the attempts
 * with their ends, from the `[infir2 …]` lines the supervisor writes. The lines are read with the supervisor's
 * own parsers (src/engine-logs/), one at a time: a log is streamed, never held whole, so its size does not
 * matter (the series are curves of bounded size, curve.ts).
 */
import { parseMetricsLine } from '../engine-logs/metrics.js';
import { Curve, MAX_CURVE_POINTS } from './curve.js';

export { Curve, type Point } from './curve.js';

export interface Attempt {
  attempt: number;
  start: string;
  end: string | null;
  /** null: started fresh. */
  resumedFrom: number | null;
  /** `crash: exit code 1`, absent when it ended well (or has not ended). */
  failure?: { class: string; reason: string };
}

export interface StepSeries {
  /** Megatron-style iterations (CPT, the reference trainer's SFT and RL). */
  loss: Curve;
  /** Megatron's validation split: periodic (`validation loss at iteration N`) and final (`… on validation set`). */
  validation: Curve;
  /** Megatron's test split (`… on test set`, once at the end of training): never mixed with validation. */
  test: Curve;
  /** `--multiple-validation-sets`: the sets after the first (`validation-1 loss at …`), by name. */
  otherValidation: { name: string; points: Curve }[];
  lr: Curve;
  gradNorm: Curve;
  throughput: Curve;
  throughputUnit: string | null;
  /** Iterations Megatron counted as skipped, and with a NaN/inf loss (each iteration once, the last attempt's). */
  skippedIterations: number;
  nanIterations: number;
  /** slime `step k` lines (SFT/RL optimizer steps). */
  stepLoss: Curve;
  stepLr: Curve;
  stepGradNorm: Curve;
  /** Per rollout (x = rollout id). */
  reward: Curve;
  responseLength: Curve;
  rolloutThroughput: Curve;
  rolloutEvals: { rollout: number; scores: Record<string, number> }[];
  attempts: Attempt[];
  /** The last iteration line's total (the step's planned end), if printed. */
  totalIterations: number | null;
  /** Lines past a rotation's cut were dropped from the middle of the log: the series has a gap there. */
  cut: string | null;
  /** The last `[infir2 …]` time: bounds an attempt with no end line (its worker died, or it still runs). */
  lastTime: string | null;
  /** The coarsest grid a curve fell back to past MAX_CURVE_POINTS (1: every point kept). */
  grid: number;
}

const INFIR2 = /^\[infir2 (\S+)\] (.*)$/;
const STARTING = /^attempt (\d+) (?:resuming from iteration (\d+)|starting fresh)/;
const ENDED = /^attempt (\d+) ended:/;
const FAILED = /^attempt (\d+) failed: (\w+): (.*)$/;
const NOT_STARTED = /^attempt (\d+) not started: (.*)$/;
const ROTATED = /^log rotated: (.*)$/;

/** Reads a log a line at a time (`line`), then `finish()` gives its series. */
export class StepSeriesBuilder {
  private readonly c;
  private readonly otherValidation = new Map<number, Curve>();
  private readonly rolloutEvals = new Map<number, Record<string, number>>();
  private readonly attempts = new Map<number, Attempt>();
  private unit: string | null = null;
  private total: number | null = null;
  private cut: string | null = null;
  private lastTime: string | null = null;

  constructor(private readonly maxPoints = MAX_CURVE_POINTS) {
    const c = () => new Curve(maxPoints);
    this.c = {
      loss: c(), validation: c(), test: c(), lr: c(), gradNorm: c(), throughput: c(),
      stepLoss: c(), stepLr: c(), stepGradNorm: c(),
      reward: c(), responseLength: c(), rolloutThroughput: c(),
      skipped: c(), nan: c(),
    };
  }

  line(raw: string): void {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (line.startsWith('[infir2 ')) {
      const mark = INFIR2.exec(line);
      if (mark) return this.mark(mark[1]!, mark[2]!);
    }
    const m = parseMetricsLine(line);
    if (!m) return;
    const s = this.c;
    switch (m.kind) {
      case 'train':
        s.loss.put(m.iteration, m.loss);
        s.lr.put(m.iteration, m.lr);
        s.gradNorm.put(m.iteration, m.gradNorm);
        if (m.throughput !== undefined) {
          s.throughput.put(m.iteration, m.throughput);
          this.unit = m.throughputUnit ?? this.unit;
        }
        // Counts per logged interval, kept by iteration where not 0 (a resumed attempt's replace the first's).
        if (m.skipped || s.skipped.yAt(m.iteration) !== undefined) s.skipped.put(m.iteration, m.skipped ?? 0);
        if (m.nan || s.nan.yAt(m.iteration) !== undefined) s.nan.put(m.iteration, m.nan ?? 0);
        if (m.totalIterations !== undefined) this.total = m.totalIterations;
        break;
      case 'validation': {
        if (m.split === 'test') s.test.put(m.iteration, m.loss);
        else if (!m.set) s.validation.put(m.iteration, m.loss);
        else {
          if (!this.otherValidation.has(m.set)) this.otherValidation.set(m.set, new Curve(this.maxPoints));
          this.otherValidation.get(m.set)!.put(m.iteration, m.loss);
        }
        break;
      }
      case 'step':
        s.stepLoss.put(m.step, m.loss);
        s.stepLr.put(m.step, m.lr);
        s.stepGradNorm.put(m.step, m.gradNorm);
        break;
      case 'rollout':
        s.reward.put(m.rollout, m.reward);
        s.responseLength.put(m.rollout, m.responseLength);
        break;
      case 'perf':
        s.rolloutThroughput.put(m.rollout, m.throughput);
        if (m.throughputUnit) this.unit ??= m.throughputUnit;
        break;
      case 'eval':
        if (Object.keys(m.scores).length) this.rolloutEvals.set(m.rollout, m.scores);
        break;
    }
  }

  private mark(time: string, what: string): void {
    this.lastTime = time;
    const attempts = this.attempts;
    let m: RegExpExecArray | null;
    if ((m = STARTING.exec(what))) {
      const n = Number(m[1]);
      attempts.set(n, { attempt: n, start: time, end: null, resumedFrom: m[2] !== undefined ? Number(m[2]) : null });
    } else if ((m = ENDED.exec(what))) {
      const a = attempts.get(Number(m[1]));
      if (a) a.end = time;
    } else if ((m = FAILED.exec(what))) {
      const n = Number(m[1]);
      const a = attempts.get(n) ?? { attempt: n, start: time, end: time, resumedFrom: null };
      a.end ??= time;
      a.failure = { class: m[2]!, reason: m[3]! };
      attempts.set(n, a);
    } else if ((m = NOT_STARTED.exec(what))) {
      const n = Number(m[1]);
      if (!attempts.has(n)) attempts.set(n, { attempt: n, start: time, end: time, resumedFrom: null, failure: { class: 'not started', reason: m[2]! } });
    } else if ((m = ROTATED.exec(what))) {
      this.cut = m[1]!;
    }
  }

  finish(): StepSeries {
    const { skipped, nan, ...curves } = this.c;
    const sum = (c: Curve) => c.values().reduce((a, b) => a + b, 0);
    const otherValidation = [...this.otherValidation].sort(([a], [b]) => a - b).map(([k, points]) => ({ name: `validation-${k}`, points }));
    return {
      ...curves,
      otherValidation,
      throughputUnit: this.unit,
      skippedIterations: sum(skipped),
      nanIterations: sum(nan),
      rolloutEvals: [...this.rolloutEvals].map(([rollout, scores]) => ({ rollout, scores })).sort((a, b) => a.rollout - b.rollout),
      attempts: [...this.attempts.values()].sort((a, b) => a.attempt - b.attempt),
      totalIterations: this.total,
      cut: this.cut,
      lastTime: this.lastTime,
      grid: Math.max(...Object.values(this.c).map((c) => c.grid), ...[...this.otherValidation.values()].map((c) => c.grid)),
    };
  }
}

/** The series of a log's whole text (a short one: a test's, a fixture's). */
export function stepSeries(text: string): StepSeries {
  const b = new StepSeriesBuilder();
  for (const line of text.split('\n')) b.line(line);
  return b.finish();
}
