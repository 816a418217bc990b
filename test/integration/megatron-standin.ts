/**
 * Plans around the Megatron stand-in (test/fixtures/megatron_standin.py) under a real torchrun, and what the stop
 * tests read back: the attempts and iterations of its log, the newest checkpoint, the processes left.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PlanStep, StallSpec } from '../../src/plan/types.js';
import { expect } from 'vitest';
import { journal, POOL, processesMentioning, recomputed, ROOT } from './harness.js';

export const STANDIN = join(ROOT, 'test', 'fixtures', 'megatron_standin.py');
/** PyPI's torch >= 2.4 (scripts/setup.sh --test): ranks in sessions of their own. */
export const TORCH_VENV = join(ROOT, '.torch-venv');
export const NEW_TORCHRUN = join(TORCH_VENV, 'bin', 'torchrun');
export const newTorchInstalled = () => existsSync(NEW_TORCHRUN);

/** Limits that let a hang be found in ~10 s while torch's start-up and a save get their time. */
export const STALL: StallSpec = { startupSec: 90, factor: 3, floorSec: 10, basis: 'p95', saveSec: 20, evalSec: 20, saveEvery: 10, evalEvery: null, capSec: 120 };

export interface StandinOptions {
  id?: string;
  runDir: string;
  iters: number;
  /** The launch before the stand-in: torchrun's argv (`[torchrun, --nnodes=1, …]`), or srun's and torchrun's. */
  launch: string[];
  faults?: string[];
  iterSleep?: number;
  saveInterval?: number;
  /** The command starts the launcher on each node itself (an srun step). */
  nodeLaunchers?: boolean;
  /** More of the step (an srun step's job and stop command). */
  extra?: Partial<PlanStep>;
}

/** One CPT-like step: the stand-in with Megatron's stop flag and data-loader workers, resumed with --ckpt-step. */
export function standinStep(o: StandinOptions): PlanStep {
  const id = o.id ?? 'cpt.stable';
  const cwd = join(o.runDir, id);
  const ckpt = join(cwd, 'checkpoints');
  const argv = [
    ...o.launch,
    STANDIN,
    '--train-iters', String(o.iters),
    '--save', ckpt, '--load', ckpt,
    '--save-interval', String(o.saveInterval ?? 10),
    '--exit-signal-handler', '--num-workers', '2',
    '--iter-sleep', String(o.iterSleep ?? 0.3),
    '--journal', join(cwd, 'journal.jsonl'),
    '--fault-state', join(cwd, 'faults.json'),
    ...(o.faults ?? []).flatMap((f) => ['--fault', f]),
  ];
  return {
    id, kind: 'cpt', backend: 'megatron', pool: POOL, nodes: 1, gpus: 0, dependsOn: [],
    inputs: {}, outputs: { checkpointDir: ckpt },
    command: { argv, env: {}, cwd },
    resume: { argv: [...argv, '--ckpt-step', '{iteration}'] },
    ...(o.nodeLaunchers ? { nodeLaunchers: true } : {}),
    progress: { format: 'megatron', totalIterations: o.iters },
    checkpoint: { layout: 'megatron', dir: ckpt },
    completion: { kind: 'checkpoint', dir: ckpt, iteration: o.iters },
    stallTimeoutSec: STALL.capSec, stall: STALL, attemptTimeoutSec: 900,
    retries: { crash: 2, hang: 2, oom: 0, preempted: 3, storage: 1, config: 0 },
    summary: `megatron stand-in ${id}`,
    ...o.extra,
  };
}

export interface LoggedAttempt {
  note: string;
  iterations: number[];
  saved: number[];
  exitLine: boolean;
}

