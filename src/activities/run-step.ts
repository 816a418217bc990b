/**
 * runStep: supervise one attempt of one plan step.
 *
 * - argv without a shell, in its own process group, output teed to `<run>/logs/<step>.log`;
 * - resume: the step's checkpoint dir is inspected first; partial saves are moved aside and the step's resume
 *   argv is used with the newest complete iteration; a step whose final checkpoint is already complete is not run;
 * - progress lines become heartbeat details; a process that makes no progress for the stall timeout is killed
 *   and the attempt fails as a hang;
 * - heartbeats also go out on a short keep-alive, so that a dead worker is noticed within the heartbeat
 *   timeout and a cancellation reaches the trainer within seconds even while it is loading or saving;
 * - an exclusive lock on the checkpoint dir, which also stops a zombie trainer left by an earlier attempt;
 * - SIGTERM (then SIGKILL) to the whole group on cancellation, worker shutdown, stall and every other exit path.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { execa } from 'execa';
import { createWriteStream, existsSync, mkdirSync, readFileSync, statSync, writeFileSync, renameSync, type WriteStream } from 'node:fs';
import { dirname, join } from 'node:path';
import type { PlanStep } from '../plan/types.js';
import { progressSignal, type Progress, type StepResult } from '../workflows/definitions.js';
import { inspectCheckpointDir, quarantinePartials, type CheckpointInspection } from './checkpoints.js';
import { classifyExit } from './classify.js';
import { watchOomKills, type OomWatch } from './oom-kills.js';
import { NotEnoughGpusError, type GpuSlots } from './gpu-slots.js';
import { type AcquireOptions, DirLock, LockBusyError, type StopCommand } from './lock.js';
import { fingerprintOutputs } from './outputs.js';
import { terminateGroup } from './process-group.js';
import { parserFor, type ProgressEvent } from './progress-parsers.js';

export interface RunStepInput {
  recipe: string;
  runId: string;
  runDir: string;
  step: PlanStep;
  /** 1-based attempt number within the step (the workflow counts them). */
  attempt: number;
}

export interface SupervisorOptions {
  gpus: GpuSlots;
  /** Time a trainer gets to save and exit after SIGTERM. */
  killGraceMs: number;
  /** Heartbeat at least this often while the process lives (worker liveness, cancellation delivery). */
  keepAliveMs: number;
}

const TAIL_LINES = 60;

export function logFile(runDir: string, stepId: string): string {
  return join(runDir, 'logs', `${stepId}.log`);
}

export function resultFile(runDir: string, stepId: string): string {
  return join(runDir, 'results', `${stepId}.json`);
}

/** What identifies one launch of a step: its attempt number, and a token no other launch shares. */
export interface LaunchIds {
  attempt: number;
  /**
   * Unique per launch (base-36 start time plus pid): `infir2 resume` numbers attempts from 1 again, and
   * a Ray cluster refuses a submission id it has seen before.
   */
  launch: string;
}

export const newLaunchIds = (attempt: number): LaunchIds => ({ attempt, launch: `${Date.now().toString(36)}${(process.pid % 1296).toString(36)}` });

/**
 * Fill a command's placeholders: `{attempt}` and `{launch}` always (per-attempt ids, e.g. Ray submission ids);
 * `{iteration}` / `{nextIteration}` with the checkpoint a resume starts from.
 */
export function fillArgv(argv: string[], ids: LaunchIds, iteration?: number): string[] {
  return argv.map((a) => {
    let out = a.replaceAll('{attempt}', String(ids.attempt)).replaceAll('{launch}', ids.launch);
    if (iteration !== undefined) out = out.replaceAll('{iteration}', String(iteration)).replaceAll('{nextIteration}', String(iteration + 1));
    return out;
  });
}

/** A path, or a Megatron indexed-dataset prefix (`<prefix>.bin` + `<prefix>.idx`). */
export function inputExists(p: string): boolean {
  return existsSync(p) || (existsSync(`${p}.bin`) && existsSync(`${p}.idx`));
}

/** Is the step's completion criterion met on disk? */
export function completionMet(step: PlanStep, insp?: CheckpointInspection | null): boolean {
  const c = step.completion;
  if (c.kind === 'checkpoint') {
    const i = insp && insp.dir === c.dir ? insp : inspectCheckpointDir(c.dir);
    return i.latestComplete !== null && i.latestComplete >= c.iteration;
  }
  return c.paths.every((p) => existsSync(p) && (statSync(p).isDirectory() || statSync(p).size > 0));
}

