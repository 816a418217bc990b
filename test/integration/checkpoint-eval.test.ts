/**
 * Evaluation while training on a real worker against a real dev server: a stand-in training step whose
 * checkpoints at multiples of 3 (and its last) are exported and scored by child workflows on the pool while it
 * trains on; the scores are a series in the run's status (read from the step's evaluator while it trains), and the
 * first one is in before training ends. The step after it starts when its training ends, not when the evaluation
 * of its last checkpoint does.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunStatus } from '../../src/plan/contracts.js';
import type { PlanStep } from '../../src/plan/types.js';
import { fakePlan, fakeStep, journal, POOL, processesMentioning, setupEnv, startPlan, tmpRunDir, waitFor, type Env } from './harness.js';
import { resolveRun, runStatus } from '../../src/temporal/runs.js';
import { poolTaskQueue } from '../../src/temporal/constants.js';

let env: Env;

beforeAll(async () => {
  env = await setupEnv('ckpt-eval');
  await env.startWorker();
});

afterAll(async () => {
  await env?.teardown();
});

describe('evaluation while training', () => {
  it('scores checkpoints 3, 6, 9 and the last (10) while the step trains, as a series in status', async () => {
    const runDir = tmpRunDir(env, 'evals');
    const train = fakeStep({ id: 'sft.stage1', runDir, iters: 10, saveInterval: 3, sleep: 0.4 });
    const exportStep: PlanStep = { ...fakeStep({ id: 'sft.stage1.eval{iteration}.export', runDir, files: true }), kind: 'convert' };
    const score = fakeStep({ id: 'sft.stage1.eval{iteration}.arith', runDir, files: true, dependsOn: [exportStep.id] });
    const step: PlanStep = { ...train, checkpointEval: { every: 3, root: train.checkpoint!.dir, taskQueue: poolTaskQueue(POOL), steps: [exportStep, score] } };
    const h = await startPlan(env, fakePlan(runDir, 'evals', [step]));
    // While the step trains, status reads the scores so far from its evaluator (the run hears of them at the end).
    const live = await waitFor('a score in status while the step trains', async () => {
      const st = await runStatus(env.client, await resolveRun(env.client, 'fake-evals'));
      return st.steps[0]!.status === 'running' && st.steps[0]!.evals?.length ? st.steps[0]! : null;
    }, 60_000);
    expect(live.evals![0]).toMatchObject({ iteration: 3, scores: { arith: { accuracy: 0.5 } } });
    const res = (await h.result()) as { status: RunStatus };
    const st = res.status.steps[0]!;
    expect(st.status).toBe('completed');
    expect(st.evals?.map((e) => [e.iteration, e.scores.arith?.accuracy, e.error])).toEqual([
      [3, 0.5, undefined],
      [6, 0.5, undefined],
      [9, 0.5, undefined],
      [10, 0.5, undefined],
    ]);
    // One trainer throughout: the evaluations never paused or restarted it.
    expect(new Set(journal(runDir, 'sft.stage1').map((e) => e.pid)).size).toBe(1);
    // Checkpoint 3's evaluation ended before the trainer's last iteration.
    const ended = /^\[infir2 (\S+)\] attempt 1 ended/m.exec(readFileSync(join(runDir, 'logs', 'sft.stage1.eval3.arith.log'), 'utf8'))![1]!;
    const lastIteration = journal(runDir, 'sft.stage1').at(-1)!.t * 1000;
    expect(Date.parse(ended)).toBeLessThan(lastIteration);
    expect(processesMentioning(runDir)).toEqual([]);
  }, 120_000);

  it('starts the next step when training ends, while the last checkpoint is still evaluated', async () => {
    const runDir = tmpRunDir(env, 'evals-next');
    const train = fakeStep({ id: 'sft.stage1', runDir, iters: 4, saveInterval: 2, sleep: 0.1 });
    const exportStep: PlanStep = { ...fakeStep({ id: 'sft.stage1.eval{iteration}.export', runDir, files: true }), kind: 'convert' };
    // A slow benchmark (4 s), as an evaluation at 7B is hours: the next stage must not wait for it.
    const score = fakeStep({ id: 'sft.stage1.eval{iteration}.arith', runDir, files: true, dependsOn: [exportStep.id], extraArgs: ['--startup', '4'] });
    const step: PlanStep = { ...train, checkpointEval: { every: 2, root: train.checkpoint!.dir, taskQueue: poolTaskQueue(POOL), steps: [exportStep, score] } };
    const next = fakeStep({ id: 'sft.stage2', runDir, iters: 2, sleep: 0.1, dependsOn: ['sft.stage1'] });
    const h = await startPlan(env, fakePlan(runDir, 'evals-next', [step, next]));
    const res = (await h.result()) as { status: RunStatus };
    const [s1, s2] = res.status.steps;
    expect([s1!.status, s2!.status]).toEqual(['completed', 'completed']);
    // Both checkpoints scored, the last one included: the step still completes only after its evaluations.
    expect(s1!.evals?.map((e) => [e.iteration, e.scores.arith?.accuracy])).toEqual([
      [2, 0.5],
      [4, 0.5],
    ]);
    expect(s1!.trainedAt).toEqual(expect.any(String));
    const lastEvalEnded = /^\[infir2 (\S+)\] attempt 1 ended/m.exec(readFileSync(join(runDir, 'logs', 'sft.stage1.eval4.arith.log'), 'utf8'))![1]!;
    const nextTrained = journal(runDir, 'sft.stage2')[0]!.t * 1000;
    expect(nextTrained).toBeLessThan(Date.parse(lastEvalEnded));
    console.log(`[evals] sft.stage2's first iteration ${((Date.parse(lastEvalEnded) - nextTrained) / 1000).toFixed(1)} s before the evaluation of sft.stage1's last checkpoint ended; ${((nextTrained - Date.parse(s1!.trainedAt!)) / 1000).toFixed(1)} s after its training did`);
    expect(processesMentioning(runDir)).toEqual([]);
  }, 120_000);
});
