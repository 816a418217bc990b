import { describe, expect, it } from 'vitest';
import { runEnded, stepFailed, type RunRef } from '../../../src/workflows/notify-events.js';

const run: RunRef = { recipe: 'tiny', runId: 'r1', workflowId: 'tiny-r1', execution: 'e-1' };
const failure = { step: 'sft.stage2', attempt: 2, cls: 'crash' as const, message: 'exit code 1', retried: true, streak: 0, budget: 3 };

describe('notify events', () => {
  it('a retried crash after progress is one event, with a stable id', () => {
    const [e, ...rest] = stepFailed(run, failure);
    expect(rest).toEqual([]);
    expect(e).toMatchObject({ id: 'tiny-r1/e-1/sft.stage2/a2/step.retried', event: 'step.retried' });
    expect(e!.fields).toMatchObject({ recipe: 'tiny', runId: 'r1', step: 'sft.stage2', attempt: 2, class: 'crash', message: 'exit code 1' });
    expect(e!.text).toBe('↻ infir2: tiny run r1, sft.stage2 attempt 2 failed (crash); retrying: exit code 1');
    expect(stepFailed(run, failure)).toEqual(stepFailed(run, failure));
  });

  it('a hang is told, then its retry; the retry that uses the last of the budget is told as budget nearly spent', () => {
    const events = stepFailed(run, { ...failure, cls: 'hang', streak: 2, budget: 2 });
    expect(events.map((e) => e.event)).toEqual(['step.hang', 'step.retried', 'step.budget']);
    expect(events[2]!.text).toMatch(/2 hang failures in a row without a new checkpoint, the last retry retries\.hang \(2\) allows; one more fails the step/);
    expect(stepFailed(run, { ...failure, streak: 1, budget: 2 }).map((e) => e.event)).toEqual(['step.retried']);
  });

  it('a failure that ends the step is no retry (a hang is still told); a budget of 0 is never "nearly spent"', () => {
    expect(stepFailed(run, { ...failure, retried: false, streak: 4 })).toEqual([]);
    expect(stepFailed(run, { ...failure, cls: 'hang', retried: false }).map((e) => e.event)).toEqual(['step.hang']);
    expect(stepFailed(run, { ...failure, streak: 0, budget: 0 }).map((e) => e.event)).toEqual(['step.retried']);
  });

  it('the run\'s end names its execution, so that a resumed run never repeats an id', () => {
    expect(runEnded(run, 'failed', 'step sft.stage2 failed')).toMatchObject({ id: 'tiny-r1/e-1/run.failed', event: 'run.failed', text: '❌ infir2: tiny run r1 failed: step sft.stage2 failed' });
    expect(runEnded({ ...run, execution: 'e-2' }, 'completed', '4 steps').id).toBe('tiny-r1/e-2/run.completed');
  });
});
