/**
 * The supervise phase: from launch to exit, the trainer's output is teed to the step's log and parsed into
 * progress; progress heartbeats, a keep-alive heartbeat, the checkpoints a workflow evaluates batched to it
 * (checkpoint-signals.ts); the watchdog stops the attempt's processes (attempt-tree.ts) on a stall, the attempt
 * deadline, a cancellation or a worker shutdown, or when a directory the attempt depends on vanishes or is replaced
 * (dir-watch.ts): a hang or a vanished directory kills them all at once, anything else lets the ranks save first,
 * for as long as the stall policy allows a save (stop-allowance.ts). It reports how the attempt ended; deciding
 * what that means is the next phase's (run-step.ts `conclude`).
 */
import type { Attempt } from './attempt.js';
import { AttemptStop, attemptAlive, type AttemptTree } from './attempt-tree.js';
import { checkpointSignals } from './checkpoint-signals.js';
import { DIR_WATCH_MS, DirWatch } from './dir-watch.js';
import type { DirLock } from './lock.js';
import { LineSplitter } from '../engine-logs/line-splitter.js';
import { parserFor } from '../engine-logs/progress-parsers.js';
import { SAVE_ROOM_CHECK_MS, SaveRoom } from './save-room.js';
import type { Pruner } from './retention-runner.js';
import type { Trainer } from './trainer-process.js';
import type { ProcessExit } from '../util/spawner.js';
import { fixedStallSpec, newRhythm, observe, stallLimit } from './stall-policy.js';
import { stopAllowanceMs } from './stop-allowance.js';
import { launched, observeTime } from './time-ledger.js';
import { applyProgress, watchdogVerdict } from './watchdog.js';

export type StopReason = 'stall' | 'cancel' | 'shutdown' | 'timeout' | 'vanished';

export interface AttemptEnd {
  exitCode: number | null;
  signal: string | null;
  stoppedBy: StopReason | null;
  /** The trainer printed that it exits after a SIGTERM (it saved, but did not finish). */
  sawSigtermExit: boolean;
  /** The last lines of its output (the failure classifier reads them). */
  tail: string[];
  /** What vanished or was replaced under the running attempt (stopped as 'vanished'). */
  vanished: string | null;
  /** For a stall: how long it was silent, and the limit of the phase it was in. */
  stall: string | null;
}

const TAIL_LINES = 60;
const WATCHDOG_TICK_MS = 250;

