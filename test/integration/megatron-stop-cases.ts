/**
 * The stop cases both launches of the Megatron stand-in go through (test/integration/torchrun-megatron.test.ts:
 * torchrun on this host; test/cluster/slurm-megatron.test.ts: srun + torchrun on two Slurm nodes). Each case
 * drives the stop, checks what every launch must give (the save where the ranks stood, the resume with nothing
 * recomputed, nothing left), prints its row of the stop table (docs/operations.md "What a stop does"), and hands
 * back what it read, for the checks only one launch has.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { RunStatus, StepState } from '../../src/plan/contracts.js';
import type { Plan } from '../../src/plan/types.js';
import { processesMentioning, recomputed, startPlan, waitFor, type Env } from './harness.js';
import { attemptsOf, expectTakeoverSaved, lastIteration, logText, newestCheckpoint, rankMains, type LoggedAttempt } from './megatron-standin.js';

export interface StopLaunch {
  /** The stop table's name of the launch, e.g. `torchrun >= 2.4`. */
  label: string;
  env(): Env;
  plan(name: string, o?: { iters?: number; faults?: string[] }): Promise<{ runDir: string; plan: Plan }>;
  startWorker(): Promise<ChildProcess>;
  /** Waits until nothing of the run is left (processes, and a scheduler's jobs where there is one). */
  nothingLeft(runDir: string): Promise<unknown>;
  /** How long the stand-in may take to reach its 14th iteration (srun starts slower). */
  reachMs: number;
}

export async function completedStep(h: { result(): Promise<unknown> }): Promise<StepState> {
  const res = (await h.result()) as { status: RunStatus };
  expect(res.status.status).toBe('completed');
  return res.status.steps[0]!;
}

function row(l: StopLaunch, what: string, lost: number, seconds: number, left: number): void {
  console.log(`[stop table] megatron stand-in, ${l.label}: ${what}: iterations lost ${lost}, stop → exit ${Number.isNaN(seconds) ? '-' : seconds.toFixed(1)} s, processes left ${left}`);
}

const liveWorkers = (env: Env) => env.workers.filter((w) => w.exitCode === null && w.signalCode === null);
const secondsSince = (t0: number) => (Date.now() - t0) / 1000;

