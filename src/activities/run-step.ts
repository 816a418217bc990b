/**
 * runStep: supervise one attempt of one plan step, in named phases:
 *
 *   (run dir)       the run directory still holds this run's plan.json, before anything is created in it
 *                   (run-identity.ts): a removed directory is never recreated empty
 *   checkInputs     a missing input, or a secret missing from the worker's environment, is a config failure,
 *                   before anything is held
 *   preflight       the step's own interpreter and environment, on every node, against the recipe's versions and
 *                   the known-bad combinations; room for its checkpoints, its inputs readable (preflight-phase.ts)
 *   acquire         the step's GPUs (claimed host-wide: gpu-slots.ts), then the exclusive lock on its checkpoint
 *                   dir (which also stops a trainer left by an earlier attempt); heartbeats go on while waiting (acquire.ts)
 *   chooseStart     the newest complete checkpoint (partial saves are moved aside); a step whose final
 *                   checkpoint is complete is not run again
 *   launch          argv without a shell, behind the launcher that owns its process tree on each node, every
 *                   process carrying the launch's token (trainer-process.ts, attempt-tree.ts); a scheduler job
 *                   it starts (srun's) is looked up for `status` meanwhile (scheduler-job.ts)
 *   supervise       output teed to `<run>/logs/<step>.log` and parsed into heartbeats; the watchdog stops a
 *                   stalled, timed-out, cancelled or shut-down trainer, or one whose directories vanished
 *                   (supervise.ts, dir-watch.ts)
 *   conclude        success writes the result; anything else runs the step's stop command and fails the
 *                   attempt with its class (classify.ts), which the workflow's retry rule reads
 *   hand over       the outcome waits until the Temporal server answers, so that it is never sent into an
 *                   outage and dropped (server-wait.ts)
 *   release         GPUs and lock, on every path
 */
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import type { Progress, StepResult } from '../plan/contracts.js';
import { inspectCheckpointDir, quarantinePartials } from '../rundir/checkpoints.js';
import { prunePartials } from '../rundir/checkpoint-health.js';
import { CheckpointGoneError, pinCheckpoint } from '../rundir/retention.js';
import { runDirVerdict } from '../rundir/run-identity.js';
import { isStorageError, storageReason } from '../rundir/storage.js';
import { failure, openAttempt, type Attempt, type RunStepInput } from './attempt.js';
import { classifyExit } from './classify.js';
import { refineVerdict, workerStorageVerdict } from './failure-evidence.js';
import { acquire, type Held } from './acquire.js';
import type { GpuSlots } from './gpu-slots.js';
import { watchOomKills, type OomWatch } from './oom-kills.js';
import { closeStream, completionMet, inputExists, writeResult } from './step-files.js';
import { MissingSecretError, redact, resolveSecrets } from './secrets.js';
import { untilServerAnswers, type ServerProbe } from './server-wait.js';
import { preflightPhase } from './preflight-phase.js';
import { Pruner } from './retention-runner.js';
import { watchSchedulerJob } from './scheduler-job.js';
import { supervise, type AttemptEnd } from './supervise.js';
import { attemptTree, forgetStopFile, killAttempt, launchedArgv } from './attempt-tree.js';
import { fixedStallSpec } from './stall-policy.js';
import { launchAllowanceSec } from './stop-allowance.js';
import { launchArgv, launcherPython, runStopCommand, spawnTrainer, stopCommand, trainerEnv, type Trainer } from './trainer-process.js';

export type { RunStepInput } from './attempt.js';

export interface SupervisorOptions {
  /** The GPUs of this worker; a step waits (heartbeating) until it gets as many as it needs. */
  gpus: GpuSlots;
  /** Time a trainer gets to save and exit after SIGTERM before SIGKILL, ms (the worker passes 30000 by default). */
  killGraceMs: number;
  /** Heartbeat at least this often while the process lives (worker liveness, cancellation delivery), ms (the worker passes 2000 by default). */
  keepAliveMs: number;
  /**
   * Whether the Temporal server takes a heartbeat of this task now: a step's outcome waits for it
   * (server-wait.ts; the worker's is workers/server-probe.ts). None: no wait.
   */
  serverTakes?: (taskToken: Uint8Array, progress: Progress) => Promise<boolean>;
}


