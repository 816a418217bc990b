/**
 * stageRun's retry rule, in-process (time-skipping test server, mocked runStep): every failure class is retried
 * exactly its budget of failures in a row without progress and no more, config never; a failure after a new
 * checkpoint starts the count again; the attempt count and the failure tally are what status shows.
 */
import { WorkflowFailedError } from '@temporalio/client';
import type { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAILURE_CLASSES } from '../../../src/plan/types.js';
import { STEP_STATE_QUERY, type StepState } from '../../../src/plan/contracts.js';
import { retryPauseSec } from '../../../src/workflows/retry-rule.js';
import type { stageRun } from '../../../src/workflows/stage-run.js';
import { ApplicationFailure as Failure } from '@temporalio/common';
import type { RunStepInput } from '../../../src/activities/run-step.js';
import type { StepResult } from '../../../src/plan/contracts.js';
import type { PlanStep } from '../../../src/plan/types.js';
import { evalCheckpointsSignal } from '../../../src/workflows/definitions.js';
import { BUDGETS, result, scriptedRunStep, step, timeSkippingEnv, withWorkers } from './inproc.js';

const QUEUE = 'inproc-stage';
let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await timeSkippingEnv();
}, 60_000);
afterAll(async () => env?.teardown());

function start(id: string, script: Parameters<typeof scriptedRunStep>[0]) {
  const { runStep, calls } = scriptedRunStep(script);
  const run = withWorkers(env, [QUEUE], { runStep }, () =>
    env.client.workflow.execute<typeof stageRun>('stageRun', {
      taskQueue: QUEUE,
      workflowId: `stage-${id}-${Date.now()}`,
      // retryDelaySec 30: a real pause between attempts, which the time-skipping server skips
      args: [{ recipe: 'r', runId: 'r1', runDir: '/runs/r', step: step(id), taskQueue: QUEUE, heartbeatTimeoutSec: 60, retryDelaySec: 30 }],
    }),
  );
  return { run, calls };
}

