/**
 * How long a graceful stop waits for a trainer to save and exit, from the stall policy's own limits (no constant
 * of its own): Megatron checks its SIGTERM flag at the end of an iteration, then saves, so the wait is the rest of
 * the current phase (an iteration, an evaluation) plus a save, each held to what the attempt has shown it needs.
 */
import type { StallSpec } from '../plan/types.js';
import { stallLimit, type Rhythm } from './stall-policy.js';

/**
 * The allowance of a stop now, ms; never less than the worker's kill grace. An attempt that has not trained since
 * it started (still loading, no iteration yet) has nothing new to save: the kill grace.
 */
export function stopAllowanceMs(spec: StallSpec, rhythm: Rhythm, killGraceMs: number): number {
  if (rhythm.lastIteration === null || rhythm.loading) return killGraceMs;
  const now = stallLimit(spec, rhythm).limitSec;
  const save = stallLimit(spec, { ...rhythm, phase: 'saving' }).limitSec;
  return Math.max(killGraceMs, (now + save) * 1000);
}

/**
 * What the launcher is started with, seconds: the allowance of the stops that do not come with one (SIGTERM to
 * the launcher, ranks its command left behind), before any rhythm is known: an iteration at the floor and a save.
 */
export function launchAllowanceSec(spec: StallSpec, killGraceMs: number): number {
  return Math.max(killGraceMs / 1000, Math.min(spec.capSec, spec.floorSec + spec.saveSec));
}
