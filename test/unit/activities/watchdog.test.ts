/** The supervisor's stop rule as a table: a function of timestamps only. */
import { describe, expect, it } from 'vitest';
import { watchdogVerdict } from '../../../src/activities/watchdog.js';

describe('watchdogVerdict', () => {
  const base = { lastAdvance: 1_000, stallMs: 5_000, deadline: 60_000 };
  it.each([
    { now: 1_000, want: null, why: 'just advanced' },
    { now: 6_000, want: null, why: 'exactly the stall timeout is not yet a stall' },
    { now: 6_001, want: 'stall', why: 'no progress for longer than the stall timeout' },
    { now: 60_001, lastAdvance: 59_000, want: 'timeout', why: 'progressing, but past the attempt deadline' },
    { now: 70_000, lastAdvance: 1_000, want: 'stall', why: 'a stall is named before the deadline (it is the cause)' },
  ])('$why', ({ now, want, ...over }) => {
    expect(watchdogVerdict({ ...base, ...over, now })).toBe(want);
  });
});
