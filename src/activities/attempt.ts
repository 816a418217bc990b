/** One attempt of one step, as the supervisor's phases share it: the step, its ids, its progress and its log. */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname } from 'node:path';
import type { Progress } from '../plan/contracts.js';
import { DEFAULT_LOG_MAX_MB, type FailureClass, type PlanStep } from '../plan/types.js';
import { errnoWords } from '../util/dir-probe.js';
import { logFile } from './step-files.js';
import { StepLog } from './step-log.js';
import { closeAttempt } from '../plan/goodput.js';
import { newAttemptTime } from './time-ledger.js';
import { newLaunchIds, type LaunchIds } from './trainer-process.js';

export interface RunStepInput {
  recipe: string;
  runId: string;
  runDir: string;
  step: PlanStep;
  /** 1-based attempt number within the step (the workflow counts them). */
  attempt: number;
  /** The highest iteration an earlier attempt reached: training up to it again is recomputed work (absent: none). */
  redoUntil?: number | null;
  /** The longest checkpoint save an earlier attempt made, seconds: the save allowance starts from it (absent: none). */
  longestSaveSec?: number | null;
  /**
   * Whom to tell of the checkpoints saved (checkpoint-signals.ts): the step's evaluator and `evalEvery`, or null
   * (nobody: no evaluation while training). Absent in attempts scheduled by stageRuns recorded before bounded
   * history, which expect a progress signal per checkpoint.
   */
  evalSignal?: { workflowId: string; every: number } | null;
}

export interface Attempt {
  step: PlanStep;
  input: RunStepInput;
  ids: LaunchIds;
  /** Also the heartbeat details; mutated as the trainer reports. */
  progress: Progress;
  /** ms since the epoch. */
  started: number;
  /** When the supervisor decided to stop the trainer (a stall, a cancel, a vanished directory), ms; null: it did not. */
  stoppedAt: number | null;
  ctx: Context;
  /** The step's log, rotated past its cap (`logs.maxMB`). */
  log: StepLog;
  /** A `[infir2 <time>] …` line in the step's log. */
  note: (msg: string) => void;
  /** Resolves once everything written to the log so far has reached the file, or failed (then `logError`). */
  flushLog: () => Promise<void>;
  /**
   * The first error of the step's log file (a full or read-only disk). Kept, not thrown: an unhandled stream
   * error would take the whole worker down, with every other run it serves; the attempt reports it instead.
   */
  logError: Error | null;
}

export function openAttempt(input: RunStepInput): Attempt {
  const { step, runDir, attempt } = input;
  mkdirSync(step.command.cwd, { recursive: true });
  mkdirSync(dirname(logFile(runDir, step.id)), { recursive: true });
  // Plans recorded before the cap was a setting get the default.
  const log = new StepLog(logFile(runDir, step.id), step.logMaxMB ?? DEFAULT_LOG_MAX_MB);
  // A failed write calls back the writes queued behind it before the stream emits its error: wait for 'close',
  // which comes after 'error', so that `logError` is set once the flush resolves.
  const closed = () => new Promise<void>((resolve) => (log.closed ? resolve() : log.once('close', () => resolve())));
  const ctx = Context.current();
  const started = Date.now();
  const a: Attempt = {
    step,
    input,
    ids: newLaunchIds(attempt),
    progress: {
      iteration: null,
      totalIterations: step.progress.totalIterations,
      loss: null,
      throughput: null,
      throughputUnit: null,
      lastCheckpoint: null,
      resumedFrom: null,
      attempt,
      pid: null,
      updatedAt: new Date().toISOString(),
      // From the moment the attempt was scheduled: the time it waited for a worker to take it counts too. The
      // record names the worker, so that `status` can say which one ran each attempt.
      time: newAttemptTime(attempt, Math.min(ctx.info.scheduledTimestampMs || started, started), started, workerIdentity()),
    },
    started,
    stoppedAt: null,
    ctx,
    log,
    note: (msg: string) => {
      if (!log.destroyed) log.write(`[infir2 ${new Date().toISOString()}] ${msg}\n`);
    },
    flushLog: () => (log.destroyed ? closed() : new Promise<void>((resolve) => log.write('', (err) => (err ? closed().then(resolve) : resolve())))),
    logError: null,
  };
  log.on('error', (err) => {
    a.logError ??= err;
  });
  a.note(`attempt ${attempt} taken by worker ${workerIdentity()} (task queue ${ctx.info.taskQueue})`);
  return a;
}

/** This worker as Temporal names it by default (the SDK's identity: `pid@host`), and as the Web UI shows it. */
export function workerIdentity(): string {
  return `${process.pid}@${hostname()}`;
}

/**
 * The attempt's failure, typed by its class (the workflow's retry rule reads the type); config is final. Its
 * details carry the attempt's progress, with its time closed here: the silence since the last progress is the
 * failure's detection.
 */
export function failure(a: Attempt, cls: FailureClass, reason: string): ApplicationFailure {
  if (a.progress.time) a.progress.time = closeAttempt(a.progress.time, Date.now(), cls, a.stoppedAt);
  const logLost = a.logError ? `; the step's log could not be written (${logFile(a.input.runDir, a.step.id)}: ${errnoWords(a.logError)})` : '';
  return ApplicationFailure.create({
    type: cls,
    message: `${a.step.id}: ${cls}: ${reason}${logLost}`,
    nonRetryable: cls === 'config',
    details: [a.progress],
  });
}
