/**
 * Stops that Megatron honours under srun on a real Slurm (two nodes: test/cluster/slurm.ts), with torch >= 2.4's
 * torchrun (.torch-venv) and the Megatron stand-in (test/fixtures/megatron_standin.py): srun runs infir2's launcher
 * as its task on each node, torchrun under it, one rank per node. scancel and srun's own signal forwarding reach
 * every process of the step, data-loader workers included, so the supervisor never signals srun: it asks the
 * launchers through the stop file on the step's shared directory. Each case prints its row of the stop table.
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunStatus, StepState } from '../../src/plan/contracts.js';
import { LAUNCHER_FILE } from '../../src/plan/types.js';
import { fakePlan, freePort, journal, processesMentioning, recomputed, ROOT, setupEnv, startPlan, tmpRunDir, waitFor, type Env } from '../integration/harness.js';
import { attemptsOf, expectTakeoverSaved, lastIteration, logText, NEW_TORCHRUN, newestCheckpoint, newTorchInstalled, rankMains, standinStep } from '../integration/megatron-standin.js';
import { slurmInstalled, startSlurm, type SlurmCluster } from './slurm.js';

let env: Env;
let slurm: SlurmCluster;

beforeAll(async () => {
  if (!slurmInstalled()) throw new Error('Slurm and munge are not installed: run make setup-cluster (as root)');
  if (!newTorchInstalled()) throw new Error(`${NEW_TORCHRUN} is missing: run scripts/setup.sh --test`);
  slurm = await startSlurm(mkdtempSync(join(tmpdir(), 'infir2-slurm-mg-')));
  env = await setupEnv('slurm-megatron');
  await env.startWorker([], undefined, slurm.env);
});

afterAll(async () => {
  await env?.teardown();
  await slurm?.stop();
});

/** The stand-in on two Slurm nodes, srun → launcher → torchrun → one rank per node, as the 7B plan renders it. */
async function plan(name: string, o: { iters?: number; faults?: string[] } = {}) {
  const runDir = tmpRunDir(env, name);
  const jobName = `infir2-${name}-a{attempt}-{launch}`;
  const launch = [
    'srun', `--job-name=${jobName}`, '--nodes=2', '--ntasks-per-node=1', '--kill-on-bad-exit=1',
    'python3', '-I', '-S', join(ROOT, LAUNCHER_FILE), '--',
    NEW_TORCHRUN, '--nnodes=2', '--nproc_per_node=1', `--rdzv_endpoint=127.0.0.1:${await freePort()}`, '--rdzv_backend=c10d',
  ];
  const step = standinStep({
    runDir, iters: o.iters ?? 400, launch, faults: o.faults, nodeLaunchers: true,
    extra: {
      job: { scheduler: 'slurm', name: jobName, probe: { argv: ['squeue', '--noheader', `--name=${jobName}`, '--format=%i|%N'] } },
      onStop: { argv: ['scancel', `--name=${jobName}`], untilGone: { argv: ['squeue', '--noheader', `--name=${jobName}`, '--format=%i'] } },
    },
  });
  return { runDir, plan: fakePlan(runDir, name, [step]) };
}

async function stepOf(h: { result(): Promise<unknown> }): Promise<StepState> {
  const res = (await h.result()) as { status: RunStatus };
  expect(res.status.status).toBe('completed');
  return res.status.steps[0]!;
}

function row(what: string, lost: number, seconds: number, left: number): void {
  console.log(`[stop table] megatron stand-in, srun + torchrun >= 2.4: ${what}: iterations lost ${lost}, stop → exit ${Number.isNaN(seconds) ? '-' : seconds.toFixed(1)} s, processes left ${left}`);
}

/** No rank, launcher, torchrun or srun, and no job or job step in Slurm. */
const nothingLeft = (runDir: string) =>
  waitFor('nothing of the run left, in processes or in Slurm', () => processesMentioning(runDir).length === 0 && slurm.jobs().length === 0 && slurm.steps().length === 0, 60_000);

const srunPid = (runDir: string) => processesMentioning(runDir).find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] === 'srun');

