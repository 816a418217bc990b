/**
 * The retry rule: whether a failed attempt is tried again, and how long to pause first. Pure functions of the
 * step's retry memory, the failure and the budgets; workflow-safe (types only), tested with tables.
 *
 * A budget bounds a restart loop, not the length of a run. `retries.<class>` is how many failures of that class
 * in a row may come without progress, progress being a complete checkpoint newer than the newest one known at the
 * previous failure (at the first failure: newer than the checkpoint the step started from). A failure after
 * progress is retried whatever its class's budget (config excepted) and clears the streak of every class: the
 * new checkpoint shows that restarts work, whatever failed before it; the number of checkpoints a step saves
 * bounds how often that can happen. So a two-week stage that is interrupted every other day keeps going, and a
 * step that dies before its next save stops after its budget.
 */
import type { FailureClass, RetryBudgets } from '../plan/types.js';

/** What the rule remembers between failures (kept in the StepState, carried over continue-as-new). */
export interface RetryMemory {
  /** Failures in a row without progress, by class; a failure after progress sets them all to 0. */
  streaks: Partial<Record<FailureClass, number>>;
  /**
   * The newest complete checkpoint known at any failure so far (a high-water mark: a failure that reports none,
   * or an older one, does not lower it); undefined before the first failure.
   */
  checkpoint: number | null | undefined;
}

/** One failure as the workflow learns it. */
export interface FailureFacts {
  cls: FailureClass;
  /** The newest complete checkpoint known at the failure; null: none, or not known (a lost worker's last word). */
  checkpoint: number | null;
  /** The checkpoint the step started from (its first attempt resumed from it; null: a fresh start). */
  startedFrom: number | null;
}

export interface RetryVerdict {
  retry: boolean;
  /** The failure came after a checkpoint newer than the previous failure's (or the start's). */
  progressed: boolean;
  /** Failures of this class in a row without progress, this one included (0 after progress). */
  streak: number;
  /** The memory after this failure. */
  memory: RetryMemory;
  /** Why the step stops, for its failure message; null when it is retried. */
  why: string | null;
}

const newer = (a: number | null, than: number | null) => a !== null && (than === null || a > than);

export function judgeFailure(memory: RetryMemory, f: FailureFacts, budgets: RetryBudgets): RetryVerdict {
  const baseline = memory.checkpoint === undefined ? f.startedFrom : memory.checkpoint;
  const progressed = newer(f.checkpoint, baseline);
  const mark = progressed ? f.checkpoint : baseline;
  const streaks = progressed ? {} : { ...memory.streaks, [f.cls]: (memory.streaks[f.cls] ?? 0) + 1 };
  const streak = streaks[f.cls] ?? 0;
  const next = { streaks, checkpoint: mark };
  if (f.cls === 'config') return { retry: false, progressed, streak, memory: next, why: 'a configuration error is never retried' };
  const budget = budgets[f.cls];
  if (streak <= budget) return { retry: true, progressed, streak, memory: next, why: null };
  const failures = streak === 1 ? `1 ${f.cls} failure` : `${streak} consecutive ${f.cls} failures`;
  const past = mark === null ? '(no complete checkpoint yet)' : `past checkpoint ${mark}`;
  return { retry: false, progressed, streak, memory: next, why: `restart loop: ${failures} without progress ${past}; retries.${f.cls} is ${budget}` };
}

/** The longest pause between storage attempts: a freed disk is noticed within this. */
const STORAGE_BACKOFF_MAX_SEC = 600;

/**
 * Pause before the next attempt. A storage fault (a full disk) waits for a person, so its pauses double from the
 * retry delay up to 10 minutes, counted by the streak (a save that got through starts again from the retry
 * delay); any other class retries after the retry delay.
 */
export function retryPauseSec(cls: FailureClass, streak: number, retryDelaySec: number): number {
  if (cls !== 'storage') return retryDelaySec;
  return Math.min(Math.max(retryDelaySec, 1) * 2 ** Math.max(streak - 1, 0), STORAGE_BACKOFF_MAX_SEC);
}
