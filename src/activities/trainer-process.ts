/**
 * One launch of a step's trainer: its ids, its argv with the placeholders filled, its environment (with the
 * launch token every process of the attempt inherits: attempt-tree.ts), the process itself (no shell, behind the
 * launcher, started by the worker's spawn helper), and the stop command that ends work it handed elsewhere (a Ray job).
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { execa } from 'execa';
import { spawnDetached, warmSpawner, type SpawnedProcess } from '../util/spawner.js';
import { LAUNCH_ENV } from '../util/process-tree.js';
import type { PlanStep } from '../plan/types.js';
import type { StopCommand } from './lock.js';

/** What identifies one launch of a step: its attempt number, and a token no other launch shares. */
export interface LaunchIds {
  attempt: number;
  /**
   * Unique per launch (base-36 start time, pid, random): `infir2 resume` numbers attempts from 1 again, a Ray
   * cluster refuses a submission id it has seen before, and it names the attempt's processes (INFIR2_LAUNCH), so
   * two steps one worker launches in the same millisecond must not share it.
   */
  launch: string;
}

export const newLaunchIds = (attempt: number): LaunchIds => ({
  attempt,
  launch: `${Date.now().toString(36)}${(process.pid % 1296).toString(36)}${randomBytes(3).readUIntBE(0, 3).toString(36).padStart(5, '0')}`,
});

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

/** The argv of this launch: the step's resume argv from a complete checkpoint, else its fresh command. */
export function launchArgv(step: PlanStep, ids: LaunchIds, resumeFrom: number | null): string[] {
  return resumeFrom !== null && step.resume ? fillArgv(step.resume.argv, ids, resumeFrom) : fillArgv(step.command.argv, ids);
}

/**
 * The trainer's environment: the plan's, unbuffered Python, the run's ids, the launch token (which finds every
 * process of the attempt: attempt-tree.ts), and the GPUs this worker gave it.
 */
export function trainerEnv(step: PlanStep, runId: string, ids: LaunchIds, gpuIds: string[]): Record<string, string> {
  const env: Record<string, string> = {
    ...step.command.env,
    PYTHONUNBUFFERED: '1',
    INFIR2_RUN_ID: runId,
    INFIR2_STEP_ID: step.id,
    INFIR2_ATTEMPT: String(ids.attempt),
    [LAUNCH_ENV]: ids.launch,
  };
  if (step.gpus > 0) env.CUDA_VISIBLE_DEVICES = gpuIds.join(',');
  return env;
}

/**
 * Start the trainer (argv[0] must be set): its own process group and session (a terminal's signals and the
 * worker's own group never reach it; what stops it is attempt-tree.ts), no stdin, stdout and stderr interleaved.
 * Started by the worker's spawn helper (util/spawner.ts): a fork from the worker itself held its event loop ~21 ms.
 */
export type Trainer = SpawnedProcess;

export function spawnTrainer(argv: string[], cwd: string, env: Record<string, string>): Promise<Trainer> {
  const [file, ...args] = argv;
  return spawnDetached(file!, args, { cwd, env });
}

let resolvedPython: Promise<string> | null = null;

/**
 * The Python that runs the launcher on this worker (standard library only): INFIR2_LAUNCHER_PYTHON, else the
 * interpreter that `python3` on the worker's PATH turns out to be, asked once. A version manager's shim (pyenv,
 * asdf) is a shell script that finds the interpreter anew on every start: in front of every step's launch it cost
 * 0.15 s against 0.05 s for the interpreter itself (launcher + `python3 -c pass`, this machine's pyenv). Where the
 * question fails, plain `python3`, and the launch says what is wrong with it.
 */
export function launcherPython(): Promise<string> {
  const set = process.env.INFIR2_LAUNCHER_PYTHON;
  if (set) return Promise.resolve(set);
  resolvedPython ??= execa('python3', ['-I', '-S', '-c', 'import sys; print(sys.executable)'], { timeout: 10_000, reject: false }).then(
    (r) => {
      const exe = r.exitCode === 0 ? r.stdout.trim() : '';
      return isAbsolute(exe) && existsSync(exe) ? exe : 'python3';
    },
    () => 'python3',
  );
  return resolvedPython;
}

/**
 * What the first launch on this worker would otherwise wait for (~0.25 s of the first step's start here): the spawn
 * helper, and which interpreter `python3` is. Called once the worker polls its pools.
 */
export function prepareLaunches(): void {
  warmSpawner();
  void launcherPython();
}

/** How long a step's stop command (e.g. `ray job stop`) may take. */
const ON_STOP_TIMEOUT_MS = 60_000;

/** The step's stop command (e.g. `ray job stop <submission id>`) as this launch runs it, if it has one. */
export function stopCommand(step: PlanStep, ids: LaunchIds): StopCommand | null {
  if (!step.onStop) return null;
  const untilGone = step.onStop.untilGone ? { untilGone: fillArgv(step.onStop.untilGone.argv, ids) } : {};
  return { argv: fillArgv(step.onStop.argv, ids), cwd: step.command.cwd, env: step.command.env, ...untilGone };
}

/** How often, and how long at most, a stop waits for the stopped work to be gone. */
const GONE_POLL_MS = 500;

/** Whether the work is gone: the probe answered and printed nothing (a failing probe says nothing either way). */
async function gone(stop: StopCommand): Promise<boolean> {
  const [file, ...args] = stop.untilGone!;
  const r = await execa(file!, args, { cwd: stop.cwd, env: stop.env, reject: false, timeout: 10_000 });
  return r.exitCode === 0 && String(r.stdout).trim() === '';
}

export async function runStopCommand(stop: StopCommand, note: (msg: string) => void): Promise<void> {
  const [file, ...args] = stop.argv;
  if (!file) return;
  const t0 = Date.now();
  const r = await execa(file, args, { cwd: stop.cwd, env: stop.env, reject: false, timeout: ON_STOP_TIMEOUT_MS, all: true });
  note(`stop command ${stop.argv.join(' ')}: exit ${r.exitCode ?? r.signal}${r.all ? `: ${String(r.all).trim().split('\n').at(-1)}` : ''}`);
  if (!stop.untilGone?.length || r.exitCode !== 0) return;
  while (!(await gone(stop))) {
    if (Date.now() - t0 > ON_STOP_TIMEOUT_MS) {
      note(`the stopped work is still there after ${Math.round((Date.now() - t0) / 1000)} s (${stop.untilGone.join(' ')}); going on`);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, GONE_POLL_MS));
  }
  note(`the stopped work is gone after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}
