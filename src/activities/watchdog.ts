/**
 * The supervisor's pure rules: how a progress event advances an attempt, and when an attempt must be stopped.
 * Functions of the progress and of timestamps only, so they are tested with tables, not processes.
 */
import type { Progress } from '../plan/contracts.js';
import type { ProgressEvent } from '../engine-logs/progress-parsers.js';

/**
 * Fold one progress event into the attempt's progress. `advanced`: a new iteration or checkpoint (what the
 * stall watchdog counts). The plan's total wins over the trainer's: a CPT phase ends at its boundary, not at
 * the schedule's `--train-iters` that Megatron prints.
 */
export function applyProgress(progress: Progress, ev: ProgressEvent, planTotal: number | null): { advanced: boolean; checkpointSaved: boolean } {
  let advanced = false;
  if (ev.iteration !== undefined && ev.iteration !== progress.iteration) {
    progress.iteration = ev.iteration;
    advanced = true;
  }
  if (ev.totalIterations !== undefined && planTotal === null) progress.totalIterations = ev.totalIterations;
  if (ev.loss !== undefined) progress.loss = ev.loss;
  if (ev.throughput !== undefined) {
    progress.throughput = ev.throughput;
    progress.throughputUnit = ev.throughputUnit ?? null;
  }
  const checkpointSaved = ev.checkpointSaved !== undefined;
  if (checkpointSaved) {
    progress.lastCheckpoint = ev.checkpointSaved!;
    advanced = true;
  }
  return { advanced, checkpointSaved };
}

export interface WatchdogClock {
  /** Now, ms since the epoch. */
  now: number;
  /** When the iteration or checkpoint last advanced (the attempt's start before the first event). */
  lastAdvance: number;
  /** The step's stall timeout, ms. */
  stallMs: number;
  /** When the attempt must end regardless (start + the step's attempt timeout). */
  deadline: number;
}

/** 'stall': no progress for the stall timeout (a hang); 'timeout': past the attempt deadline; null: carry on. */
export function watchdogVerdict(c: WatchdogClock): 'stall' | 'timeout' | null {
  if (c.now - c.lastAdvance > c.stallMs) return 'stall';
  if (c.now > c.deadline) return 'timeout';
  return null;
}
