/**
 * The slime path on a real Ray cluster: the RL step the 7B recipe compiles to (its `ray job submit` command,
 * resume command and `ray job stop`), run by a real worker against a single-node Ray, with a stand-in for
 * slime's train.py (test/fixtures/slime) as the job's entry point. What stand-in commands cannot show is shown
 * here: progress reaches the supervisor through `ray job submit`'s log tail, a failed job fails the client, a
 * resumed attempt gets a submission id Ray accepts, and the Ray job of a dead worker or a cancelled run is stopped.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadPlan } from '../../src/cli/recipe-input.js';
import type { Plan, PlanStep } from '../../src/plan/types.js';
import { journal, onlyStepOf, POOL, PYTHON, ROOT, setupEnv, startPlan, tmpRunDir, waitFor, type Env } from './harness.js';
import { RAY_BIN, startRayCluster, type RayCluster } from './ray-cluster.js';

const SLIME_STANDIN = join(ROOT, 'test', 'fixtures', 'slime');
const GPUS = ['--gpus', '0,1,2,3,4,5,6,7'];

let env: Env;
let ray: RayCluster;

beforeAll(async () => {
  env = await setupEnv('ray');
  ray = await startRayCluster();
  await env.startWorker(GPUS);
}, 180_000);

afterAll(async () => {
  await ray?.stop();
  await env?.teardown();
});

/** rl.stage1 of the 7B recipe, pointed at the local Ray and the stand-in, alone in a plan on the test pool. */
async function rlPlan(name: string, o: { rollouts: number; saveInterval: number; faults?: string[]; sleep?: number }): Promise<{ plan: Plan; step: PlanStep; runDir: string }> {
  const runDir = tmpRunDir(env, name);
  const stepDir = join(runDir, name, 'rl.stage1');
  mkdirSync(stepDir, { recursive: true });
  const data = join(runDir, 'dapo.jsonl');
  writeFileSync(data, '{"prompt": "1+1", "label": "2"}\n');
  const runtimeEnv = {
    FAKE_TRAINER_DIR: join(ROOT, 'test', 'fixtures'),
    FAKE_SLIME_JOURNAL: join(stepDir, 'journal.jsonl'),
    FAKE_SLIME_STATE: join(stepDir, 'faults.json'),
    FAKE_SLIME_FAULTS: (o.faults ?? []).join(','),
    FAKE_SLIME_SLEEP: String(o.sleep ?? 0.3),
  };
  const plan = await loadPlan(join(ROOT, 'recipes', 'qwen2.5-7b-fp8.yaml'), {
    runId: name,
    onWarning: () => undefined,
    sets: [
      `runDir=${runDir}`,
      `software.slime=${SLIME_STANDIN}`,
      `software.python=${PYTHON}`,
      `software.ray=${RAY_BIN}`,
      `pools.ray.rayAddress=${ray.address}`,
      `rl.data=${data}`,
      `rl.evalData=${data}`,
      `rl.saveInterval=${o.saveInterval}`,
      `rl.curriculum.0.rollouts=${o.rollouts}`,
      `rl.env=${JSON.stringify(runtimeEnv)}`,
      // The stand-in train.py imports none of what slime's does, on a machine without GPUs, and saves
      // checkpoints of a few bytes: the preflight is told so, with the reasons.
      `software.skipChecks=${JSON.stringify([
        ...['megatron', 'slime', 'sglang', 'ray', 'transformerEngine', 'flashAttn'].map((check) => ({ check, why: 'the stand-in train.py (test/fixtures/slime) imports none of it' })),
        { check: 'gpu', why: "this machine has no GPU; the worker's --gpus are stand-ins" },
        { check: 'disk', why: 'the stand-in saves checkpoints of a few bytes, not the 7B estimate' },
      ])}`,
    ],
  });
  const step = plan.steps.find((s) => s.id === 'rl.stage1')!;
  // Its inputs are the outputs of steps this test does not run.
  for (const dir of [step.inputs.hfCheckpoint!, step.inputs.refLoad!]) mkdirSync(dir, { recursive: true });
  const alone: PlanStep = { ...step, pool: POOL, dependsOn: [] };
  return { plan: { ...plan, steps: [alone], pools: { [POOL]: { ...plan.pools.ray!, taskQueue: `infir2-${POOL}` } } }, step: alone, runDir: join(runDir, name) };
}

/** Ray's record of a job, from the dashboard's REST API. */
async function rayJob(submissionId: string): Promise<{ status: string; entrypoint: string } | null> {
  const r = await fetch(`${ray.address}/api/jobs/${submissionId}`);
  return r.ok ? ((await r.json()) as { status: string; entrypoint: string }) : null;
}

