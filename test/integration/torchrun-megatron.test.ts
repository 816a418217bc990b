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
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakePlan, freePort, processesMentioning, setupEnv, tmpRunDir, waitFor, type Env } from './harness.js';
import { cancelCase, hangCase, preemptCase, torchrunKillCase, workerKillCase, type StopLaunch } from './megatron-stop-cases.js';
import { logText, NEW_TORCHRUN, newTorchInstalled, standinStep, torchrunPid } from './megatron-standin.js';

let env: Env;

beforeAll(async () => {
  if (!newTorchInstalled()) throw new Error(`${NEW_TORCHRUN} is missing: run scripts/setup.sh --test (make test does)`);
  env = await setupEnv('torchrun-megatron');
  await env.startWorker();
}, 120_000);

afterAll(async () => {
  await env?.teardown();
});

const launch: StopLaunch = {
  label: `torchrun ${NEW_TORCHRUN.includes('.torch-venv') ? '>= 2.4' : '1.13'}`,
  env: () => env,
  async plan(name, o = {}) {
    const runDir = tmpRunDir(env, name);
    const argv = [NEW_TORCHRUN, '--nnodes=1', '--nproc_per_node=2', `--rdzv_endpoint=127.0.0.1:${await freePort()}`, '--rdzv_backend=c10d'];
    return { runDir, plan: fakePlan(runDir, name, [standinStep({ runDir, iters: o.iters ?? 400, launch: argv, faults: o.faults })]) };
  },
  startWorker: () => env.startWorker(),
  nothingLeft: (runDir) => waitFor('no process of the run left', () => processesMentioning(runDir).length === 0, 60_000),
  reachMs: 120_000,
};

describe('the Megatron stand-in under torchrun >= 2.4', () => {
  it('a cancel: every rank saves at the iteration it stood at and exits with Megatron\'s line; nothing is left', async () => {
    const { runDir, attempt } = await cancelCase(launch);
    expect(attempt.iterations.at(-1)! % 10).not.toBe(0); // a save of its own, not the interval's
    // One launcher signalled both ranks' main processes, and nothing else.
    expect(logText(runDir)).toMatch(/\[infir2-launch\] stop requested: SIGTERM to processes \d+ \d+$/m);
  }, 300_000);

  it('a worker SIGTERM (preemption): the ranks save where they stand; the next worker resumes there, recomputing nothing', async () => {
    const { attempts } = await preemptCase(launch, 60);
    expect(attempts[1]!.iterations[0]).toBe(attempts[0]!.iterations.at(-1)! + 1);
  }, 400_000);

  it('a hang (a rank stops answering in the all-reduce): the whole tree is killed at once and resumed from the newest checkpoint', async () => {
    const { attempts } = await hangCase(launch, 180_000);
    expect(attempts[0]!.iterations.at(-1)).toBe(24);
  }, 400_000);

  it('a worker SIGKILLed: its ranks train on unsupervised until the next attempt stops every one of them (they save) before it launches', async () => {
    await workerKillCase(launch, 60);
  }, 400_000);

  it('torchrun SIGKILLed alone: its orphaned ranks (sessions of their own) are found, stopped, and save; the step resumes there', async () => {
    const { runDir, step, first } = await torchrunKillCase(launch, 60, torchrunPid);
    expect(first.exitLine).toBe(true);
    expect(step.failures).toEqual({ preempted: 1 });
    expect(logText(runDir)).toMatch(/\[infir2-launch\] the command ended, leaving processes: SIGTERM to processes \d+ \d+/);
  }, 400_000);
});