export async function supervise(a: Attempt, trainer: Trainer, tree: AttemptTree, lock: DirLock, opts: { killGraceMs: number; keepAliveMs: number }, pruner?: Pruner): Promise<AttemptEnd> {
  const { step, progress, note, ctx } = a;
  const parse = parserFor(step.progress.format);
  const end: AttemptEnd = { exitCode: null, signal: null, stoppedBy: null, sawSigtermExit: false, tail: [], vanished: null, stall: null };
  // The stall limit follows the attempt's phase and rhythm (stall-policy.ts); a step without it has one limit.
  const stallSpec = step.stall ?? fixedStallSpec(step.stallTimeoutSec);
  const rhythm = newRhythm(Date.now(), a.input.longestSaveSec ?? null);
  if (progress.time) launched(progress.time, Date.now(), progress.resumedFrom, step.command.argv);
  const redoUntil = a.input.redoUntil ?? null;
  const showLimit = () => {
    const { phase, limitSec } = stallLimit(stallSpec, rhythm);
    const changed = progress.stallLimit?.phase !== phase || progress.stallLimit?.limitSec !== Math.round(limitSec);
    progress.stallLimit = { phase, limitSec: Math.round(limitSec) };
    return changed;
  };
  showLimit();
  let lastBeat = 0;
  let stopping: AttemptStop | null = null;

  const beat = () => {
    progress.updatedAt = new Date().toISOString();
    ctx.heartbeat({ ...progress });
    lastBeat = Date.now();
  };
  // Only the checkpoints a workflow must act on (evaluation while training), batched: never a signal per save.
  const signals = checkpointSignals(a.input, ctx);
  const stop = (why: StopReason) => {
    if (stopping) return;
    end.stoppedBy = why;
    a.stoppedAt = Date.now();
    const what = why === 'vanished' ? end.vanished : why;
    if (why === 'stall' || why === 'vanished') {
      note(`stopping the attempt's processes: ${what}: all at once`);
      stopping = new AttemptStop(tree, 'kill', 0, 0, note);
      return;
    }
    const allowance = stopAllowanceMs(stallSpec, rhythm, opts.killGraceMs);
    note(`stopping the attempt's processes: ${what}: SIGTERM to the ranks' main processes, ${Math.round(allowance / 1000)} s to save and exit`);
    stopping = new AttemptStop(tree, 'graceful', allowance, opts.killGraceMs, note);
  };
  const onLine = (raw: string) => {
    const line = raw.trimEnd();
    if (!line) return;
    end.tail.push(line);
    if (end.tail.length > TAIL_LINES) end.tail.shift();
    const ev = parse(line);
    if (!ev) return;
    if (ev.exitingOnSigterm) end.sawSigtermExit = true;
    const { advanced, checkpointSaved } = applyProgress(progress, ev, step.progress.totalIterations);
    const now = Date.now();
    observe(stallSpec, rhythm, ev, now);
    if (progress.time) {
      observeTime(progress.time, ev, now, redoUntil);
      // The next attempt's save allowance starts from the saves made so far (carried in the attempt's record).
      if (rhythm.longestSaveSec !== null) progress.time.longestSaveSec = rhythm.longestSaveSec;
    }
    const limitChanged = showLimit();
    if (checkpointSaved) {
      signals.saved(progress);
      // Retention runs between saves: the one just reported is complete, the next has not begun.
      pruner?.request();
    }
    if (advanced || limitChanged) beat();
  };

  const splitter = new LineSplitter(onLine);
  const output = trainer.all;
  output?.on('data', (chunk: Buffer) => {
    const text = splitter.push(chunk);
    // Backpressure: a trainer that prints faster than the disk takes it waits on its pipe, as it would on a
    // terminal, instead of the worker holding the difference in memory.
    if (!a.log.destroyed && !a.log.write(text) && !output.isPaused()) {
      output.pause();
      a.log.once('drain', () => output.resume());
    }
  });
  // A log that failed (a full disk) never drains: the trainer must not wait on it.
  a.log.once('close', () => output?.resume());

  beat();
  // Event handlers run outside the activity's async context: read everything through `ctx`.
  const onAbort = () => stop(ctx.cancellationDetails?.workerShutdown ? 'shutdown' : 'cancel');
  ctx.cancellationSignal.addEventListener('abort', onAbort, { once: true });
  // A cancellation that arrived while the trainer was being launched fired before this listener existed.
  if (ctx.cancellationSignal.aborted) onAbort();
  const deadline = a.started + step.attemptTimeoutSec * 1000;
  const room = step.checkpoint ? new SaveRoom(step.checkpoint.dir) : null;
  let lastRoomCheck = 0;
  // Sizing a checkpoint is asynchronous (a 100,000-file tree must not hold the watchdog): one check at a time.
  let roomBusy = false;
  const watch = new DirWatch([
    { what: 'the run directory', path: a.input.runDir },
    { what: "the step's directory", path: step.command.cwd },
    ...(step.checkpoint ? [{ what: "the step's checkpoint directory", path: step.checkpoint.dir }] : []),
    { what: "the step's lock", path: lock.file },
  ]);
  let lastWatch = Date.now();
  const timer = setInterval(() => {
    const now = Date.now();
    if (!stopping && now - lastWatch >= DIR_WATCH_MS) {
      lastWatch = now;
      end.vanished = watch.check();
      if (end.vanished) stop('vanished');
    }
    if (room && !roomBusy && now - lastRoomCheck >= SAVE_ROOM_CHECK_MS) {
      lastRoomCheck = now;
      roomBusy = true;
      void room.check().then((warning) => {
        roomBusy = false;
        if (stopping || warning === (progress.warning ?? null)) return;
        if (warning) note(`warning: ${warning}`);
        progress.warning = warning;
        beat();
      });
    }
    const limit = stallLimit(stallSpec, rhythm);
    const verdict = watchdogVerdict({ now, lastAdvance: rhythm.lastAdvance, stallMs: limit.limitSec * 1000, deadline });
    if (verdict === 'stall' && !stopping) {
      end.stall = `no progress for ${Math.round((now - rhythm.lastAdvance) / 1000)}s (${limit.phase} limit ${Math.round(limit.limitSec)}s)`;
      note(`stall: ${end.stall}`);
    }
    // Silent past its limit while it was to save: it will not; the stop kills what is left.
    if (verdict === 'stall' && stopping) stopping.escalate(`no progress for ${Math.round((now - rhythm.lastAdvance) / 1000)}s while stopping (${limit.phase} limit ${Math.round(limit.limitSec)}s)`);
    if (verdict) stop(verdict);
    if (now - lastBeat >= opts.keepAliveMs) beat();
    lock.touch();
  }, WATCHDOG_TICK_MS);

  let result: ProcessExit;
  try {
    result = await trainer.exited;
  } finally {
    clearInterval(timer);
    ctx.cancellationSignal.removeEventListener('abort', onAbort);
  }
  // A trainer that crashed because its directory vanished (FileNotFoundError, read as a config error) failed
  // because of the vanishing: looked at once more after the exit, the vanished path is the verdict.
  end.vanished ??= watch.check();
  const last = splitter.end();
  if (last && !a.log.destroyed) a.log.write(last);
  // The launcher is gone; nothing the attempt started may outlive it (a launcher killed from outside leaves its
  // tree: it gets the same stop, through the launchers' file or, here, from the supervisor itself).
  // (a cast: TypeScript does not see the assignment inside the `stop` closure)
  const pending = stopping as AttemptStop | null;
  if (pending) await pending.done;
  if (attemptAlive(tree)) {
    note("processes of the attempt outlived its launcher: stopping them");
    await new AttemptStop(tree, 'graceful', stopAllowanceMs(stallSpec, rhythm, opts.killGraceMs), opts.killGraceMs, note).done;
  }
  await pruner?.idle();
  await signals.flush();
  if (result.message) note(result.message);
  end.exitCode = typeof result.exitCode === 'number' ? result.exitCode : null;
  end.signal = result.signal ?? null;
  return end;
}
