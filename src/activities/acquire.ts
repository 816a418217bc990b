/**
 * The acquire phase of an attempt (run-step.ts): the step's GPUs, claimed host-wide (gpu-slots.ts), then the
 * exclusive lock on its checkpoint directory, which also stops a trainer an earlier attempt left (lock.ts).
 * The attempt's keep-alive heartbeat (run-step.ts) goes on while it waits, and `status` says what it waits for.
 */
import { mkdirSync } from 'node:fs';
import { failure, type Attempt } from './attempt.js';
import { NotEnoughGpusError, type GpuSlots } from './gpu-slots.js';
import { type AcquireOptions, DirLock, LockBusyError, type StopCommand } from './lock.js';
import { fixedStallSpec } from './stall-policy.js';
import { launchAllowanceSec } from './stop-allowance.js';
import { runStopCommand } from './trainer-process.js';

/** What an attempt holds, released on every path (run-step.ts). */
export interface Held {
  gpuIds: string[];
  lock: DirLock | null;
}

/** The worker's side of the acquire phase: its GPUs and its kill grace (run-step.ts heartbeats while it waits). */
export interface AcquireRoom {
  gpus: GpuSlots;
  killGraceMs: number;
}

/** GPUs first, the lock second: a step waiting for GPUs must not hold its directory. */
export async function acquire(a: Attempt, held: Held, opts: AcquireRoom): Promise<void> {
  const { step, ctx, note } = a;
  const owner = `${ctx.info.workflowExecution?.workflowId ?? step.id} attempt ${a.input.attempt}`;
  const lockDir = step.checkpoint?.dir ?? step.command.cwd;
  const lockOpts = {
    onTakeover: note,
    killGraceMs: opts.killGraceMs,
    // An earlier attempt's ranks save where they stand before this one loads the newest checkpoint.
    stopAllowanceMs: launchAllowanceSec(step.stall ?? fixedStallSpec(step.stallTimeoutSec), opts.killGraceMs) * 1000,
    runStop: (stop: StopCommand) => runStopCommand(stop, note),
  };
  // The trainer a dead worker left holds this step's GPUs: it saves and stops first, or this attempt would wait
  // for its GPUs until it finished the stage unsupervised.
  if (step.gpus > 0) await DirLock.stopOrphan(lockDir, lockOpts);
  try {
    // Free in this worker and unclaimed by any other process on the host; a wait names who holds the GPUs.
    held.gpuIds = await opts.gpus.acquire(step.gpus, ctx.cancellationSignal, owner, (why) => {
      if (why) note(`waiting for ${why}`);
      waitFor(a, why);
    });
  } catch (err) {
    // A worker without the GPUs the step needs is a deployment mistake: retrying on it cannot help.
    if (!(err instanceof NotEnoughGpusError)) throw err;
    note(`attempt ${a.input.attempt} not started: ${err.message}`);
    throw failure(a, 'config', err.message);
  }
  mkdirSync(lockDir, { recursive: true });
  held.lock = await lockWhenFree(lockDir, owner, lockOpts, ctx.cancellationSignal, (msg) => {
    note(msg);
    waitFor(a, msg.replace(/^waiting for the lock: /, 'the checkpoint directory\'s lock: '));
  });
  waitFor(a, null);
}

/** Record (or end) a wait in the progress, which the heartbeat carries to `status`; sent at once. */
function waitFor(a: Attempt, reason: string | null): void {
  const was = a.progress.waiting;
  if ((was?.reason ?? null) === reason) return;
  a.progress.waiting = reason === null ? null : { reason, since: was?.since ?? new Date().toISOString(), until: null };
  a.ctx.heartbeat({ ...a.progress, updatedAt: new Date().toISOString() });
}

/** How often a step whose directory is locked by a live holder tries again. */
const LOCK_RETRY_MS = 2_000;

/**
 * The directory's lock, waiting while a live holder has it: a trainer from another host until its lease runs
 * out (the previous attempt on a dead node), or a worker on this host that is still launching. Failing instead
 * would spend the step's retry budget in seconds while the lease takes minutes. Heartbeats go on meanwhile.
 */
async function lockWhenFree(dir: string, owner: string, opts: AcquireOptions, signal: AbortSignal, note: (msg: string) => void): Promise<DirLock> {
  let said = '';
  for (;;) {
    try {
      return await DirLock.acquire(dir, owner, opts);
    } catch (err) {
      if (!(err instanceof LockBusyError)) throw err;
      if (err.message !== said) note(`waiting for the lock: ${err.message}`);
      said = err.message;
    }
    if (signal.aborted) throw signal.reason ?? new Error('aborted');
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(t);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const t = setTimeout(done, LOCK_RETRY_MS);
      signal.addEventListener('abort', done, { once: true });
    });
    if (signal.aborted) throw signal.reason ?? new Error('aborted');
  }
}
