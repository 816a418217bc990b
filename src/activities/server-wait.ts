/**
 * A step's outcome is handed to the SDK only once the Temporal server answers.
 *
 * sdk-core retries an activity's completion for about 15 s and then drops it (docs/cluster.md#what-the-tests-check-and-the-recovery-times-measured, measured on
 * PostgreSQL). A step that ended during a longer server or database outage was then known to the server only
 * when its heartbeat timeout ran out: the run moved on up to a minute or more after the server came back, and
 * the lost result counted as a preemption. Holding the outcome here, heartbeating, until the server answers
 * sends it into a live server instead: the run moves on within seconds of the server's return, and nothing is
 * counted as lost.
 */
import type { Attempt } from './attempt.js';

/** True when the server takes a heartbeat of the step's own task now (the worker asks: workers/server-probe.ts). */
export type ServerProbe = () => Promise<boolean>;

/** How often an unanswered probe is tried again. */
export const SERVER_PROBE_EVERY_MS = 1_000;

/**
 * Past this, the outcome is handed over anyway (the SDK then retries and may drop it, and the heartbeat
 * timeout takes over as before): a worker must not hold a finished step forever for a server that never returns.
 */
export const MAX_HOLD_MS = 30 * 60_000;

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });

/**
 * Resolve once `probe` says the server answers (at once when it does, which is nearly always), or the worker
 * shuts the activity down, or `maxHoldMs` passes. Heartbeats go on meanwhile, and the wait is noted in the
 * step's log when there is one.
 */
export async function untilServerAnswers(a: Pick<Attempt, 'ctx' | 'progress' | 'note'>, probe: ServerProbe | undefined, maxHoldMs = MAX_HOLD_MS, everyMs = SERVER_PROBE_EVERY_MS): Promise<void> {
  if (!probe || (await probe())) return;
  const { ctx } = a;
  const since = Date.now();
  a.note('the step has ended, but the Temporal server does not answer: its outcome is held until it does');
  while (!ctx.cancellationSignal.aborted && Date.now() - since < maxHoldMs) {
    ctx.heartbeat({ ...a.progress, updatedAt: new Date().toISOString() });
    await sleep(everyMs, ctx.cancellationSignal);
    if (await probe()) {
      a.note(`the Temporal server answers again after ${Math.round((Date.now() - since) / 1000)} s: outcome sent`);
      return;
    }
  }
  a.note(`the Temporal server has not answered for ${Math.round((Date.now() - since) / 1000)} s: outcome handed over anyway`);
}
