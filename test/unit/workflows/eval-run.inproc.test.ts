/**
 * evalRun, the evaluator of a step's checkpoints while it trains, in-process (the CLI dev server, a worker in this
 * process, mocked runStep): batches of checkpoints evaluated oldest first, each once, only those `evalEvery` asks
 * for, the last one whatever its iteration; and it continues as new between evaluations past its event mark,
 * carrying its queue and scores.
 */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunStepInput } from '../../../src/activities/run-step.js';
import type { PlanStep } from '../../../src/plan/types.js';
import { ORCHESTRATOR_TASK_QUEUE } from '../../../src/temporal/constants.js';
import { evalCheckpointsSignal, evalCloseSignal, evalStateQuery } from '../../../src/workflows/definitions.js';
import type { evalRun } from '../../../src/workflows/eval-run.js';
import { devServerEnv, result, step, withWorkers } from './inproc.js';

const POOL = 'inproc-evals';
let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await devServerEnv();
}, 60_000);
afterAll(async () => env?.teardown());

const templates: PlanStep[] = [
  { ...step('s.eval{iteration}.export'), kind: 'convert' },
  { ...step('s.eval{iteration}.arith', ['s.eval{iteration}.export']), kind: 'eval' },
];

describe('evalRun (in-process)', () => {
  it('evaluates each asked-for checkpoint once, oldest first, and the last; continues as new between evaluations', async () => {
    const evaluated: number[] = [];
    const runStep = async (input: RunStepInput) => {
      const it = Number(/\.eval(\d+)\./.exec(input.step.id)![1]);
      if (input.step.kind === 'eval') evaluated.push(it);
      return { ...result(input.step.id, input.attempt), metrics: input.step.kind === 'eval' ? { accuracy: it / 100 } : {} };
    };
    const workflowId = `inproc-evals-${Date.now()}`;
    const res = await withWorkers(env, [ORCHESTRATOR_TASK_QUEUE, POOL], { runStep }, async () => {
      const h = await env.client.workflow.start<typeof evalRun>('evalRun', {
        taskQueue: ORCHESTRATOR_TASK_QUEUE,
        workflowId,
        args: [{ recipe: 'r', runId: 'r1', runDir: '/runs/r', stepId: 's', stageWorkflowId: 'r-r1/s', spec: { every: 2, root: '/runs/r/s', taskQueue: POOL, steps: templates }, heartbeatTimeoutSec: 60, retryDelaySec: 0, maxEvents: 20 }],
      });
      await h.signal(evalCheckpointsSignal, { iterations: [2, 4] });
      await h.signal(evalCheckpointsSignal, { iterations: [4, 6, 7] });
      // A query answers while it works: what is done, what waits.
      const mid = await h.query(evalStateQuery);
      expect(mid.done.length + mid.queue.length + (mid.running === null ? 0 : 1)).toBeGreaterThanOrEqual(1);
      await h.signal(evalCloseSignal, { last: 9 });
      return h.result();
    });
    expect(res.done.map((e) => [e.iteration, e.scores.arith?.accuracy])).toEqual([
      [2, 0.02],
      [4, 0.04],
      [6, 0.06],
      [9, 0.09],
    ]);
    expect(evaluated).toEqual([2, 4, 6, 9]);
    // Each evaluation adds ~10 events: past 20 it continued as new, the queue and scores carried over.
    expect(res.executions).toBeGreaterThan(1);
    const executions: string[] = [];
    for await (const wf of env.client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) executions.push(wf.status.name);
    expect(executions.filter((s) => s === 'CONTINUED_AS_NEW').length).toBe(res.executions - 1);
  }, 120_000);
});
