/**
 * Stops that Megatron honours, under the torchrun users have: PyPI's torch >= 2.4 (.torch-venv, from
 * scripts/setup.sh --test), whose torchrun starts each rank in a session of its own, with the Megatron stand-in
 * (test/fixtures/megatron_standin.py: real data-loader workers, Megatron's SIGTERM handler and exit line), two ranks,
 * a real worker and dev server. Each case prints its row of the stop table (docs/operations.md "What a stop does"):
 * iterations lost, seconds from the stop to the last process gone, processes left.
 *
 *   cancel            saved at the iteration it stood at, nothing left
 *   worker SIGTERM    the same, then resumed from that save with nothing recomputed
 *   hang              the whole tree killed at once, resumed from the newest checkpoint
 *   worker SIGKILL    the next attempt stops every old rank (they save) before it launches
 *   torchrun SIGKILL  its ranks (orphaned, in sessions of their own) are still found, stopped, and save
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunStatus, StepState } from '../../src/plan/contracts.js';
import { fakePlan, freePort, journal, processesMentioning, recomputed, setupEnv, startPlan, tmpRunDir, waitFor, type Env } from './harness.js';
import { attemptsOf, expectTakeoverSaved, lastIteration, logText, NEW_TORCHRUN, newestCheckpoint, newTorchInstalled, rankMains, standinStep, torchrunPid } from './megatron-standin.js';

let env: Env;

beforeAll(async () => {
  if (!newTorchInstalled()) throw new Error(`${NEW_TORCHRUN} is missing: run scripts/setup.sh --test (make test does)`);
  env = await setupEnv('torchrun-megatron');
  await env.startWorker();
}, 120_000);

afterAll(async () => {
  await env?.teardown();
});

async function plan(name: string, o: { iters?: number; faults?: string[] } = {}) {
  const runDir = tmpRunDir(env, name);
  const launch = [NEW_TORCHRUN, '--nnodes=1', '--nproc_per_node=2', `--rdzv_endpoint=127.0.0.1:${await freePort()}`, '--rdzv_backend=c10d'];
  const step = standinStep({ runDir, iters: o.iters ?? 400, launch, faults: o.faults });
  return { runDir, plan: fakePlan(runDir, name, [step]) };
}

async function stepOf(h: { result(): Promise<unknown> }): Promise<StepState> {
  const res = (await h.result()) as { status: RunStatus };
  expect(res.status.status).toBe('completed');
  return res.status.steps[0]!;
}

/** One row of the stop table, printed for the report. */
function row(what: string, lost: number, seconds: number, left: number): void {
  console.log(`[stop table] megatron stand-in, torchrun ${NEW_TORCHRUN.includes('.torch-venv') ? '>= 2.4' : '1.13'}: ${what}: iterations lost ${lost}, stop → exit ${Number.isNaN(seconds) ? '-' : seconds.toFixed(1)} s, processes left ${left}`);
}

const nothingLeft = (runDir: string) => waitFor('no process of the run left', () => processesMentioning(runDir).length === 0, 60_000);