/** Numeric top-level fields of an evaluation step's JSON report (accuracy and the like). */
export function readMetrics(step: PlanStep): Record<string, number> {
  const metrics: Record<string, number> = {};
  // Only evaluations report metrics; other JSON outputs (an HF config.json) hold settings, not results.
  const paths = step.kind === 'eval' && step.completion.kind === 'files' ? step.completion.paths : [];
  for (const p of paths.filter((x) => x.endsWith('.json'))) {
    try {
      const data = JSON.parse(readFileSync(p, 'utf8')) as Record<string, unknown>;
      for (const [k, v] of Object.entries(data)) if (typeof v === 'number' && Number.isFinite(v)) metrics[k] = v;
    } catch {
      /* not a JSON object: no metrics */
    }
  }
  return metrics;
}

function failure(step: PlanStep, cls: string, reason: string, progress: Progress): ApplicationFailure {
  return ApplicationFailure.create({
    type: cls,
    message: `${step.id}: ${cls}: ${reason}`,
    nonRetryable: cls === 'config',
    details: [progress],
  });
}

export function createRunStep(opts: SupervisorOptions) {
  return async function runStep(input: RunStepInput): Promise<StepResult> {
    const { step, runDir, attempt } = input;
    const ids = newLaunchIds(attempt);
    const ctx = Context.current();
    const info = ctx.info;
    const started = Date.now();
    const progress: Progress = {
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
    };

    mkdirSync(step.command.cwd, { recursive: true });
    mkdirSync(dirname(logFile(runDir, step.id)), { recursive: true });
    const log = createWriteStream(logFile(runDir, step.id), { flags: 'a' });
    const note = (msg: string) => log.write(`[infir2 ${new Date().toISOString()}] ${msg}\n`);

    const missing = Object.entries(step.inputs).filter(([, p]) => !inputExists(p));
    if (missing.length) {
      const what = missing.map(([role, p]) => `input '${role}' not found: ${p}`).join('; ');
      note(`attempt ${attempt} not started: ${what}`);
      await closeStream(log);
      throw failure(step, 'config', what, progress);
    }

    // GPUs first, the lock second: a step waiting for GPUs must not hold its directory. Heartbeat while
    // waiting, so a long wait is not mistaken for a dead worker.
    const waitBeat = setInterval(() => ctx.heartbeat({ ...progress, updatedAt: new Date().toISOString() }), opts.keepAliveMs);
    let gpuIds: string[] = [];
    let lock: DirLock | null = null;
    try {
      try {
        try {
          gpuIds = await opts.gpus.acquire(step.gpus, ctx.cancellationSignal);
        } catch (err) {
          // A worker without the GPUs the step needs is a deployment mistake: retrying on it cannot help.
          if (!(err instanceof NotEnoughGpusError)) throw err;
          note(`attempt ${attempt} not started: ${err.message}`);
          throw failure(step, 'config', err.message, progress);
        }
        const lockDir = step.checkpoint?.dir ?? step.command.cwd;
        mkdirSync(lockDir, { recursive: true });
        lock = await lockWhenFree(lockDir, `${info.workflowExecution?.workflowId ?? step.id} attempt ${attempt}`, {
          onTakeover: note,
          killGraceMs: opts.killGraceMs,
          runStop: (stop) => runStopCommand(stop, note),
        }, ctx.cancellationSignal, note);
      } finally {
        clearInterval(waitBeat);
      }
      // Resume point: the newest complete checkpoint; partial saves are moved aside first.
      const insp = step.checkpoint ? inspectCheckpointDir(step.checkpoint.dir) : null;
      if (insp) {
        for (const moved of quarantinePartials(insp, `${Date.now()}`)) note(`moved a partial checkpoint aside: ${moved}`);
        progress.lastCheckpoint = insp.latestComplete;
      }
      if (step.completion.kind === 'checkpoint' && completionMet(step, insp)) {
        note(`attempt ${attempt}: final checkpoint ${step.completion.iteration} is already complete; nothing to run`);
        progress.iteration = step.completion.iteration;
        return finish(step, input, progress, started);
      }
      const resumeFrom = step.resume && insp?.latestComplete != null ? insp.latestComplete : null;
      progress.resumedFrom = resumeFrom;
      const argv = resumeFrom !== null && step.resume ? fillArgv(step.resume.argv, ids, resumeFrom) : fillArgv(step.command.argv, ids);

      const env: Record<string, string> = {
        ...step.command.env,
        PYTHONUNBUFFERED: '1',
        INFIR2_RUN_ID: input.runId,
        INFIR2_STEP_ID: step.id,
        INFIR2_ATTEMPT: String(attempt),
      };
      if (step.gpus > 0) env.CUDA_VISIBLE_DEVICES = gpuIds.join(',');

      note(`attempt ${attempt} ${resumeFrom !== null ? `resuming from iteration ${resumeFrom}` : 'starting fresh'}: ${argv.join(' ')}`);
      const [file, ...args] = argv;
      if (!file) throw failure(step, 'config', 'empty command', progress);
      const child = execa(file, args, {
        cwd: step.command.cwd,
        env,
        detached: true, // own process group: the whole tree is signalled together
        cleanup: false,
        stdin: 'ignore',
        all: true,
        buffer: false,
        reject: false,
        stripFinalNewline: false,
      });
      const pgid = child.pid;
      if (pgid === undefined) {
        const r = await child;
        throw failure(step, 'config', `could not start ${file}: ${r.message ?? 'spawn failed'}`, progress);
      }
      lock.setTrainer(pgid, stopCommand(step, ids));
      progress.pid = pgid;
      const oomKills = watchOomKills(pgid);
      return await supervise(child, pgid, { step, input, ids, progress, log, note, lock, opts, started, ctx, oomKills });
    } finally {
      opts.gpus.release(gpuIds);
      lock?.release();
      await closeStream(log);
    }
  };
}

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