async function rayJobsOf(runId: string): Promise<{ submission_id: string; status: string }[]> {
  const all = (await (await fetch(`${ray.address}/api/jobs/`)).json()) as { submission_id: string; status: string }[];
  return all.filter((j) => j.submission_id?.startsWith(`infir2-${runId}-`)).sort((a, b) => a.submission_id.localeCompare(b.submission_id));
}

describe('the slime step on a real Ray cluster', () => {
  it('runs, fails a crashed job, and resumes it as a new Ray job with --start-rollout-id', async () => {
    const { plan, runDir } = await rlPlan('ray-crash', { rollouts: 6, saveInterval: 2, faults: ['crash@3'] });
    const h = await startPlan(env, plan);
    const st = await onlyStepOf(h);
    expect(st.status).toBe('completed');
    expect(st.attempts).toBe(2);
    expect(st.failures.crash).toBe(1);
    // Checkpoint 1 (rollouts 0 and 1) was complete when rollout 3 crashed: the resume starts at rollout 2.
    expect(st.result?.resumedFrom).toBe(1);
    const rollouts = journal(runDir, 'rl.stage1').map((e) => e.iteration);
    expect(rollouts).toEqual([0, 1, 2, 2, 3, 4, 5]);
    expect(st.result?.iteration).toBe(5);
    // Progress came through `ray job submit`'s tail of the job's log: loss and throughput were parsed.
    expect(st.progress?.loss).toBeGreaterThan(0);
    // Two Ray jobs, one per attempt, each with its own submission id.
    const jobs = await rayJobsOf('ray-crash');
    expect(jobs.map((j) => j.status)).toEqual(['FAILED', 'SUCCEEDED']);
    expect(jobs[0]!.submission_id).toMatch(/^infir2-ray-crash-rl-stage1-a1-\w+$/);
    expect(jobs[1]!.submission_id).toMatch(/^infir2-ray-crash-rl-stage1-a2-\w+$/);
    expect((await rayJob(jobs[1]!.submission_id))?.entrypoint).toContain('--start-rollout-id 2');
  }, 240_000);

  it('stops the Ray job of a worker that died, before the next attempt trains', async () => {
    // 50 s of rollouts: the dead worker's `ray job submit` client lives on behind its launcher, and so does the
    // job; it must still be running when the heartbeat timeout hands the step over, however loaded the machine.
    const { plan, runDir } = await rlPlan('ray-orphan', { rollouts: 200, saveInterval: 5, sleep: 0.25 });
    const victim = env.workers.at(-1)!;
    const h = await startPlan(env, plan);
    await waitFor('rollout 7', () => journal(runDir, 'rl.stage1').some((e) => e.iteration >= 7), 120_000);
    const [first] = await rayJobsOf('ray-orphan');
    expect(first?.status).toBe('RUNNING');
    const firstPid = journal(runDir, 'rl.stage1')[0]!.pid;
    // The worker dies; its `ray job submit` client and the Ray job it submitted live on.
    process.kill(victim.pid!, 'SIGKILL');
    await env.startWorker(GPUS);
    const st = await onlyStepOf(h);
    expect(st.status).toBe('completed');
    expect(st.attempts).toBe(2);
    expect((await rayJob(first!.submission_id))?.status).toBe('STOPPED');
    // The orphaned job wrote nothing once the new one had started: never two trainers on one checkpoint dir.
    const entries = journal(runDir, 'rl.stage1');
    const secondStart = entries.findIndex((e) => e.pid !== firstPid);
    expect(secondStart).toBeGreaterThan(0);
    expect(entries.slice(secondStart).every((e) => e.pid !== firstPid)).toBe(true);
    expect(entries.at(-1)?.iteration).toBe(199);
    expect(execFileSync('ps', ['-eo', 'args']).toString()).not.toContain(first!.submission_id);
  }, 300_000);

  it('cancels a run: its Ray job is stopped too', async () => {
    const { plan, runDir } = await rlPlan('ray-cancel', { rollouts: 200, saveInterval: 5, sleep: 0.25 });
    const h = await startPlan(env, plan);
    await waitFor('rollout 3', () => journal(runDir, 'rl.stage1').some((e) => e.iteration >= 3), 120_000);
    const [job] = await rayJobsOf('ray-cancel');
    await h.cancel();
    await waitFor('the run to be cancelled', async () => (await h.describe()).status.name === 'CANCELLED', 60_000);
    expect((await rayJob(job!.submission_id))?.status).toBe('STOPPED');
    const written = journal(runDir, 'rl.stage1').length;
    await new Promise((r) => setTimeout(r, 1_000));
    expect(journal(runDir, 'rl.stage1').length).toBe(written);
  }, 180_000);
});
