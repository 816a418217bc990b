/**
 * What the supervisor tells the workflows of the checkpoints the trainer saves: only what a workflow must act on,
 * never a signal per save. A signal adds events to the history of the workflow that receives it (the signal and
 * a workflow task), and Temporal caps a history at 51,200 events: a signal per checkpoint grew an attempt's
 * history without bound (issue 33: a step saving every 2 ms failed at ~15,000 events and stalled its run). People
 * read live progress from the heartbeat details instead (`status`, the Web UI's pending-activity card).
 *
 * - `evalSignal: null` (a step without evaluation while training): nothing is sent.
 * - `evalSignal: { workflowId, every }`: the saved checkpoints that `evalEvery` asks to evaluate go to the step's
 *   evaluator (workflows/eval-run.ts) as batches: one signal in flight at a time, at most one per
 *   `minIntervalMs`, each carrying every such checkpoint saved since the last one. Whatever is pending when the
 *   attempt ends is sent then (`flush`).
 * - `evalSignal` absent (an attempt scheduled by a stageRun recorded before this scheme): the stage's progress
 *   signal, as that stage expects it, but bounded the same way: each checkpoint it must evaluate, in order, and
 *   otherwise the newest checkpoint at most once per `minIntervalMs`, one signal in flight.
 */
import type { Context } from '@temporalio/activity';
import { WorkflowNotFoundError } from '@temporalio/client';
import { EVAL_CHECKPOINTS_SIGNAL, PROGRESS_SIGNAL, type EvalCheckpoints, type Progress } from '../plan/contracts.js';
import type { RunStepInput } from './attempt.js';

/** The shortest time between two signals of one attempt (the first goes at once). */
export const MIN_SIGNAL_INTERVAL_MS = 30_000;
/** How long the attempt's end waits for its last signal before it gives up on it. */
const FLUSH_DEADLINE_MS = 30_000;

export interface CheckpointSignals {
  /** The trainer reported a complete checkpoint (`progress.lastCheckpoint`). */
  saved(progress: Progress): void;
  /** Send what is pending and wait for it (bounded): the attempt is ending. */
  flush(): Promise<void>;
  /** Signals sent so far (the bench reads it). */
  readonly sent: number;
}

type Send = (signal: string, arg: unknown) => Promise<void>;

/** Signals through the activity's client; a throw (no client: a MockActivityEnvironment) is a failed send. */
export function clientSend(ctx: Context, workflowId: string): Send {
  return async (signal, arg) => {
    await ctx.client.workflow.getHandle(workflowId).signal(signal, arg);
  };
}

interface Options {
  minIntervalMs?: number;
  now?: () => number;
}

export function checkpointSignals(input: Pick<RunStepInput, 'evalSignal' | 'step'>, ctx: Context, opts: Options = {}): CheckpointSignals {
  const spec = input.evalSignal;
  const none: CheckpointSignals = { saved: () => undefined, flush: async () => undefined, sent: 0 };
  if (spec === null) return none;
  if (spec) {
    const { every } = spec;
    return signalQueue<number>(clientSend(ctx, spec.workflowId), opts, {
      pick: (p) => (p.lastCheckpoint !== null && p.lastCheckpoint > 0 && p.lastCheckpoint % every === 0 ? p.lastCheckpoint : null),
      // Every checkpoint saved since the last signal, in one.
      take: (items) => ({ signal: EVAL_CHECKPOINTS_SIGNAL, arg: { iterations: items } satisfies EvalCheckpoints, rest: [] }),
      urgent: () => false,
    });
  }
  const stage = ctx.info.workflowExecution?.workflowId;
  if (!stage) return none;
  const every = input.step.checkpointEval?.every ?? null;
  const mustEvaluate = (p: Progress) => every !== null && p.lastCheckpoint !== null && p.lastCheckpoint > 0 && p.lastCheckpoint % every === 0;
  return signalQueue<Progress>(clientSend(ctx, stage), opts, {
    pick: (p) => ({ ...p }),
    // One progress per signal, as such a stage reads it; a checkpoint it evaluates is never coalesced away.
    take: ([first, ...rest]) => ({ signal: PROGRESS_SIGNAL, arg: first, rest }),
    urgent: mustEvaluate,
    coalesce: (older) => !mustEvaluate(older),
  });
}

interface Policy<T> {
  /** The item a checkpoint adds, or null. */
  pick(p: Progress): T | null;
  /** The next signal from the pending items, and the items it leaves. */
  take(items: T[]): { signal: string; arg: unknown; rest: T[] };
  /** Sent without waiting for the interval. */
  urgent(item: T): boolean;
  /** A newer item replaces this one while it waits (absent: never). */
  coalesce?(older: T): boolean;
}

/**
 * Pending items, sent one signal in flight at a time, at most one signal per interval (urgent items excepted); a
 * failed send puts its items back for the next one, except when the workflow is gone (nobody to tell).
 */
export function signalQueue<T>(send: Send, opts: Options, policy: Policy<T>): CheckpointSignals {
  const minInterval = opts.minIntervalMs ?? MIN_SIGNAL_INTERVAL_MS;
  const now = opts.now ?? Date.now;
  let pending: T[] = [];
  let inFlight: Promise<void> | null = null;
  let lastSent = -Infinity;
  let timer: NodeJS.Timeout | null = null;
  let sent = 0;
  let closed = false;

  const pump = (force = false): void => {
    if (inFlight || closed || !pending.length) return;
    const wait = lastSent + minInterval - now();
    if (wait > 0 && !force && !policy.urgent(pending[0]!)) {
      timer ??= setTimeout(() => {
        timer = null;
        pump();
      }, wait).unref();
      return;
    }
    const { signal, arg, rest } = policy.take(pending);
    const taken = pending.slice(0, pending.length - rest.length);
    pending = rest;
    lastSent = now();
    sent += 1;
    inFlight = send(signal, arg).then(
      () => undefined,
      (err: unknown) => {
        if (err instanceof WorkflowNotFoundError) closed = true;
        else pending = [...taken, ...pending];
      },
    );
    void inFlight.finally(() => {
      inFlight = null;
      pump();
    });
  };

  return {
    saved(p) {
      const item = policy.pick(p);
      if (item === null || closed) return;
      const last = pending.at(-1);
      if (last !== undefined && policy.coalesce?.(last)) pending[pending.length - 1] = item;
      else pending.push(item);
      pump();
    },
    async flush() {
      if (timer) clearTimeout(timer);
      timer = null;
      const deadline = now() + FLUSH_DEADLINE_MS;
      const bounded = (p: Promise<void>) => Promise.race([p, new Promise((r) => setTimeout(r, Math.max(0, deadline - now())).unref())]);
      // What is in flight, then what is left, each sent once more at most: the attempt is ending.
      for (let round = 0; round < 2 + pending.length && now() < deadline; round++) {
        if (!inFlight) pump(true);
        const flight = inFlight as Promise<void> | null;
        if (!flight) break;
        await bounded(flight);
      }
      closed = true;
    },
    get sent() {
      return sent;
    },
  };
}