describe('the Megatron stand-in under torchrun >= 2.4', () => {
  it('a cancel: every rank saves at the iteration it stood at and exits with Megatron\'s line; nothing is left', async () => {
    const { runDir, plan: p } = await plan('cancel');
    const h = await startPlan(env, p);
    await waitFor('iteration 14', () => lastIteration(runDir) >= 14, 120_000);
    expect(rankMains(runDir)).toHaveLength(2);
    const t0 = Date.now();
    await h.cancel();
    await expect(h.result()).rejects.toThrow();
    await nothingLeft(runDir);
    const took = (Date.now() - t0) / 1000;
    const [a] = attemptsOf(runDir);
    const last = a!.iterations.at(-1)!;
    expect(a!.exitLine).toBe(true);
    expect(newestCheckpoint(runDir)).toBe(last);
    expect(last % 10).not.toBe(0); // a save of its own, not the interval's
    expect(logText(runDir)).not.toMatch(/DataLoader worker \(pid/);
    expect(logText(runDir)).toMatch(/\[infir2-launch\] stop requested: SIGTERM to processes \d+ \d+$/m);
    row('cancel', last - newestCheckpoint(runDir)!, took, processesMentioning(runDir).length);
  }, 300_000);

  it('a worker SIGTERM (preemption): the ranks save where they stand; the next worker resumes there, recomputing nothing', async () => {
    const { runDir, plan: p } = await plan('preempt', { iters: 60 });
    const spare = env.workers.filter((w) => w.exitCode === null && w.signalCode === null);
    const h = await startPlan(env, p);
    await waitFor('iteration 14', () => lastIteration(runDir) >= 14, 120_000);
    const t0 = Date.now();
    await Promise.all(spare.map((w) => env.stopWorker(w)));
    await nothingLeft(runDir);
    const took = (Date.now() - t0) / 1000;
    const first = attemptsOf(runDir)[0]!;
    expect(first.exitLine).toBe(true);
    expect(newestCheckpoint(runDir)).toBe(first.iterations.at(-1));
    row('worker SIGTERM', first.iterations.at(-1)! - newestCheckpoint(runDir)!, took, processesMentioning(runDir).length);
    await env.startWorker();
    const st = await stepOf(h);
    expect(st.failures).toEqual({ preempted: 1 });
    const second = attemptsOf(runDir)[1]!;
    expect(second.note).toMatch(new RegExp(`resuming from iteration ${first.iterations.at(-1)}\\b`));
    expect(second.iterations[0]).toBe(first.iterations.at(-1)! + 1);
    expect(recomputed(runDir, 'cpt.stable')).toEqual([]);
    await nothingLeft(runDir);
  }, 400_000);

  it('a hang (a rank stops answering in the all-reduce): the whole tree is killed at once and resumed from the newest checkpoint', async () => {
    const { runDir, plan: p } = await plan('hang', { iters: 40, faults: ['hang@25'] });
    const h = await startPlan(env, p);
    await waitFor('the hang to be declared', () => existsSync(`${runDir}/logs/cpt.stable.log`) && /\] stall: /.test(logText(runDir)), 180_000);
    const t0 = Date.now();
    await waitFor('the attempt to end', () => /attempt 1 ended/.test(logText(runDir)), 60_000);
    const took = (Date.now() - t0) / 1000;
    expect(logText(runDir)).toMatch(/stopping the attempt's processes: stall: all at once/);
    const st = await stepOf(h);
    expect(st.failures).toEqual({ hang: 1 });
    const [first, second] = attemptsOf(runDir);
    expect(first!.iterations.at(-1)).toBe(24);
    expect(second!.note).toMatch(/resuming from iteration 20\b/);
    row('hang (kill at once)', first!.iterations.at(-1)! - 20, took, 0);
    await nothingLeft(runDir);
  }, 400_000);

  it('a worker SIGKILLed: its ranks train on unsupervised until the next attempt stops every one of them (they save) before it launches', async () => {
    const { runDir, plan: p } = await plan('workerkill', { iters: 60 });
    for (const w of env.workers.filter((x) => x.exitCode === null && x.signalCode === null)) await env.stopWorker(w);
    const victim = await env.startWorker();
    const h = await startPlan(env, p);
    await waitFor('iteration 14', () => lastIteration(runDir) >= 14, 120_000);
    const oldRanks = rankMains(runDir);
    expect(oldRanks).toHaveLength(2);
    process.kill(victim.pid!, 'SIGKILL');
    await env.startWorker();
    const st = await stepOf(h);
    expect(st.failures).toEqual({ preempted: 1 });
    const takeover = expectTakeoverSaved(runDir, oldRanks);
    row('worker SIGKILL (next attempt stops the old ranks)', takeover.lost, takeover.stopSec, 0);
    await nothingLeft(runDir);
  }, 400_000);

  it('torchrun SIGKILLed alone: its orphaned ranks (sessions of their own) are found, stopped, and save; the step resumes there', async () => {
    const { runDir, plan: p } = await plan('torchrun-kill', { iters: 60 });
    const h = await startPlan(env, p);
    await waitFor('iteration 14', () => lastIteration(runDir) >= 14, 120_000);
    const ranks = rankMains(runDir);
    const torchrun = torchrunPid(runDir)!;
    expect(torchrun).toBeGreaterThan(0);
    const t0 = Date.now();
    process.kill(torchrun, 'SIGKILL');
    await waitFor('the old ranks to be gone', () => ranks.every((pid) => !existsSync(`/proc/${pid}`)), 60_000);
    const took = (Date.now() - t0) / 1000;
    const st = await stepOf(h);
    expect(st.failures).toEqual({ preempted: 1 });
    const [first, second] = attemptsOf(runDir);
    expect(logText(runDir)).toMatch(/\[infir2-launch\] the command ended, leaving processes: SIGTERM to processes \d+ \d+/);
    expect(first!.exitLine).toBe(true);
    expect(second!.note).toMatch(new RegExp(`resuming from iteration ${first!.iterations.at(-1)}\\b`));
    expect(recomputed(runDir, 'cpt.stable')).toEqual([]);
    row('torchrun SIGKILL', first!.iterations.at(-1)! - Number(/resuming from iteration (\d+)/.exec(second!.note)![1]), took, 0);
    await nothingLeft(runDir);
  }, 400_000);
});
