/**
 * The supervisor's lost-time ledger: each progress event at its timestamp says what the silence before it was
 * (plan/goodput.ts names the categories). Pure functions of events and timestamps, folded into the attempt's
 * record in place (it travels in the heartbeat details, so even a worker that dies leaves its last word):
 *
 *   scheduled → activity start      waiting (for a worker to take the attempt)
 *   start → launch                  waiting (GPU slots, the checkpoint directory's lock)
 *   launch → first iteration        startup (a "loading checkpoint" line makes what follows startup again)
 *   "saving" → "saved"              save
 *   iteration k−1 → iteration k     productive, or recomputed when k ≤ the highest iteration an earlier attempt
 *                                   reached (`redoUntil`): work a failure threw away, done again
 *   last event → stop/exit          on failure detection, on success overhead (plan/goodput.ts closeAttempt)
 */
import type { AttemptTime, OpenPhase, TimeCategory } from '../plan/goodput.js';
import { add } from '../plan/goodput.js';
import type { ProgressEvent } from './progress-parsers.js';

export function newAttemptTime(attempt: number, scheduledAt: number, startedAt: number, worker?: string): AttemptTime {
  const t: AttemptTime = { attempt, scheduledAt, endedAt: null, attributedTo: scheduledAt, open: 'waiting', secs: {}, lastIteration: null, failure: null, ...(worker ? { worker } : {}) };
  attribute(t, 'waiting', startedAt);
  return t;
}

/** Count the time since the last attribution as `cat`, up to `at`. */
function attribute(t: AttemptTime, cat: TimeCategory, at: number): void {
  if (at <= t.attributedTo) return;
  add(t.secs, cat, (at - t.attributedTo) / 1000);
  t.attributedTo = at;
}

/** What the open span is when an event ends it: training's time is its iteration's, kept or redone. */
function categoryOf(open: OpenPhase, iteration: number | null, redoUntil: number | null): TimeCategory {
  if (open !== 'training') return open;
  return iteration !== null && redoUntil !== null && iteration <= redoUntil ? 'recomputed' : 'productive';
}

/** The trainer was launched at `at`: the wait is over, its startup begins. */
export function launched(t: AttemptTime, at: number): void {
  attribute(t, 'waiting', at);
  t.open = 'startup';
}

/** Fold one progress event seen at `at`. */
export function observeTime(t: AttemptTime, ev: ProgressEvent, at: number, redoUntil: number | null): void {
  if (ev.iteration !== undefined && ev.iteration !== t.lastIteration) {
    // The silence that this iteration line ends was the iteration's own compute (or the load/save before it).
    attribute(t, categoryOf(t.open, ev.iteration, redoUntil), at);
    t.lastIteration = ev.iteration;
    t.open = 'training';
  }
  if (ev.savingCheckpoint) {
    attribute(t, categoryOf(t.open, t.lastIteration, redoUntil), at);
    t.open = 'save';
  }
  if (ev.checkpointSaved !== undefined) {
    attribute(t, t.open === 'save' ? 'save' : categoryOf(t.open, t.lastIteration, redoUntil), at);
    t.open = 'training';
  }
  if (ev.loadingCheckpoint) {
    attribute(t, categoryOf(t.open, t.lastIteration, redoUntil), at);
    t.open = 'startup';
  }
}
