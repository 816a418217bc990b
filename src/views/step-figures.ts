/**
 * Which numbers a step's row shows, decided once for every view of it: the Web UI stage table
 * (status-table.ts, inside the workflow sandbox), `infir2 status` and the live lines of `infir2 run`/`resume`
 * (src/cli/status-view.ts, src/cli/progress-view.ts). Pure and deterministic, with no Node imports.
 *
 * A completed or kept step shows its final result: its heartbeat progress may be stale (the last checkpoint
 * before the end, or a kept step's earlier run). A pending, running or failed step shows its progress.
 */
import type { StepResult, StepState } from '../plan/contracts.js';
import { runGoodput, stepGoodput, TIME_CATEGORIES, withAttempt, withLastHeard, type GoodputFigures } from '../plan/goodput.js';
import { shortDuration } from '../plan/stall-words.js';
import type { FailureClass } from '../plan/types.js';

/** An evaluation's headline score, read from its report's metrics. */
export interface HeadlineScore {
  /** The label a view shows: `acc`, `pass@1` or `score`. */
  label: 'acc' | 'pass@1' | 'score';
  value: number;
  /** Shown as a percentage: a fraction in [0, 1] of a rate (accuracy, pass@1). */
  percent: boolean;
}

export interface StepFigures {
  /** The step has finished and these figures are its result's. */
  finished: boolean;
  iteration: number | null;
  /** Total iterations, where known. */
  total: number | null;
  loss: number | null;
  /** The last good checkpoint (a finished step's final one). */
  checkpoint: number | null;
  /** A finished evaluation's headline score; null otherwise. */
  score: HeadlineScore | null;
}

const isNum = (x: number | null | undefined): x is number => typeof x === 'number';

/** The headline score of a report: accuracy, else pass@1, else score; null when it has none of them. */
export function headlineScore(m: StepResult['metrics'] | null | undefined): HeadlineScore | null {
  if (!m) return null;
  const rate = (x: number) => x >= 0 && x <= 1;
  if (isNum(m.accuracy)) return { label: 'acc', value: m.accuracy, percent: rate(m.accuracy) };
  if (isNum(m['pass@1'])) return { label: 'pass@1', value: m['pass@1'], percent: rate(m['pass@1']) };
  if (isNum(m.score)) return { label: 'score', value: m.score, percent: false };
  return null;
}

/** "acc 85.7 %" (a rate as a percentage), "score 12.3" (anything else to 3 significant digits). */
export function formatScore(s: HeadlineScore, space = ' '): string {
  const value = s.percent ? `${(s.value * 100).toFixed(1)}${space}%` : s.value.toPrecision(3);
  return `${s.label}${space}${value}`;
}

/** The figures a step shows: a finished step's result, otherwise its progress. */
/** Trained, with only the evaluations of its checkpoints left (stageRun's trainedAt): the steps after it may run. */
export function evaluating(s: StepState): boolean {
  return s.status === 'running' && !!s.trainedAt;
}

export function stepFigures(s: StepState): StepFigures {
  const p = s.progress;
  const r = s.result;
  if ((s.status === 'completed' || s.status === 'kept') && r !== null) {
    return {
      finished: true,
      iteration: r.iteration,
      total: p?.totalIterations ?? r.iteration,
      loss: r.loss,
      checkpoint: r.iteration,
      score: headlineScore(r.metrics),
    };
  }
  return {
    finished: false,
    iteration: p?.iteration ?? null,
    total: p?.totalIterations ?? null,
    loss: p?.loss ?? r?.loss ?? null,
    checkpoint: p?.lastCheckpoint ?? r?.iteration ?? null,
    score: null,
  };
}

/**
 * Where a step's time went: its recorded attempts, and a running attempt's time so far (from its heartbeat)
 * counted until `now` when given (the workflow's own views pass none: they read no clock). Null for a step that
 * has not run (or ran before the accounting: a kept step's time is its earlier run's).
 */
export function stepTimeFigures(s: StepState, now?: number): GoodputFigures | null {
  if (!s.time || s.status === 'kept') return null;
  const live = s.status === 'running' ? s.progress?.time : null;
  // A cancelled step's last attempt as last heard, closed when the step ended: the workflow records no time for an
  // attempt a cancel ended, so a run cancelled mid-step would show the goodput of the steps before it alone.
  const cancelled = s.status === 'cancelled' ? withLastHeard(s.time, s.progress?.time, s.endedAt ? Date.parse(s.endedAt) : null) : null;
  const st = cancelled ?? (live && live.endedAt === null && !s.time.attempts.some((a) => a.attempt === live.attempt) ? withAttempt(s.time, live) : s.time);
  if (!st.attempts.length && !st.earlier) return null;
  return stepGoodput(st, now);
}

/** A run's goodput from its steps' (those that ran). */
export function runTimeFigures(steps: StepState[], now?: number): GoodputFigures | null {
  const ran = steps.flatMap((s) => {
    const figures = stepTimeFigures(s, now);
    return figures ? [{ gpus: s.time!.gpus, figures }] : [];
  });
  return ran.length ? runGoodput(ran) : null;
}

/** "92.4 %" */
export const formatGoodput = (g: number | null, space = ' '): string => (g === null ? '' : `${(g * 100).toFixed(1)}${space}%`);

/**
 * One line: `goodput 87.3 % of 12m · other time: detection 25s, recomputed 8s, startup 12s · lost to failures:
 * hang 31s (0.02 GPU-h), crash 12s`. Categories under half a second are left out.
 */
export function goodputWords(f: GoodputFigures, space = ' '): string {
  const other = TIME_CATEGORIES.filter((c) => c !== 'productive' && (f.secs[c] ?? 0) >= 0.5)
    .sort((a, b) => (f.secs[b] ?? 0) - (f.secs[a] ?? 0))
    .map((c) => `${c}${space}${shortDuration(f.secs[c]!)}`);
  const lost = (Object.entries(f.lostSecByClass) as [FailureClass, number][])
    .filter(([, v]) => v >= 0.5)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => {
      const gpuh = f.gpuHoursLostByClass[k] ?? 0;
      return `${k}${space}${shortDuration(v)}${gpuh > 0 ? ` (${Number(gpuh.toPrecision(2))}${space}GPU-h)` : ''}`;
    });
  return [
    `goodput${space}${formatGoodput(f.goodput, space)} of ${shortDuration(f.totalSec)}`,
    other.length ? `other time: ${other.join(', ')}` : '',
    lost.length ? `lost to failures: ${lost.join(', ')}` : '',
  ].filter(Boolean).join(' · ');
}

/**
 * The scores of a step's checkpoints evaluated while it trained, per benchmark: `arith acc 61.0 %@20, 85.0 %@62`
 * (a failed evaluation: `@40 failed`). Empty when there are none.
 */
export function evalSeries(s: StepState, space = ' '): string {
  const evals = s.evals ?? [];
  if (!evals.length) return '';
  const names = [...new Set(evals.flatMap((e) => Object.keys(e.scores)))];
  const failed = evals.filter((e) => e.error).map((e) => `@${e.iteration}${space}failed`);
  const series = names.map((n) => {
    const points = evals.flatMap((e) => {
      const score = headlineScore(e.scores[n]);
      return score ? [`${formatScore(score, space).replace(/^\S+\s/, '')}@${e.iteration}`] : [];
    });
    const label = headlineScore(evals.find((e) => e.scores[n])?.scores[n])?.label ?? '';
    return `${n}${space}${label}${space}${points.join(', ')}`;
  });
  return [...series, ...failed].join('; ');
}
