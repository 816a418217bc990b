/**
 * One trainer per GPU across the workers of a host (issue 20, item 2). Two workers are both given GPU 0, each
 * serving its own pool, so that nothing inside one worker can keep their trainers apart: only the host-wide
 * claim can. Two runs, one per pool: the trainers' environments are sampled from /proc while they run, and
 * never two of them have CUDA_VISIBLE_DEVICES=0 at once.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Plan } from '../../src/plan/types.js';
import { poolTaskQueue } from '../../src/temporal/constants.js';
import { fakePlan, fakeStep, journal, processesMentioning, setupEnv, startPlan, tmpRunDir, type Env } from './harness.js';

let env: Env;
beforeAll(async () => {
  env = await setupEnv('gpus');
});
afterAll(async () => {
  await env?.teardown();
});

/** The run's only step on `pool`, needing one GPU. */
function gpuPlan(runDir: string, runId: string, pool: string): Plan {
  const step = { ...fakeStep({ id: 'cpt', runDir, iters: 24, saveInterval: 8, sleep: 0.1 }), pool, gpus: 1 };
  const plan = fakePlan(runDir, runId, [step]);
  return { ...plan, pools: { [pool]: { taskQueue: poolTaskQueue(pool), nodes: 1, gpusPerNode: 1, launcher: 'local' } } };
}

/** CUDA_VISIBLE_DEVICES of each live trainer under `dir`. */
function trainerGpus(dir: string): string[] {
  // One entry per trainer (its launch token: the launcher and the trainer under it are one), not per process.
  const out = new Map<string, string>();
  for (const pid of processesMentioning(join(dir, 'runs'))) {
    try {
      const vars = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      const v = vars.find((e) => e.startsWith('CUDA_VISIBLE_DEVICES='));
      const launch = vars.find((e) => e.startsWith('INFIR2_LAUNCH=')) ?? `pid ${pid}`;
      if (v) out.set(launch, v.slice('CUDA_VISIBLE_DEVICES='.length));
    } catch {
      /* exited between listing and reading */
    }
  }
  return [...out.values()];
}

describe('two workers given the same GPU', () => {
  it('never run two trainers on GPU 0 at once, and the second says why it waits', async () => {
    await env.startWorker(['--gpus', '0'], ['gpu-a']);
    const second = await env.startWorker(['--gpus', '0', '--no-workflows'], ['gpu-b']);
    expect(env.outputOf(second)).toMatch(/warning: GPU 0 also given to worker pid \d+ \(infir2-gpu-a on 127\.0\.0\.1:\d+\): each GPU still runs one trainer at a time/);

    const dirA = tmpRunDir(env, 'a');
    const dirB = tmpRunDir(env, 'b');
    const runs = [await startPlan(env, gpuPlan(dirA, 'a', 'gpu-a')), await startPlan(env, gpuPlan(dirB, 'b', 'gpu-b'))];
    let most = 0;
    let samples = 0;
    let settled = false;
    const done = Promise.all(runs.map((r) => r.result())).finally(() => (settled = true));
    while (!settled) {
      const onZero = trainerGpus(env.dir).filter((g) => g === '0').length;
      most = Math.max(most, onZero);
      if (onZero) samples++;
      await new Promise((r) => setTimeout(r, 50));
    }
    await done;
    expect(samples).toBeGreaterThan(20); // the sampler saw the trainers run
    expect(most).toBe(1);
    // Both trained to the end, one after the other: each trainer ran once, without a retry.
    for (const d of [dirA, dirB]) expect(new Set(journal(d, 'cpt').map((e) => e.pid)).size).toBe(1);
    const logs = [dirA, dirB].map((d) => readFileSync(join(d, 'logs', readdirSync(join(d, 'logs'))[0]!), 'utf8')).join('\n');
    expect(logs).toMatch(/waiting for GPUs: needs 1; GPU 0 is held by fake-[ab]\/cpt attempt 1 \(worker pid \d+, trainer pid \d+\)/);
  }, 180_000);
});