export function createRunStep(opts: SupervisorOptions) {
  return async function runStep(input: RunStepInput): Promise<StepResult> {
    // Before anything is created: a run directory that was removed must not be recreated empty.
    const gone = runDirVerdict(input.runDir, input.recipe, input.runId);
    if (gone) throw ApplicationFailure.create({ type: gone.cls, message: `${input.step.id}: ${gone.cls}: ${gone.reason}`, nonRetryable: gone.cls === 'config' });
    let a: Attempt;
    try {
      a = openAttempt(input);
    } catch (err) {
      // The step's directory or log cannot even be created: a storage fault, not a crash of the worker.
      if (!isStorageError(err)) throw err;
      throw ApplicationFailure.create({ type: 'storage', message: `${input.step.id}: storage: ${storageReason(err.code, err.path ?? input.step.command.cwd)}` });
    }
    const held: Held = { gpuIds: [], lock: null };
    // A heartbeat from the first phase to the last: every phase may wait (the probe on srun, GPUs, the lock, a
    // graceful stop's save, scancel until the job is gone, the server's answer), and an attempt silent past the
    // heartbeat timeout would be taken for a dead worker (preempted) while it is still stopping its trainer.
    const keepAlive = setInterval(() => a.ctx.heartbeat({ ...a.progress, updatedAt: new Date().toISOString() }), opts.keepAliveMs);
    try {
      checkInputs(a);
      checkSecrets(a);
      await preflightPhase(a);
      await acquire(a, held, opts);
      const resumeFrom = await chooseStart(a);
      // Retention applies to what is on disk from the start (a resumed or finished step included).
      const pruner = new Pruner(a);
      pruner.request();
      let result: StepResult;
      if (resumeFrom === 'done') {
        await pruner.idle();
        result = await writeResult(a.step, input.runDir, input.attempt, a.progress, a.started);
      } else {
        // A first attempt that loads another root's checkpoint (a fork's source) pins it while it runs.
        const unpin = await pinReads(a, resumeFrom);
        let end: AttemptEnd;
        let oomKills: OomWatch | null;
        try {
          const launched = await launch(a, held, resumeFrom, opts.gpus, opts.killGraceMs);
          oomKills = launched.oomKills;
          // The scheduler job it runs as (srun's), found while it trains: `status` shows its id and nodes.
          const jobWatch = new AbortController();
          const job = watchSchedulerJob(a, a.step.command.env, jobWatch.signal);
          end = await supervise(a, launched.trainer, launched.tree, held.lock!, opts, pruner).finally(() => {
            jobWatch.abort();
            forgetStopFile(launched.tree);
          });
          await job;
          // Output lines become failure messages, which go into history: a secret the trainer printed must not.
          end.tail = end.tail.map((l) => redact(l, launched.secretValues));
        } finally {
          unpin();
        }
        result = await conclude(a, end, oomKills);
      }
      await untilServerAnswers(a, serverProbe(a, opts));
      return result;
    } catch (err) {
      // A failure is an outcome too: sent into an outage, it would be dropped and the step retried blind.
      if (!(err instanceof CancelledFailure)) await untilServerAnswers(a, serverProbe(a, opts));
      // Every file the worker writes (lock, moved checkpoints, result) may meet a full or read-only disk: the
      // attempt fails as `storage` and the worker goes on serving everything else.
      const v = await workerStorageVerdict(a, err);
      if (!v) throw err;
      a.note(`attempt ${input.attempt} failed: storage: ${v.reason}`);
      throw failure(a, v.cls, v.reason);
    } finally {
      clearInterval(keepAlive);
      opts.gpus.release(held.gpuIds);
      held.lock?.release();
      await closeStream(a.log);
    }
  };
}

/** The probe of this attempt's own task (its token, its progress), when the worker gave one. */
function serverProbe(a: Attempt, opts: SupervisorOptions): ServerProbe | undefined {
  const takes = opts.serverTakes;
  return takes && (() => takes(a.ctx.info.taskToken, a.progress));
}

function checkInputs(a: Attempt): void {
  const missing = Object.entries(a.step.inputs).filter(([, p]) => !inputExists(p));
  if (!missing.length) return;
  const what = missing.map(([role, p]) => `input '${role}' not found: ${p}`).join('; ');
  a.note(`attempt ${a.input.attempt} not started: ${what}`);
  throw failure(a, 'config', what);
}

/** Every secret the step reads is in this worker's environment, before anything is held (names only in the failure). */
function checkSecrets(a: Attempt): void {
  try {
    resolveSecrets(a.step, [...a.step.command.argv, ...(a.step.resume?.argv ?? [])]);
  } catch (err) {
    if (!(err instanceof MissingSecretError)) throw err;
    a.note(`attempt ${a.input.attempt} not started: ${err.message}`);
    throw failure(a, 'config', err.message);
  }
}

/**
 * Pin the checkpoints of other roots the step's first attempt loads (checkpoint.reads); a resumed attempt loads
 * its own. One that retention has deleted is a configuration failure naming it. Returns the release.
 */
async function pinReads(a: Attempt, resumeFrom: number | null): Promise<() => void> {
  const reads = resumeFrom === null ? (a.step.reads ?? []) : [];
  const releases: (() => void)[] = [];
  const owner = `${a.ctx.info.workflowExecution?.workflowId ?? a.step.id} attempt ${a.input.attempt}`;
  try {
    for (const r of reads) releases.push(await pinCheckpoint(r.dir, r.iteration, owner));
  } catch (err) {
    for (const release of releases) release();
    if (!(err instanceof CheckpointGoneError)) throw err;
    a.note(`attempt ${a.input.attempt} not started: ${err.message}`);
    throw failure(a, 'config', err.message);
  }
  return () => releases.forEach((release) => release());
}

/** Remove the moved-aside partial saves a complete checkpoint has superseded, saying so in the step's log. */
async function pruneSuperseded(a: Attempt, dir: string): Promise<void> {
  for (const gone of (await prunePartials(dir)).removed) a.note(`removed a partial save a newer complete checkpoint supersedes: ${gone}`);
}

