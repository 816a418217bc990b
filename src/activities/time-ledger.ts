/**
 * The supervisor's lost-time ledger: each progress event at its timestamp says what the silence before it was
 * (plan/goodput.ts names the categories). Pure functions of events and timestamps, folded into the attempt's
 * record in place (it travels in the heartbeat details, so even a worker that dies leaves its last word):
 *
 *   scheduled → activity start      waiting (for a worker to take the attempt)
 *   start → launch                  waiting (GPU slots, the checkpoint directory's lock)
 *   launch → first iteration        startup, less the compute of the iterations that first line sums up (its
 *                                   time per iteration × the iterations since the checkpoint loaded, at most one
 *                                   log interval); a "loading checkpoint" line makes what follows startup again
 *   "saving" → "saved"              save
 *   iteration k−1 → iteration k     productive, or recomputed when k ≤ the highest iteration an earlier attempt
 *                                   reached (`redoUntil`): work a failure threw away, done again
 *   last event → stop/exit          on failure detection, on success overhead (plan/goodput.ts closeAttempt)
 */
import type { AttemptTime, OpenPhase, TimeCategory } from '../plan/goodput.js';
import { add } from '../plan/goodput.js';
import type { ProgressEvent } from '../engine-logs/progress-parsers.js';

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

/**
 * The trainer was launched at `at`: the wait is over, its startup begins. `from`: the iteration of the checkpoint
 * it loads (null: none or unknown); `argv`: its command, whose `--log-interval` says how many iterations one
 * progress line sums up.
 */
export function launched(t: AttemptTime, at: number, from: number | null = null, argv: readonly string[] = []): void {
  attribute(t, 'waiting', at);
  t.open = 'startup';
  t.startedFrom = from;
  const i = argv.lastIndexOf('--log-interval');
  const perLine = i >= 0 ? Number(argv[i + 1]) : NaN;
  if (Number.isInteger(perLine) && perLine > 0) t.iterationsPerLine = perLine;
}

/**
 * The compute a startup's silence already held when the first iteration line ends it: the iterations that line
 * sums up (since the checkpoint loaded, at most one log interval) × its time per iteration, never more than the
 * silence. The rest was startup (imports, the checkpoint load, the data index).
 */
function computeInStartup(t: AttemptTime, ev: ProgressEvent, at: number): number {
  if (!ev.msPerIteration || ev.iteration === undefined) return 0;
  const before = t.lastIteration ?? t.startedFrom ?? null;
  const perLine = t.iterationsPerLine ?? 1;
  const n = before !== null && ev.iteration > before ? Math.min(ev.iteration - before, perLine) : perLine;
  return Math.min(n * ev.msPerIteration, at - t.attributedTo);
}

/** Fold one progress event seen at `at`. */
export function observeTime(t: AttemptTime, ev: ProgressEvent, at: number, redoUntil: number | null): void {
  if (ev.iteration !== undefined && ev.iteration !== t.lastIteration) {
    // The silence that this iteration line ends was the iteration's own compute (or the load/save before it). A
    // startup's silence ends with the compute of the first iterations: those are training, not startup.
    if (t.open === 'startup') attribute(t, 'startup', at - computeInStartup(t, ev, at));
    attribute(t, categoryOf(t.open === 'startup' && t.attributedTo < at ? 'training' : t.open, ev.iteration, redoUntil), at);
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
