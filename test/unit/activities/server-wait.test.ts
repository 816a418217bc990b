import type { Context } from '@temporalio/activity';
import { describe, expect, it } from 'vitest';
import type { Progress } from '../../../src/plan/contracts.js';
import { untilServerAnswers } from '../../../src/activities/server-wait.js';

function attempt() {
  const abort = new AbortController();
  const beats: unknown[] = [];
  const notes: string[] = [];
  const ctx = { cancellationSignal: abort.signal, heartbeat: (d: unknown) => beats.push(d) } as unknown as Context;
  return { a: { ctx, progress: { iteration: 30 } as Progress, note: (m: string) => notes.push(m) }, abort, beats, notes };
}

/** A probe that fails `n` times, then answers. */
const answersAfter = (n: number) => {
  let calls = 0;
  return Object.assign(async () => ++calls > n, { calls: () => calls });
};

describe('untilServerAnswers', () => {
  it('hands over at once, silently, when the server answers', async () => {
    const { a, beats, notes } = attempt();
    const probe = answersAfter(0);
    await untilServerAnswers(a, probe, 60_000, 5);
    expect(probe.calls()).toBe(1);
    expect([beats, notes]).toEqual([[], []]);
  });

  it('does not wait at all without a probe (a worker with no server connection, the unit tests)', async () => {
    const { a, notes } = attempt();
    await untilServerAnswers(a, undefined, 60_000, 5);
    expect(notes).toEqual([]);
  });

  it('holds the outcome, heartbeating, until the server answers again, and says so in the step log', async () => {
    const { a, beats, notes } = attempt();
    const probe = answersAfter(4);
    await untilServerAnswers(a, probe, 60_000, 5);
    expect(probe.calls()).toBe(5);
    expect(beats).toHaveLength(4);
    expect(beats[0]).toMatchObject({ iteration: 30 });
    expect(notes).toEqual([
      'the step has ended, but the Temporal server does not answer: its outcome is held until it does',
      expect.stringMatching(/^the Temporal server answers again after \d+ s: outcome sent$/),
    ]);
  });

  it('gives up holding past its limit, and at once when the worker cancels the activity (shutdown)', async () => {
    const late = attempt();
    await untilServerAnswers(late.a, answersAfter(Infinity), 30, 5);
    expect(late.notes.at(-1)).toMatch(/has not answered for \d+ s: outcome handed over anyway/);

    const stopped = attempt();
    const t0 = Date.now();
    const held = untilServerAnswers(stopped.a, answersAfter(Infinity), 60_000, 60_000);
    setTimeout(() => stopped.abort.abort(), 20);
    await held;
    expect(Date.now() - t0).toBeLessThan(5_000);
  });
});
