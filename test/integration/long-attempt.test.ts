/**
 * Bounded history and a worker that no workflow takes down, on a real dev server and a real worker (the compiled
 * CLI) with the fake trainer:
 *  - a step that saves thousands of checkpoints in one attempt completes, and neither its workflow's history nor
 *    the run's grows with them (issue 33: at a checkpoint every 2 ms the stage hit Temporal's 2,000 pending
 *    signals in 9 s and a 4 MB history at 15,000 events, and the run stalled);
 *  - a step whose workflow task keeps failing stands alone: `status` names it, and the worker runs another run
 *    meanwhile;
 *  - terminating a run terminates its steps, and their supervisors stop the trainers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runStatus, resolveRun } from '../../src/temporal/runs.js';
import { stepWorkflowId } from '../../src/temporal/constants.js';
import { fakePlan, fakeStep, journal, processesMentioning, setupEnv, startPlan, tmpRunDir, waitFor, type Env } from './harness.js';

let env: Env;
beforeAll(async () => {
  env = await setupEnv('long-attempt');
  await env.startWorker();
});
afterAll(async () => env?.teardown());

async function events(workflowId: string): Promise<{ count: number; signals: number }> {
  const h = await env.client.workflow.getHandle(workflowId).fetchHistory();
  const evs = h.events ?? [];
  return { count: evs.length, signals: evs.filter((e) => e.workflowExecutionSignaledEventAttributes).length };
}

describe('long attempts', () => {
  it('a step saving 3,000 checkpoints in one attempt completes with its history and the run\'s bounded', async () => {
    const runDir = tmpRunDir(env, 'many');
    const step = fakeStep({ id: 'cpt.stable', runDir, iters: 3000, sleep: 0.002, saveInterval: 1 });
    step.checkpoint = { ...step.checkpoint!, retention: { last: 2, every: null, protect: [], summary: 'keep last 2', maxKept: 3, checkpointBytes: { withOptimizer: 1, weightsOnly: 1 } } };
    const h = await startPlan(env, fakePlan(runDir, 'many', [step]), { heartbeatTimeoutSec: 60 });
    const res = (await h.result()) as { status: { steps: { status: string; result: { iteration: number } }[] } };
    expect(res.status.steps[0]).toMatchObject({ status: 'completed', result: { iteration: 3000 } });
    const stage = await events(stepWorkflowId('fake-many', 'cpt.stable'));
    const run = await events('fake-many');
    console.log(`[long attempt] 3000 checkpoints: stage ${stage.count} events (${stage.signals} signals), run ${run.count} events (${run.signals} signals)`);
    // A signal per checkpoint made these ~9 and ~5 events per checkpoint.
    expect(stage.count).toBeLessThan(60);
    expect(run.count).toBeLessThan(60);
    expect(stage.signals).toBe(0);
  }, 300_000);

  it('a run whose workflow task keeps failing is named in status, and the worker serves another run meanwhile', async () => {
    const runDir = tmpRunDir(env, 'poisoned');
    const bad = fakeStep({ id: 'cpt.stable', runDir, iters: 3 });
    // A plan the workflow cannot walk (a step without its dependencies): its task fails, again and again.
    delete (bad as Partial<typeof bad>).dependsOn;
    await startPlan(env, fakePlan(runDir, 'poisoned', [bad]));
    const okDir = tmpRunDir(env, 'beside');
    const ok = await startPlan(env, fakePlan(okDir, 'beside', [fakeStep({ id: 'cpt.stable', runDir: okDir, iters: 4 })]));
    await ok.result();
    const st = await waitFor('status to name the stuck run', async () => {
      const s = await runStatus(env.client, await resolveRun(env.client, 'fake-poisoned'));
      return s.message?.includes('cannot go on') ? s : null;
    }, 120_000);
    console.log(`[poisoned] ${st.message}`);
    expect(st.message).toMatch(/^fake-poisoned cannot go on: its workflow task failed \d+ times in a row \(.*\bevery\b.*\); the worker serves the other runs meanwhile$/);
    expect(st.steps.map((s) => [s.id, s.status])).toEqual([['cpt.stable', 'pending']]);
    expect(env.workers.every((w) => w.exitCode === null && w.signalCode === null)).toBe(true);
    await env.client.workflow.getHandle('fake-poisoned').terminate('test over');
  }, 300_000);

  it('terminating a run terminates its steps, whose supervisors stop the trainers', async () => {
    const runDir = tmpRunDir(env, 'terminated');
    const h = await startPlan(env, fakePlan(runDir, 'terminated', [fakeStep({ id: 'cpt.stable', runDir, iters: 2000, sleep: 0.05 })]));
    await waitFor('the trainer', () => journal(runDir, 'cpt.stable').length >= 3);
    await h.terminate('by the test');
    const stage = env.client.workflow.getHandle(stepWorkflowId('fake-terminated', 'cpt.stable'));
    await waitFor('the stage to close', async () => (await stage.describe()).status.name === 'TERMINATED', 30_000);
    await waitFor('the trainer to be stopped', () => processesMentioning(runDir).length === 0, 60_000);
  }, 120_000);
});
