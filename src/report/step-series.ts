/**
 * One step's log as series to chart: training and validation loss, learning rate, grad norm, throughput per
 * iteration (Megatron's lines, the reference trainer's); loss per step (slime SFT/RL); reward, response length
 * and evaluation scores per rollout (slime, the reference RL trainer); and the attempts with their ends, from the
 * `[infir2 …]` lines the supervisor writes. Pure: text in, data out (the parsers are the supervisor's own,
 * activities/progress-parsers.ts).
 *
 * A resumed attempt trains some iterations again (those after its checkpoint): the later value of an iteration
 * wins, so a series is the trajectory the kept checkpoints carry.
 */
import { parseMetricsLine } from '../engine-logs/progress-parsers.js';

export interface Point {
  x: number;
  y: number;
}

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
  loss: Point[];
  validation: Point[];
  lr: Point[];
  gradNorm: Point[];
  throughput: Point[];
  throughputUnit: string | null;
  /** slime `step k` lines (SFT/RL optimizer steps). */
  stepLoss: Point[];
  stepLr: Point[];
  stepGradNorm: Point[];
  /** Per rollout (x = rollout id). */
  reward: Point[];
  responseLength: Point[];
  rolloutThroughput: Point[];
  rolloutEvals: { rollout: number; scores: Record<string, number> }[];
  attempts: Attempt[];
  /** The last iteration line's total (the step's planned end), if printed. */
  totalIterations: number | null;
  /** Lines past a rotation's cut were dropped from the middle of the log: the series has a gap there. */
  cut: string | null;
  /** The last `[infir2 …]` time: bounds an attempt with no end line (its worker died, or it still runs). */
  lastTime: string | null;
}

const INFIR2 = /^\[infir2 (\S+)\] (.*)$/;
const STARTING = /^attempt (\d+) (?:resuming from iteration (\d+)|starting fresh)/;
const ENDED = /^attempt (\d+) ended:/;
const FAILED = /^attempt (\d+) failed: (\w+): (.*)$/;
const NOT_STARTED = /^attempt (\d+) not started: (.*)$/;
const ROTATED = /^log rotated: (.*)$/;

/** Sorted by x, the last value of each x kept. */
class Series {
  private readonly byX = new Map<number, number>();
  put(x: number, y: number | undefined): void {
    if (y === undefined || !Number.isFinite(y)) return;
    this.byX.delete(x); // re-insert: a resumed attempt's value replaces the earlier one
    this.byX.set(x, y);
  }
  points(): Point[] {
    return [...this.byX].map(([x, y]) => ({ x, y })).sort((a, b) => a.x - b.x);
  }
}

export function stepSeries(text: string): StepSeries {
  const s = {
    loss: new Series(), validation: new Series(), lr: new Series(), gradNorm: new Series(), throughput: new Series(),
    stepLoss: new Series(), stepLr: new Series(), stepGradNorm: new Series(),
    reward: new Series(), responseLength: new Series(), rolloutThroughput: new Series(),
  };
  const rolloutEvals = new Map<number, Record<string, number>>();
  const attempts = new Map<number, Attempt>();
  let unit: string | null = null;
  let total: number | null = null;
  let cut: string | null = null;
  let lastTime: string | null = null;

  for (const raw of text.split('\n')) {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    const mark = INFIR2.exec(line);
    if (mark) {
      const [, time, what] = mark as unknown as [string, string, string];
      lastTime = time;
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
        cut = m[1]!;
      }
      continue;
    }
    const m = parseMetricsLine(line);
    if (!m) continue;
    switch (m.kind) {
      case 'train':
        s.loss.put(m.iteration, m.loss);
        s.lr.put(m.iteration, m.lr);
        s.gradNorm.put(m.iteration, m.gradNorm);
        if (m.throughput !== undefined) {
          s.throughput.put(m.iteration, m.throughput);
          unit = m.throughputUnit ?? unit;
        }
        if (m.totalIterations !== undefined) total = m.totalIterations;
        break;
      case 'validation':
        s.validation.put(m.iteration, m.loss);
        break;
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
        if (m.throughputUnit) unit ??= m.throughputUnit;
        break;
      case 'eval':
        if (Object.keys(m.scores).length) rolloutEvals.set(m.rollout, m.scores);
        break;
    }
  }
  return {
    loss: s.loss.points(), validation: s.validation.points(), lr: s.lr.points(), gradNorm: s.gradNorm.points(),
    throughput: s.throughput.points(), throughputUnit: unit,
    stepLoss: s.stepLoss.points(), stepLr: s.stepLr.points(), stepGradNorm: s.stepGradNorm.points(),
    reward: s.reward.points(), responseLength: s.responseLength.points(), rolloutThroughput: s.rolloutThroughput.points(),
    rolloutEvals: [...rolloutEvals].map(([rollout, scores]) => ({ rollout, scores })).sort((a, b) => a.rollout - b.rollout),
    attempts: [...attempts.values()].sort((a, b) => a.attempt - b.attempt),
    totalIterations: total,
    cut,
    lastTime,
  };
}