interface SuperviseCtx {
  step: PlanStep;
  input: RunStepInput;
  ids: LaunchIds;
  progress: Progress;
  log: WriteStream;
  note: (msg: string) => void;
  lock: DirLock;
  opts: SupervisorOptions;
  started: number;
  ctx: Context;
  /** Kernel OOM kills since the trainer started (null where the kernel exposes no counter). */
  oomKills: OomWatch | null;
}

async function supervise(child: ReturnType<typeof execa>, pgid: number, s: SuperviseCtx): Promise<StepResult> {
  const { step, progress, log, note, lock, opts, ctx } = s;
  const parse = parserFor(step.progress.format);
  const tail: string[] = [];
  let partialLine = '';
  let sawSigtermExit = false;
  let stoppedBy: 'stall' | 'cancel' | 'shutdown' | 'timeout' | null = null;
  let lastAdvance = Date.now();
  let lastBeat = 0;
  let stopping: Promise<unknown> | null = null;

  const beat = () => {
    progress.updatedAt = new Date().toISOString();
    ctx.heartbeat({ ...progress });
    lastBeat = Date.now();
  };
  const signalWorkflow = () => {
    const wfId = ctx.info.workflowExecution?.workflowId;
    if (!wfId) return;
    // Best effort: progress signals are for people watching; losing one changes nothing.
    ctx.client.workflow
      .getHandle(wfId)
      .signal(progressSignal, { ...progress })
      .catch(() => undefined);
  };
  const stop = (why: NonNullable<typeof stoppedBy>) => {
    if (stopping) return;
    stoppedBy = why;
    note(`stopping the process group ${pgid}: ${why}`);
    stopping = terminateGroup(pgid, opts.killGraceMs);
  };

  const onLine = (raw: string) => {
    const line = raw.trimEnd();
    if (!line) return;
    tail.push(line);
    if (tail.length > TAIL_LINES) tail.shift();
    const ev = parse(line);
    if (!ev) return;
    if (ev.exitingOnSigterm) sawSigtermExit = true;
    const { advanced, checkpointSaved } = applyProgress(progress, ev, step.progress.totalIterations);
    if (checkpointSaved) signalWorkflow();
    if (advanced) {
      lastAdvance = Date.now();
      beat();
    }
  };

  child.all?.on('data', (chunk: Buffer) => {
    log.write(chunk);
    const parts = (partialLine + chunk.toString('utf8')).split(/\r\n|\r|\n/);
    partialLine = parts.pop() ?? '';
    parts.forEach(onLine);
  });

  beat();
  // Event handlers run outside the activity's async context: read everything through `ctx`.
  const onAbort = () => stop(ctx.cancellationDetails?.workerShutdown ? 'shutdown' : 'cancel');
  ctx.cancellationSignal.addEventListener('abort', onAbort, { once: true });
  const attemptDeadline = s.started + step.attemptTimeoutSec * 1000;
  const timer = setInterval(() => {
    const now = Date.now();
    if (now - lastAdvance > step.stallTimeoutSec * 1000) stop('stall');
    else if (now > attemptDeadline) stop('timeout');
    if (now - lastBeat >= opts.keepAliveMs) beat();
    lock.touch();
  }, 250);

  let result: Awaited<typeof child>;
  try {
    result = await child;
  } finally {
    clearInterval(timer);
    ctx.cancellationSignal.removeEventListener('abort', onAbort);
  }
  if (partialLine) onLine(partialLine);
  // The leader is gone; nothing it started may outlive the attempt.
  if (stopping) await stopping;
  await terminateGroup(pgid, 2_000);
  const exitCode = typeof result.exitCode === 'number' ? result.exitCode : null;
  const signal = result.signal ?? null;
  note(`attempt ${s.input.attempt} ended: ${exitCode !== null ? `exit code ${exitCode}` : `signal ${signal}`}${stoppedBy ? ` (stopped: ${stoppedBy})` : ''}`);
  const succeeded = stoppedBy !== 'cancel' && exitCode === 0 && !sawSigtermExit && completionMet(step);
  // Whatever ended an unsuccessful attempt (a stop of ours, a signal from outside, an error), work it handed
  // elsewhere may still run: a killed `ray job submit` client leaves its Ray job training. Stopping a job that
  // has already ended is harmless.
  const stopCmd = stopCommand(step, s.ids);
  if (!succeeded && stopCmd) await runStopCommand(stopCmd, note);

  if (stoppedBy === 'cancel') throw new CancelledFailure(`${step.id}: cancelled`);
  if (succeeded) return finish(step, s.input, progress, s.started);
  const oomKills = s.oomKills?.() ?? undefined;
  const { cls, reason } = classifyExit({ exitCode, signal, stoppedBy, sawSigtermExit, tail, oomKills });
  note(`attempt ${s.input.attempt} failed: ${cls}: ${reason}`);
  throw failure(step, cls, reason, progress);
}