/** The iteration to resume from (null: fresh), or 'done' when the final checkpoint is already complete. */
async function chooseStart(a: Attempt): Promise<number | null | 'done'> {
  const { step, progress, note } = a;
  const insp = step.checkpoint ? inspectCheckpointDir(step.checkpoint.dir) : null;
  if (insp) {
    for (const moved of quarantinePartials(insp, `${Date.now()}`)) note(`moved a partial checkpoint aside: ${moved}`);
    await pruneSuperseded(a, insp.dir);
    progress.lastCheckpoint = insp.latestComplete;
  }
  if (step.completion.kind === 'checkpoint' && completionMet(step, insp)) {
    note(`attempt ${a.input.attempt}: final checkpoint ${step.completion.iteration} is already complete; nothing to run`);
    progress.iteration = step.completion.iteration;
    return 'done';
  }
  progress.resumedFrom = step.resume && insp?.latestComplete != null ? insp.latestComplete : null;
  return progress.resumedFrom;
}

async function launch(a: Attempt, held: Held, resumeFrom: number | null, gpus: GpuSlots, killGraceMs: number) {
  const { step, input, ids, progress } = a;
  const argv = launchArgv(step, ids, resumeFrom);
  // The line shows the argv before secrets are filled in: `{secret:NAME}`, never a value.
  a.note(`attempt ${input.attempt} ${resumeFrom !== null ? `resuming from iteration ${resumeFrom}` : 'starting fresh'}: ${argv.join(' ')}`);
  if (!argv[0]) throw failure(a, 'config', 'empty command');
  const secrets = resolveSecrets(step, argv);
  const nodeLaunchers = step.nodeLaunchers === true;
  const allowanceSec = launchAllowanceSec(step.stall ?? fixedStallSpec(step.stallTimeoutSec), killGraceMs);
  const spawned = launchedArgv(secrets.argv, nodeLaunchers, await launcherPython(), allowanceSec);
  let trainer: Trainer;
  try {
    trainer = await spawnTrainer(spawned, step.command.cwd, { ...trainerEnv(step, input.runId, ids, held.gpuIds), ...secrets.env });
  } catch (err) {
    // The spawn helper died between starting the launcher and saying so: what it started carries this launch's
    // token, and nothing of an attempt that never began may train on beside the next one.
    await killAttempt(attemptTree(ids.launch, step.command.cwd, nodeLaunchers, null));
    throw err;
  }
  const pid = trainer.pid;
  if (pid === undefined) {
    const r = await trainer.exited;
    throw failure(a, 'config', r.message ?? `could not start ${spawned[0]}`);
  }
  const tree = attemptTree(ids.launch, step.command.cwd, nodeLaunchers, pid);
  held.lock!.setTrainer(pid, tree, stopCommand(step, ids));
  // The GPUs stay claimed on the host while any process of this attempt lives, even if this worker dies first.
  gpus.setTrainer(held.gpuIds, pid, ids.launch);
  progress.pid = pid;
  // Kernel OOM kills are counted from the launch, so that a SIGKILL can be told apart from an outside kill.
  return { trainer, tree, oomKills: watchOomKills(pid), secretValues: secrets.values };
}

async function conclude(a: Attempt, end: AttemptEnd, oomKills: OomWatch | null): Promise<StepResult> {
  const { step, input, note } = a;
  const { exitCode, signal, stoppedBy, sawSigtermExit, tail } = end;
  note(`attempt ${input.attempt} ended: ${exitCode !== null ? `exit code ${exitCode}` : `signal ${signal}`}${stoppedBy ? ` (stopped: ${stoppedBy})` : ''}`);
  const succeeded = stoppedBy !== 'cancel' && stoppedBy !== 'vanished' && exitCode === 0 && !sawSigtermExit && completionMet(step);
  // Whatever ended an unsuccessful attempt (a stop of ours, a signal from outside, an error), work it handed
  // elsewhere may still run: a killed `ray job submit` client leaves its Ray job training. Stopping a job that
  // has already ended is harmless.
  const stopCmd = stopCommand(step, a.ids);
  if (!succeeded && stopCmd) await runStopCommand(stopCmd, note);
  await a.flushLog(); // a full or read-only disk under the log is part of why the attempt failed
  if (stoppedBy === 'cancel') throw new CancelledFailure(`${step.id}: cancelled`);
  if (succeeded) {
    if (step.checkpoint) await pruneSuperseded(a, step.checkpoint.dir);
    return await writeResult(step, input.runDir, input.attempt, a.progress, a.started);
  }
  const { cls, reason } = end.vanished
    ? { cls: 'storage' as const, reason: end.vanished }
    : await refineVerdict(a, classifyExit({ exitCode, signal, stoppedBy, sawSigtermExit, tail, stall: end.stall, oomKills: oomKills?.() ?? undefined }), tail);
  note(`attempt ${input.attempt} failed: ${cls}: ${reason}`);
  throw failure(a, cls, reason);
}
