/**
 * A closed run's checkpoints as the disk has them. A cancelled trainer saves on SIGTERM after the workflow heard
 * its last progress, so the recorded `lastCheckpoint` of a cancelled (or failed) step can be older than the
 * newest complete checkpoint in its directory: what `resume` would load. `status` shows the newer one. Read on
 * the client only: the workflows never see it, so no history changes.
 */
import type { RunStatus, StepState } from '../plan/contracts.js';
import type { Plan } from '../plan/types.js';
import { inspectCheckpointDir } from './checkpoints.js';

/** The newest complete iteration in a checkpoint root; null when there is none or the directory cannot be read. */
export function newestCompleteOnDisk(dir: string): number | null {
  try {
    return inspectCheckpointDir(dir).latestComplete;
  } catch {
    return null; // not mounted here, or not readable by this user: the recorded value stands
  }
}

/**
 * Steps that started and did not finish (cancelled, failed, or `running` in a terminated run) whose plan step
 * has a checkpoint root: their `progress.lastCheckpoint` (and an iteration behind it) raised to the newest
 * complete iteration found there, never lowered. Steps that finished show their result; steps that never started are left alone, since CPT's
 * warmup and stable phases share one root and a skipped stable must not show warmup's checkpoints.
 */
export function withDiskCheckpoints(status: RunStatus, plan: Plan, newest: (dir: string) => number | null = newestCompleteOnDisk): RunStatus {
  const dirs = new Map(plan.steps.flatMap((s) => (s.checkpoint ? [[s.id, s.checkpoint.dir] as const] : [])));
  const steps = status.steps.map((s): StepState => {
    const dir = dirs.get(s.id);
    if (!dir || !(s.status === 'cancelled' || s.status === 'failed' || s.status === 'running')) return s;
    const onDisk = newest(dir);
    const recorded = s.progress?.lastCheckpoint ?? null;
    if (onDisk === null || (recorded !== null && onDisk <= recorded)) return s;
    const progress = s.progress ?? {
      iteration: null,
      totalIterations: null,
      loss: null,
      throughput: null,
      throughputUnit: null,
      lastCheckpoint: null,
      resumedFrom: null,
      attempt: s.attempts,
      pid: null,
      updatedAt: s.endedAt ?? s.startedAt ?? new Date(0).toISOString(),
    };
    // The trainer got at least as far as it saved: an ITER behind CKPT would read as a contradiction.
    const iteration = progress.iteration === null || progress.iteration < onDisk ? onDisk : progress.iteration;
    return { ...s, progress: { ...progress, iteration, lastCheckpoint: onDisk } };
  });
  return { ...status, steps };
}