/** How long a step's stop command (e.g. `ray job stop`) may take. */
const ON_STOP_TIMEOUT_MS = 60_000;

/** The step's stop command (e.g. `ray job stop <submission id>`) as this attempt runs it, if it has one. */
function stopCommand(step: PlanStep, ids: LaunchIds): StopCommand | null {
  return step.onStop ? { argv: fillArgv(step.onStop.argv, ids), cwd: step.command.cwd, env: step.command.env } : null;
}

async function runStopCommand(stop: StopCommand, note: (msg: string) => void): Promise<void> {
  const [file, ...args] = stop.argv;
  if (!file) return;
  const r = await execa(file, args, { cwd: stop.cwd, env: stop.env, reject: false, timeout: ON_STOP_TIMEOUT_MS, all: true });
  note(`stop command ${stop.argv.join(' ')}: exit ${r.exitCode ?? r.signal}${r.all ? `: ${String(r.all).trim().split('\n').at(-1)}` : ''}`);
}

function finish(step: PlanStep, input: RunStepInput, progress: Progress, started: number): StepResult {
  const result: StepResult = {
    stepId: step.id,
    outputs: step.outputs,
    iteration: step.completion.kind === 'checkpoint' ? step.completion.iteration : progress.iteration,
    loss: progress.loss,
    metrics: readMetrics(step),
    attempts: input.attempt,
    resumedFrom: progress.resumedFrom,
    durationSec: (Date.now() - started) / 1000,
    finishedAt: new Date().toISOString(),
    fingerprint: fingerprintOutputs(step),
  };
  const file = resultFile(input.runDir, step.id);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(`${file}.tmp`, JSON.stringify(result, null, 2) + '\n');
  renameSync(`${file}.tmp`, file);
  return result;
}

function closeStream(s: WriteStream): Promise<void> {
  return new Promise((resolve) => s.end(() => resolve()));
}