/** A cancel: every rank saves where it stood and exits with Megatron's line; nothing is left. */
export async function cancelCase(l: StopLaunch): Promise<{ runDir: string; attempt: LoggedAttempt }> {
  const { runDir, plan } = await l.plan('cancel');
  const h = await startPlan(l.env(), plan);
  await waitFor('iteration 14', () => lastIteration(runDir) >= 14, l.reachMs);
  expect(rankMains(runDir)).toHaveLength(2);
  const t0 = Date.now();
  await h.cancel();
  await expect(h.result()).rejects.toThrow();
  await l.nothingLeft(runDir);
  const took = secondsSince(t0);
  const [a] = attemptsOf(runDir);
  expect(a!.exitLine).toBe(true);
  expect(newestCheckpoint(runDir)).toBe(a!.iterations.at(-1));
  expect(logText(runDir)).not.toMatch(/DataLoader worker \(pid/);
  row(l, 'cancel', a!.iterations.at(-1)! - newestCheckpoint(runDir)!, took, processesMentioning(runDir).length);
  return { runDir, attempt: a! };
}

/** Every worker SIGTERMed (a preemption): the ranks save where they stand; the next worker resumes there. */
export async function preemptCase(l: StopLaunch, iters: number): Promise<{ runDir: string; attempts: LoggedAttempt[] }> {
  const { runDir, plan } = await l.plan('preempt', { iters });
  const live = liveWorkers(l.env());
  const h = await startPlan(l.env(), plan);
  await waitFor('iteration 14', () => lastIteration(runDir) >= 14, l.reachMs);
  const t0 = Date.now();
  await Promise.all(live.map((w) => l.env().stopWorker(w)));
  await l.nothingLeft(runDir);
  const took = secondsSince(t0);
  const first = attemptsOf(runDir)[0]!;
  expect(first.exitLine).toBe(true);
  expect(newestCheckpoint(runDir)).toBe(first.iterations.at(-1));
  row(l, 'worker SIGTERM', first.iterations.at(-1)! - newestCheckpoint(runDir)!, took, processesMentioning(runDir).length);
  await l.startWorker();
  const st = await completedStep(h);
  expect(st.failures).toEqual({ preempted: 1 });
  expect(attemptsOf(runDir)[1]!.note).toMatch(new RegExp(`resuming from iteration ${first.iterations.at(-1)}\\b`));
  expect(recomputed(runDir, 'cpt.stable')).toEqual([]);
  await l.nothingLeft(runDir);
  return { runDir, attempts: attemptsOf(runDir) };
}

/** A rank silent in the all-reduce at iteration 25: the whole tree is killed at once, resumed from iteration 20. */
export async function hangCase(l: StopLaunch, declaredMs: number): Promise<{ runDir: string; attempts: LoggedAttempt[] }> {
  const { runDir, plan } = await l.plan('hang', { iters: 40, faults: ['hang@25'] });
  const h = await startPlan(l.env(), plan);
  await waitFor('the hang to be declared', () => existsSync(join(runDir, 'logs', 'cpt.stable.log')) && /\] stall: /.test(logText(runDir)), declaredMs);
  const t0 = Date.now();
  await waitFor('the attempt to end', () => /attempt 1 ended/.test(logText(runDir)), 60_000);
  const took = secondsSince(t0);
  expect(logText(runDir)).toMatch(/stopping the attempt's processes: stall: all at once/);
  const st = await completedStep(h);
  expect(st.failures).toEqual({ hang: 1 });
  const [first, second] = attemptsOf(runDir);
  expect(second!.note).toMatch(/resuming from iteration 20\b/);
  row(l, 'hang (kill at once)', first!.iterations.at(-1)! - 20, took, 0);
  await l.nothingLeft(runDir);
  return { runDir, attempts: [first!, second!] };
}

/**
 * The worker SIGKILLed: its ranks train on unsupervised until the next attempt has every one of them save and stop
 * before it launches. `whileTraining` checks what the launch leaves running meanwhile.
 */
export async function workerKillCase(l: StopLaunch, iters: number, whileTraining: (runDir: string) => void = () => undefined): Promise<void> {
  const { runDir, plan } = await l.plan('workerkill', { iters });
  for (const w of liveWorkers(l.env())) await l.env().stopWorker(w);
  const victim = await l.startWorker();
  const h = await startPlan(l.env(), plan);
  await waitFor('iteration 14', () => lastIteration(runDir) >= 14, l.reachMs);
  const oldRanks = rankMains(runDir);
  expect(oldRanks).toHaveLength(2);
  whileTraining(runDir);
  process.kill(victim.pid!, 'SIGKILL');
  await l.startWorker();
  const st = await completedStep(h);
  expect(st.failures).toEqual({ preempted: 1 });
  const takeover = expectTakeoverSaved(runDir, oldRanks);
  row(l, 'worker SIGKILL (next attempt stops the old ranks)', takeover.lost, takeover.stopSec, 0);
  await l.nothingLeft(runDir);
}

/** torchrun (the one `torchrunOf` finds) SIGKILLed alone: its orphaned ranks are found, stopped, and save; the step resumes there. */
export async function torchrunKillCase(
  l: StopLaunch,
  iters: number,
  torchrunOf: (runDir: string) => number | undefined,
  o: { saveMayBeLost?: boolean } = {},
): Promise<{ runDir: string; step: StepState; first: LoggedAttempt }> {
  const { runDir, plan } = await l.plan('torchrun-kill', { iters });
  const h = await startPlan(l.env(), plan);
  await waitFor('iteration 14', () => lastIteration(runDir) >= 14, l.reachMs);
  const ranks = rankMains(runDir);
  const torchrun = torchrunOf(runDir)!;
  expect(torchrun).toBeGreaterThan(0);
  const t0 = Date.now();
  process.kill(torchrun, 'SIGKILL');
  await waitFor('the old ranks to be gone', () => ranks.every((pid) => !existsSync(`/proc/${pid}`)), 60_000);
  const took = secondsSince(t0);
  const step = await completedStep(h);
  const [first, second] = attemptsOf(runDir);
  const last = first!.iterations.at(-1)!;
  const resumedFrom = Number(/resuming from iteration (\d+)/.exec(second!.note)?.[1]);
  if (o.saveMayBeLost) {
    // Saved where it stood, or (the other node's rank stopped before the save) the interval's save before it.
    expect(resumedFrom === last || (resumedFrom % 10 === 0 && last - resumedFrom < 10)).toBe(true);
  } else {
    // The next attempt resumes from a save at the last iteration printed: the orphaned ranks saved where they stood.
    expect(second!.note).toMatch(new RegExp(`resuming from iteration ${last}\\b`));
  }
  expect(recomputed(runDir, 'cpt.stable', o.saveMayBeLost ? resumedFrom : Infinity)).toEqual([]);
  row(l, 'torchrun SIGKILL', last - resumedFrom, took, 0);
  await l.nothingLeft(runDir);
  return { runDir, step, first: first! };
}