describe('stageRun retry budgets (in-process)', () => {
  const retried = FAILURE_CLASSES.filter((c) => c !== 'config');

  it.each(retried)('%s: retried up to its budget, then the step completes', async (cls) => {
    const budget = BUDGETS[cls];
    const { run, calls } = start(`ok-${cls}`, { [`ok-${cls}`]: [...Array(budget).fill(cls), 'ok'] });
    const res = await run;
    expect(res.attempts).toBe(budget + 1);
    expect(calls.map((c) => c.attempt)).toEqual(Array.from({ length: budget + 1 }, (_, i) => i + 1));
  });

  it.each(retried)('%s: one failure past its budget fails the step, naming the budget', async (cls) => {
    const budget = BUDGETS[cls];
    const { run, calls } = start(`spent-${cls}`, { [`spent-${cls}`]: Array(budget + 1).fill(cls) });
    const err = await run.then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowFailedError);
    expect(String((err as WorkflowFailedError).cause?.message)).toContain(`(restart loop: `);
    expect(String((err as WorkflowFailedError).cause?.message)).toContain(` without progress (no complete checkpoint yet); retries.${cls} is ${budget})`);
    expect(calls).toHaveLength(budget + 1);
  });

  it('config: never retried, whatever the budget', async () => {
    const { run, calls } = start('config', { config: ['config', 'ok'] });
    const err = await run.then(() => null, (e: unknown) => e);
    expect(String((err as WorkflowFailedError).cause?.message)).toContain('a configuration error is never retried');
    expect(calls).toHaveLength(1);
  });

  it('budgets are per class: failures of different classes do not add up', async () => {
    // crash 2 + hang 1 + oom 1: each within its own budget, so the fifth attempt runs and completes
    const { run, calls } = start('mixed', { mixed: ['crash', 'hang', 'crash', 'oom', 'ok'] });
    expect((await run).attempts).toBe(5);
    expect(calls).toHaveLength(5);
  });

  it('a failure after a new checkpoint starts the count again: 8 crashes with progress and a budget of 2 complete', async () => {
    const crashes = [10, 20, 30, 40, 50, 60, 70, 80].map((c) => `crash@${c}` as const);
    const { run, calls } = start('progress', { progress: [...crashes, 'ok'] });
    expect((await run).attempts).toBe(9);
    expect(calls).toHaveLength(9);
  });

  it('crashes without progress past a checkpoint fail the step as a restart loop, naming the checkpoint', async () => {
    // 40 is progress (past the fresh start); the next three stay at 40: three in a row past a budget of 2
    const { run, calls } = start('loop', { loop: ['crash@40', 'oom@40', 'crash@40', 'crash@40', 'crash@40', 'ok'] });
    const err = await run.then(() => null, (e: unknown) => e);
    expect(calls).toHaveLength(5);
    const failed = (err as WorkflowFailedError).cause as ApplicationFailure;
    expect(failed.message).toBe('step loop failed after 5 attempt(s): loop: crash: scripted (restart loop: 3 consecutive crash failures without progress past checkpoint 40; retries.crash is 2)');
    const st = failed.details?.[0] as StepState;
    expect(st).toMatchObject({ status: 'failed', failures: { crash: 4, oom: 1 }, failuresWithoutProgress: { crash: 3, oom: 1 }, checkpointAtFailure: 40 });
  });

  it('storage: the step waits between attempts, says why, and each pause doubles', async () => {
    const { runStep } = scriptedRunStep({ disk: ['storage', 'storage', 'ok'] });
    const workflowId = `stage-disk-${Date.now()}`;
    const pauses: number[] = [];
    const res = await withWorkers(env, [QUEUE], { runStep }, async () => {
      const h = await env.client.workflow.start<typeof stageRun>('stageRun', {
        taskQueue: QUEUE,
        workflowId,
        args: [{ recipe: 'r', runId: 'r1', runDir: '/runs/r', step: step('disk'), taskQueue: QUEUE, heartbeatTimeoutSec: 60, retryDelaySec: 30 }],
      });
      // Time stands still until the test awaits a result or sleeps: each pause is read while it lasts.
      for (const attempt of [1, 2]) {
        let st = await h.query<StepState>(STEP_STATE_QUERY);
        while (!(st.attempts === attempt && st.waiting)) {
          await new Promise((r) => setTimeout(r, 50));
          st = await h.query<StepState>(STEP_STATE_QUERY);
        }
        expect(st.status).toBe('running');
        expect(st.waiting!.reason).toBe('scripted');
        pauses.push((Date.parse(st.waiting!.until!) - Date.parse(st.waiting!.since)) / 1000);
        await env.sleep(`${pauses.at(-1)! + 1}s`);
      }
      return h.result();
    });
    expect(pauses).toEqual([30, 60]);
    expect(res.attempts).toBe(3);
  });

  it.each([
    ['crash', 1, 5],
    ['storage', 0, 5],
    ['storage', 1, 5],
    ['storage', 2, 10],
    ['storage', 8, 600],
    ['storage', 30, 600],
  ] as const)('pause after the %s failure number %i in a row: %i s (retry delay 5 s)', (cls, used, sec) => {
    expect(retryPauseSec(cls, used, 5)).toBe(sec);
  });

  it('continues as new between attempts with its evaluator alive: the queued evaluations finish first, scores and attempts carry over', async () => {
    const id = 'can';
    const train: PlanStep = { ...step(id), checkpointEval: { every: 10, root: `/runs/r/${id}`, taskQueue: QUEUE, steps: [{ ...step(`${id}.eval{iteration}.arith`), kind: 'eval' }] } };
    const evaluated: number[] = [];
    // Four attempts, each past a new checkpoint (10, 20, 30 then the end): the supervisor would tell the evaluator of each.
    const runStep = async (input: RunStepInput): Promise<StepResult> => {
      if (input.step.kind === 'eval') {
        evaluated.push(Number(/eval(\d+)/.exec(input.step.id)![1]));
        return { ...result(input.step.id, input.attempt), metrics: { accuracy: 0.5 } };
      }
      expect(input.evalSignal).toEqual({ workflowId: expect.stringMatching(/\/evals$/), every: 10 });
      const checkpoint = input.attempt * 10;
      await env.client.workflow.getHandle(input.evalSignal!.workflowId).signal(evalCheckpointsSignal, { iterations: [checkpoint] });
      if (input.attempt < 4) throw Failure.create({ type: 'crash', message: `${id}: crash: scripted`, details: [{ lastCheckpoint: checkpoint, resumedFrom: null, attempt: input.attempt }] });
      return { ...result(id, input.attempt), iteration: 45, time: { attempt: input.attempt, scheduledAt: 0, endedAt: 1000, attributedTo: 0, open: 'training', secs: { productive: 1 }, lastIteration: 45, failure: null } };
    };
    const workflowId = `stage-can-${Date.now()}`;
    let firstRunId = '';
    const res = await withWorkers(env, [QUEUE], { runStep }, async () => {
      const h = await env.client.workflow.start<typeof stageRun>('stageRun', {
        taskQueue: QUEUE,
        workflowId,
        args: [{ recipe: 'r', runId: 'r1', runDir: '/runs/r', step: train, taskQueue: QUEUE, heartbeatTimeoutSec: 60, retryDelaySec: 1, maxEvents: 30 }],
      });
      firstRunId = h.firstExecutionRunId;
      return h.result();
    });
    expect(res.attempts).toBe(4);
    // Every checkpoint told and the last one (45) evaluated once, across the stage's executions and evaluators.
    expect(res.evals?.map((e) => [e.iteration, e.scores.arith?.accuracy])).toEqual([[10, 0.5], [20, 0.5], [30, 0.5], [40, 0.5], [45, 0.5]]);
    expect([...evaluated].sort((a, b) => a - b)).toEqual([10, 20, 30, 40, 45]);
    // The attempt count carried over: the fourth attempt ran as attempt 4 in a later execution.
    expect(res.attempts).toBe(4);
    // It continued as new (the test server lists nothing: the first execution's handle says it).
    const first = await env.client.workflow.getHandle(workflowId, firstRunId).describe();
    expect(first.status.name).toBe('CONTINUED_AS_NEW');
  });
});
