/**
 * Which numbers a step's row shows, decided once for every view of it: the Web UI stage table
 * (status-table.ts, inside the workflow sandbox), `infir2 status` and the live lines of `infir2 run`/`resume`
 * (src/cli/status-view.ts, src/cli/progress-view.ts). Pure and deterministic, with no Node imports.
 *
 * A completed or kept step shows its final result: its heartbeat progress may be stale (the last checkpoint
 * before the end, or a kept step's earlier run). A pending, running or failed step shows its progress.
 */
import type { StepResult, StepState } from '../plan/contracts.js';

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