/** The attempts as the step's log tells them: launch note, iterations printed, checkpoints saved, the exit line. */
export function attemptsOf(runDir: string, stepId = 'cpt.stable'): LoggedAttempt[] {
  const file = join(runDir, 'logs', `${stepId}.log`);
  if (!existsSync(file)) return [];
  const out: LoggedAttempt[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const note = /^\[infir2 \S+\] (attempt \d+ .*)$/.exec(line);
    if (note && /^attempt \d+ (starting fresh|resuming from iteration)/.test(note[1]!)) out.push({ note: note[1]!, iterations: [], saved: [], exitLine: false });
    const a = out.at(-1);
    if (!a) continue;
    const it = /\] iteration\s+(\d+)\//.exec(line);
    if (it) a.iterations.push(Number(it[1]));
    const saved = /successfully saved checkpoint from iteration\s+(\d+)/.exec(line);
    if (saved) a.saved.push(Number(saved[1]));
    if (/\[exiting program after receiving SIGTERM\.\]/.test(line)) a.exitLine = true;
  }
  return out;
}

export const lastIteration = (runDir: string, stepId = 'cpt.stable') => attemptsOf(runDir, stepId).at(-1)?.iterations.at(-1) ?? 0;

export function logText(runDir: string, stepId = 'cpt.stable'): string {
  return readFileSync(join(runDir, 'logs', `${stepId}.log`), 'utf8');
}

export function newestCheckpoint(runDir: string, stepId = 'cpt.stable'): number | null {
  const f = join(runDir, stepId, 'checkpoints', 'latest_checkpointed_iteration.txt');
  return existsSync(f) ? Number(readFileSync(f, 'utf8').trim()) : null;
}

/** The pids of the rank main processes (torchrun's children with RANK; not their data-loader workers). */
export function rankMains(runDir: string): number[] {
  const pids = processesMentioning(runDir);
  const env = (pid: number) => {
    try {
      return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter((e) => e.startsWith('RANK=')).join();
    } catch {
      return '';
    }
  };
  const ppid = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
  return pids.filter((p) => {
    try {
      return env(p) !== '' && env(ppid(p)) === '';
    } catch {
      return false;
    }
  });
}

/** torchrun's own process (the launcher's child running torchrun). */
export function torchrunPid(runDir: string): number | undefined {
  return processesMentioning(runDir).find((pid) => {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      return argv.slice(0, 2).some((a) => /torchrun$/.test(a)) && !argv.some((a) => a.endsWith('infir2_launch.py'));
    } catch {
      return false;
    }
  });
}

/**
 * After a worker SIGKILL and the next attempt's takeover: the old ranks are gone, and they saved where they stood
 * before it loaded (their output went with the worker, so the journal, a file, says how far they got); two
 * trainers never wrote together and nothing was recomputed. Returns the stop table's figures: iterations lost,
 * seconds from the takeover's first note to the lock taken (the old tree gone).
 */
export function expectTakeoverSaved(runDir: string, oldRanks: number[]): { lost: number; stopSec: number } {
  const log = logText(runDir);
  expect(log).toMatch(/terminating a trainer of an earlier attempt \(.* attempt 1, launch [0-9a-z]+\)/);
  for (const pid of oldRanks) expect(existsSync(`/proc/${pid}`)).toBe(false);
  const [, second] = attemptsOf(runDir);
  const entries = journal(runDir, 'cpt.stable');
  const oldPid = entries[0]!.pid;
  const oldLast = Math.max(...entries.filter((e) => e.pid === oldPid).map((e) => e.iteration));
  const from = Number(/resuming from iteration (\d+)/.exec(second!.note)![1]);
  expect(from).toBe(oldLast);
  expect(from).toBeGreaterThan(14);
  const pids = entries.map((e) => e.pid);
  const switchAt = pids.findIndex((x) => x !== pids[0]);
  expect(pids.slice(switchAt).includes(pids[0]!)).toBe(false);
  expect(recomputed(runDir, 'cpt.stable')).toEqual([]);
  const at = (re: RegExp) => Date.parse(/^\[infir2 (\S+)\] /.exec(log.split('\n').find((l) => re.test(l))!)![1]!);
  return { lost: oldLast - from, stopSec: (at(/taking over a stale lock/) - at(/terminating a trainer of an earlier attempt/)) / 1000 };
}
