/**
 * What the supervisor tells workflows of the checkpoints saved: nothing for a step without evaluation while
 * training; for one with it, the checkpoints `evalEvery` asks for, in batches, each once, one signal in flight,
 * at most one per interval, the rest at the attempt's end; for an attempt of a stage recorded before bounded
 * history, its progress signal, each checkpoint it evaluates in order and the rest coalesced.
 */
import type { Context } from '@temporalio/activity';
import { WorkflowNotFoundError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { checkpointSignals } from '../../../src/activities/checkpoint-signals.js';
import { EVAL_CHECKPOINTS_SIGNAL, PROGRESS_SIGNAL, type Progress } from '../../../src/plan/contracts.js';
import type { PlanStep } from '../../../src/plan/types.js';

interface Sent {
  workflowId: string;
  signal: string;
  arg: unknown;
}

/** An activity context whose client records signals; each takes `ms` and then does what `outcome` says. */
function fakeCtx(ms: number, outcome: (n: number) => 'ok' | 'fail' | 'gone' = () => 'ok') {
  const sent: Sent[] = [];
  let inFlight = 0;
  let most = 0;
  const ctx = {
    info: { workflowExecution: { workflowId: 'run/stage' } },
    client: {
      workflow: {
        getHandle: (workflowId: string) => ({
          signal: async (signal: string, arg: unknown) => {
            most = Math.max(most, ++inFlight);
            const n = sent.push({ workflowId, signal, arg });
            await new Promise((r) => setTimeout(r, ms));
            inFlight -= 1;
            const o = outcome(n);
            if (o === 'fail') throw new Error('unavailable');
            if (o === 'gone') throw new WorkflowNotFoundError('gone', workflowId, undefined);
          },
        }),
      },
    },
  } as unknown as Context;
  return { ctx, sent, most: () => most };
}

const progress = (lastCheckpoint: number): Progress => ({ iteration: lastCheckpoint, totalIterations: 100, loss: 1, throughput: null, throughputUnit: null, lastCheckpoint, resumedFrom: null, attempt: 1, pid: 1, updatedAt: '' });
const step = (every?: number) => ({ ...(every ? { checkpointEval: { every } } : {}) }) as unknown as PlanStep;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const iterations = (sent: Sent[]) => sent.flatMap((s) => (s.arg as { iterations: number[] }).iterations);

describe('checkpoint signals', () => {
  it('a step without evaluation while training sends nothing, however many checkpoints it saves', async () => {
    const { ctx, sent } = fakeCtx(1);
    const s = checkpointSignals({ step: step(), evalSignal: null }, ctx);
    for (let i = 1; i <= 1000; i++) s.saved(progress(i));
    await s.flush();
    expect(sent).toEqual([]);
  });

  it('sends the evaluator the checkpoints evalEvery asks for, in batches, one in flight, the rest at the end', async () => {
    const { ctx, sent, most } = fakeCtx(30);
    const s = checkpointSignals({ step: step(), evalSignal: { workflowId: 'run/stage/evals', every: 2 } }, ctx, { minIntervalMs: 100 });
    for (let i = 1; i <= 40; i++) {
      s.saved(progress(i));
      await sleep(5);
    }
    await s.flush();
    expect(iterations(sent)).toEqual(Array.from({ length: 20 }, (_, i) => 2 * (i + 1)));
    expect(sent.every((x) => x.workflowId === 'run/stage/evals' && x.signal === EVAL_CHECKPOINTS_SIGNAL)).toBe(true);
    // 40 saves over ~200 ms at most one signal per 100 ms: the first at once, a batch or two, the rest at the end.
    expect(sent.length).toBeLessThanOrEqual(5);
    expect((sent[0]!.arg as { iterations: number[] }).iterations).toEqual([2]);
    expect(most()).toBe(1);
  });

  it('a failed signal puts its checkpoints back for the next; a workflow that is gone is told nothing more', async () => {
    const flaky = fakeCtx(5, (n) => (n === 1 ? 'fail' : 'ok'));
    const s = checkpointSignals({ step: step(), evalSignal: { workflowId: 'e', every: 1 } }, flaky.ctx, { minIntervalMs: 20 });
    s.saved(progress(1));
    await sleep(10);
    s.saved(progress(2));
    await s.flush();
    expect(iterations(flaky.sent)).toEqual([1, 1, 2]);

    const gone = fakeCtx(5, () => 'gone');
    const g = checkpointSignals({ step: step(), evalSignal: { workflowId: 'e', every: 1 } }, gone.ctx, { minIntervalMs: 1 });
    g.saved(progress(1));
    await sleep(20);
    g.saved(progress(2));
    await g.flush();
    expect(gone.sent).toHaveLength(1);
  });

  it("an attempt of a stage recorded before bounded history: its progress signal, each checkpoint it evaluates, the others coalesced", async () => {
    const { ctx, sent, most } = fakeCtx(20);
    const s = checkpointSignals({ step: step(5) }, ctx, { minIntervalMs: 1_000 });
    for (let i = 1; i <= 12; i++) {
      s.saved(progress(i));
      await sleep(2);
    }
    await s.flush();
    const checkpoints = sent.map((x) => (x.arg as Progress).lastCheckpoint);
    expect(sent.every((x) => x.workflowId === 'run/stage' && x.signal === PROGRESS_SIGNAL)).toBe(true);
    // 5 and 10 (evaluated) each in order, the newest (12) at the end; far fewer than 12 signals.
    expect(checkpoints.filter((c) => c! % 5 === 0)).toEqual([5, 10]);
    expect(checkpoints.at(-1)).toBe(12);
    expect(sent.length).toBeLessThanOrEqual(4);
    expect(most()).toBe(1);
  });
});
