/**
 * recipeRun's walk of the Plan's DAG, in-process (the CLI dev server with infir2's search attributes, a worker in
 * this process, mocked runStep): independent steps run in parallel, a step starts only after every step it
 * depends on, kept steps (a resumed run's verified results) are not run again, and a failure stops the walk.
 */
import { WorkflowFailedError } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunStepInput } from '../../../src/activities/run-step.js';
import type { RunStatus } from '../../../src/plan/contracts.js';
import type { Plan } from '../../../src/plan/types.js';
import { ORCHESTRATOR_TASK_QUEUE } from '../../../src/temporal/constants.js';
import type { recipeRun } from '../../../src/workflows/recipe-run.js';
import { devServerEnv, result, scriptedRunStep, step, withWorkers } from './inproc.js';

const POOL = 'inproc-pool';
let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await devServerEnv();
}, 60_000);
afterAll(async () => env?.teardown());

/** a → (b, c) → d: b and c are independent. */
function plan(runId: string): Plan {
  return {
    version: 1,
    recipe: 'inproc',
    runId,
    runDir: `/runs/${runId}`,
    precision: 'fp8',
    model: 'tiny',
    pools: { local: { taskQueue: POOL, nodes: 1, gpusPerNode: 0, launcher: 'local' } },
    steps: [step('a'), step('b', ['a']), step('c', ['a']), step('d', ['b', 'c'])],
  };
}

function run(runId: string, activities: object, keep = {}, more: { maxEvents?: number; workflowId?: string } = {}) {
  return withWorkers(env, [ORCHESTRATOR_TASK_QUEUE, POOL], activities, () =>
    env.client.workflow.execute<typeof recipeRun>('recipeRun', {
      taskQueue: ORCHESTRATOR_TASK_QUEUE,
      workflowId: more.workflowId ?? `inproc-${runId}-${Date.now()}`,
      args: [plan(runId), { retryDelaySec: 0, keep, ...(more.maxEvents ? { maxEvents: more.maxEvents } : {}) }],
    }),
  );
}

describe('recipeRun (in-process)', () => {
  it('walks the DAG: b and c in parallel after a, d after both', async () => {
    const events: string[] = [];
    let inFlight = 0;
    let maxInFlight = 0;
    const runStep = async (input: RunStepInput) => {
      events.push(`start ${input.step.id}`);
      maxInFlight = Math.max(maxInFlight, ++inFlight);
      await new Promise((r) => setTimeout(r, 300));
      inFlight--;
      events.push(`end ${input.step.id}`);
      return result(input.step.id, input.attempt);
    };
    const res = await run('dag', { runStep });
    expect(res.status.status).toBe('completed');
    expect(Object.keys(res.results).sort()).toEqual(['a', 'b', 'c', 'd']);
    expect(events[0]).toBe('start a');
    expect(events.indexOf('start b')).toBeGreaterThan(events.indexOf('end a'));
    expect(events.indexOf('start d')).toBeGreaterThan(Math.max(events.indexOf('end b'), events.indexOf('end c')));
    expect(maxInFlight).toBe(2); // b and c overlapped
  });

  it('keeps the steps a resume hands in and runs only the rest', async () => {
    const { runStep, calls } = scriptedRunStep({});
    const res = await run('keep', { runStep }, { a: result('a', 1), b: result('b', 1) });
    expect(calls.map((c) => c.stepId).sort()).toEqual(['c', 'd']);
    expect(res.status.steps.map((s) => [s.id, s.status])).toEqual([['a', 'kept'], ['b', 'kept'], ['c', 'completed'], ['d', 'completed']]);
  });

  it('a failed step fails the run; what depends on it is skipped, what runs beside it finishes', async () => {
    const { runStep, calls } = scriptedRunStep({ b: ['config'] });
    const err = await run('fail', { runStep }).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const status = ((err as WorkflowFailedError).cause as { details?: unknown[] }).details?.[0] as RunStatus;
    expect(status.steps.map((s) => [s.id, s.status])).toEqual([['a', 'completed'], ['b', 'failed'], ['c', 'completed'], ['d', 'skipped']]);
    expect(calls.map((c) => c.stepId)).not.toContain('d');
  });

  it('continues as new between steps past its event mark, carrying every step; a running step is never cut off', async () => {
    const { runStep, calls } = scriptedRunStep({ b: ['crash', 'ok'] });
    const workflowId = `inproc-can-${Date.now()}`;
    const res = await run('can', { runStep }, {}, { maxEvents: 25, workflowId });
    expect(res.status.status).toBe('completed');
    expect(res.status.steps.map((s) => [s.id, s.status, s.attempts])).toEqual([['a', 'completed', 1], ['b', 'completed', 2], ['c', 'completed', 1], ['d', 'completed', 1]]);
    expect(Object.keys(res.results).sort()).toEqual(['a', 'b', 'c', 'd']);
    expect(calls.map((c) => `${c.stepId}${c.attempt}`).sort()).toEqual(['a1', 'b1', 'b2', 'c1', 'd1']);
    const executions: string[] = [];
    for await (const wf of env.client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) executions.push(wf.status.name);
    expect(executions.filter((s) => s === 'CONTINUED_AS_NEW').length).toBeGreaterThanOrEqual(1);
    expect(executions.filter((s) => s === 'COMPLETED')).toHaveLength(1);
  });
});