describe('the Megatron stand-in under srun + torchrun >= 2.4 on a real Slurm', () => {
  it('a cancel: the launchers on both nodes let the ranks save where they stand; no process, job or step is left', async () => {
    const { runDir, plan: p } = await plan('cancel');
    const h = await startPlan(env, p);
    await waitFor('iteration 14', () => lastIteration(runDir) >= 14, 180_000);
    expect(rankMains(runDir)).toHaveLength(2);
    const t0 = Date.now();
    await h.cancel();
    await expect(h.result()).rejects.toThrow();
    await nothingLeft(runDir);
    const took = (Date.now() - t0) / 1000;
    const [a] = attemptsOf(runDir);
    expect(a!.exitLine).toBe(true);
    expect(newestCheckpoint(runDir)).toBe(a!.iterations.at(-1));
    expect(logText(runDir)).not.toMatch(/DataLoader worker \(pid/);
    // Each node's launcher signalled its own rank, and only it.
    expect(logText(runDir).match(/\[infir2-launch\] stop requested: SIGTERM to process \d+$/gm)).toHaveLength(2);
    row('cancel', a!.iterations.at(-1)! - newestCheckpoint(runDir)!, took, processesMentioning(runDir).length);
  }, 300_000);

  it('a worker SIGTERM: the ranks save; the next worker resumes there, recomputing nothing', async () => {
    const { runDir, plan: p } = await plan('preempt', { iters: 50 });
    const live = env.workers.filter((w) => w.exitCode === null && w.signalCode === null);
    const h = await startPlan(env, p);
    await waitFor('iteration 14', () => lastIteration(runDir) >= 14, 180_000);
    const t0 = Date.now();
    await Promise.all(live.map((w) => env.stopWorker(w)));
    await nothingLeft(runDir);
    const took = (Date.now() - t0) / 1000;
    const first = attemptsOf(runDir)[0]!;
    expect(first.exitLine).toBe(true);
    expect(newestCheckpoint(runDir)).toBe(first.iterations.at(-1));
    row('worker SIGTERM', first.iterations.at(-1)! - newestCheckpoint(runDir)!, took, processesMentioning(runDir).length);
    await env.startWorker([], undefined, slurm.env);
    const st = await stepOf(h);
    expect(st.failures).toEqual({ preempted: 1 });
    expect(attemptsOf(runDir)[1]!.note).toMatch(new RegExp(`resuming from iteration ${first.iterations.at(-1)}\\b`));
    expect(recomputed(runDir, 'cpt.stable')).toEqual([]);
    await nothingLeft(runDir);
  }, 400_000);

  it('a hang: every process on every node is killed at once; the step resumes from the newest checkpoint', async () => {
    const { runDir, plan: p } = await plan('hang', { iters: 40, faults: ['hang@25'] });
    const h = await startPlan(env, p);
    await waitFor('the hang to be declared', () => existsSync(join(runDir, 'logs', 'cpt.stable.log')) && /\] stall: /.test(logText(runDir)), 240_000);
    const t0 = Date.now();
    await waitFor('the attempt to end', () => /attempt 1 ended/.test(logText(runDir)), 60_000);
    const took = (Date.now() - t0) / 1000;
    expect(logText(runDir)).toMatch(/stopping the attempt's processes: stall: all at once/);
    const st = await stepOf(h);
    expect(st.failures).toEqual({ hang: 1 });
    const [first, second] = attemptsOf(runDir);
    expect(second!.note).toMatch(/resuming from iteration 20\b/);
    row('hang (kill at once)', first!.iterations.at(-1)! - 20, took, 0);
    await nothingLeft(runDir);
  }, 400_000);

  it('a worker SIGKILLed (srun lives on): the next attempt has every old rank save and stop before it launches', async () => {
    const { runDir, plan: p } = await plan('workerkill', { iters: 50 });
    for (const w of env.workers.filter((x) => x.exitCode === null && x.signalCode === null)) await env.stopWorker(w);
    const victim = await env.startWorker([], undefined, slurm.env);
    const h = await startPlan(env, p);
    await waitFor('iteration 14', () => lastIteration(runDir) >= 14, 180_000);
    const oldRanks = rankMains(runDir);
    expect(oldRanks).toHaveLength(2);
    expect(srunPid(runDir)).toBeGreaterThan(0);
    process.kill(victim.pid!, 'SIGKILL');
    await env.startWorker([], undefined, slurm.env);
    const st = await stepOf(h);
    expect(st.failures).toEqual({ preempted: 1 });
    const takeover = expectTakeoverSaved(runDir, oldRanks);
    row('worker SIGKILL (next attempt stops the old ranks)', takeover.lost, takeover.stopSec, 0);
    await nothingLeft(runDir);
  }, 400_000);

  it("torchrun SIGKILLed alone on one node: its orphaned rank is found by that node's launcher, stopped, and saves", async () => {
    const { runDir, plan: p } = await plan('torchrun-kill', { iters: 50 });
    const h = await startPlan(env, p);
    await waitFor('iteration 14', () => lastIteration(runDir) >= 14, 180_000);
    const ranks = rankMains(runDir);
    const torchrun = processesMentioning(runDir).find((pid) => {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      return /torchrun$/.test(argv[1] ?? '') && argv[0] !== 'srun' && !argv.some((x) => x.endsWith('infir2_launch.py'));
    })!;
    expect(torchrun).toBeGreaterThan(0);
    const t0 = Date.now();
    process.kill(torchrun, 'SIGKILL');
    await waitFor('the old ranks to be gone', () => ranks.every((pid) => !existsSync(`/proc/${pid}`)), 60_000);
    const took = (Date.now() - t0) / 1000;
    const st = await stepOf(h);
    expect(Object.keys(st.failures)).toHaveLength(1);
    const [first, second] = attemptsOf(runDir);
    expect(logText(runDir)).toMatch(/\[infir2-launch\] the command ended, leaving processes: SIGTERM to process \d+/);
    expect(first!.exitLine).toBe(true);
    expect(second!.note).toMatch(new RegExp(`resuming from iteration ${first!.iterations.at(-1)}\\b`));
    row('torchrun SIGKILL', first!.iterations.at(-1)! - Number(/resuming from iteration (\d+)/.exec(second!.note)![1]), took, 0);
    await nothingLeft(runDir);
  }, 400_000);
});
