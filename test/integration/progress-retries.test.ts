/**
 * Progress-aware retries against a real Temporal dev server and a real worker: a step that keeps failing after
 * new checkpoints runs to completion past its budget, while a restart loop (failing again before the next save)
 * stops after its budget and says so.
 */
import { WorkflowFailedError } from '@temporalio/client';
import type { ApplicationFailure } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunStatus } from '../../src/plan/contracts.js';
import { fakePlan, fakeStep, journal, onlyStepOf, recomputed, ROOT, setupEnv, startPlan, tmpRunDir, type Env } from './harness.js';

let env: Env;

beforeAll(async () => {
  env = await setupEnv('progress-retries');
  await env.startWorker();
});

afterAll(async () => {
  await env?.teardown();
});

describe('retry budgets bound restart loops, not a run\'s length', () => {
  it('a step that crashes 10 times, each after a new checkpoint, completes with retries.crash 2', async () => {
    const runDir = tmpRunDir(env, 'progress');
    // A checkpoint every 2 iterations; crash@3, @5 … @21 each fire once, just after the save before them.
    const faults = Array.from({ length: 10 }, (_, i) => `crash@${2 * i + 3}`);
    const plan = fakePlan(runDir, 'progress', [fakeStep({ id: 'cpt.stable', runDir, iters: 22, saveInterval: 2, faults, retries: { crash: 2 } })]);
    const st = await onlyStepOf(await startPlan(env, plan));
    expect(st.status).toBe('completed');
    expect(st.attempts).toBe(11);
    expect(st.failures).toEqual({ crash: 10 });
    // Every failure made progress: nothing in a row; the last one was past checkpoint 20.
    expect(st.failuresWithoutProgress).toEqual({});
    expect(st.checkpointAtFailure).toBe(20);
    expect(st.result?.resumedFrom).toBe(20);
    expect(recomputed(runDir, 'cpt.stable')).toEqual([]);
    expect(journal(runDir, 'cpt.stable').at(-1)?.iteration).toBe(22);
  }, 180_000);

  it('a step that crashes again before its next checkpoint stops after its budget: a restart loop', async () => {
    const runDir = tmpRunDir(env, 'loop');
    // Checkpoint 4, then a crash at 7 on every attempt: the first failure made progress, the next three none.
    const plan = fakePlan(runDir, 'loop', [fakeStep({ id: 'cpt.stable', runDir, iters: 12, saveInterval: 4, faults: ['crashloop@7'], retries: { crash: 2 } })]);
    const err = await (await startPlan(env, plan)).result().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const cause = (err as WorkflowFailedError).cause as ApplicationFailure;
    const why = '(restart loop: 3 consecutive crash failures without progress past checkpoint 4; retries.crash is 2)';
    expect(cause.message).toMatch(/^step cpt\.stable failed after 4 attempt\(s\): cpt\.stable: crash: /);
    expect(cause.message.endsWith(why)).toBe(true);
    const status = cause.details?.[0] as RunStatus;
    expect(status.message).toContain(why);
    expect(status.steps[0]).toMatchObject({
      status: 'failed',
      attempts: 4,
      failures: { crash: 4 },
      failuresWithoutProgress: { crash: 3 },
      checkpointAtFailure: 4,
      lastFailure: { class: 'crash' },
    });
  }, 180_000);

  it('replays every history recorded here with the current workflow code (no nondeterminism)', async () => {
    const histories = env.client.workflow.list({ query: "WorkflowType = 'recipeRun' OR WorkflowType = 'stageRun'" }).intoHistories();
    let count = 0;
    for await (const r of Worker.runReplayHistories({ workflowsPath: join(ROOT, 'src', 'workflows', 'index.ts') }, histories)) {
      count += 1;
      expect(r.error, `${r.workflowId}: ${String(r.error)}`).toBeUndefined();
    }
    expect(count).toBe(4);
  }, 120_000);
});
