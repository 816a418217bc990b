/** A step's stall limits as the plan states them (activities/stall-policy.ts applies them), from its stage's fields. */
import type { StallSpec, StepKind } from './types.js';

/** The adaptive stall fields of a stage (absent on stages that print no progress: conversions). */
export interface AdaptiveStall {
  startupTimeout?: number;
  stallFactor?: number;
  stallFloor?: number;
  saveTimeout?: number;
  evalTimeout?: number;
  saveInterval?: number;
  evalInterval?: number;
}

/**
 * How many times its longest save a step's later saves may take. Saves of one model to one storage vary with
 * the storage's load, not several-fold with the data the way RL rollouts do: 4× covers a busy file system, and
 * still catches a rank that hangs during a two-minute save in eight minutes instead of the 30-minute allowance.
 */
export const SAVE_FACTOR = 4;

/**
 * A step's stall limits (activities/stall-policy.ts). RL rollouts and evaluation samples vary several-fold in
 * length: their limit follows the longest gap seen; training iterations are steady: the 95th percentile.
 */
export function stallSpec(kind: StepKind, s: Required<Omit<AdaptiveStall, 'saveInterval' | 'evalInterval'>> & AdaptiveStall & { stallTimeout: number }): StallSpec {
  return {
    startupSec: s.startupTimeout,
    factor: s.stallFactor,
    floorSec: s.stallFloor,
    basis: kind === 'rl' || kind === 'eval' ? 'max' : 'p95',
    saveSec: s.saveTimeout,
    saveFactor: SAVE_FACTOR,
    evalSec: s.evalTimeout,
    saveEvery: s.saveInterval ?? null,
    evalEvery: kind === 'cpt' ? (s.evalInterval ?? null) : null,
    capSec: s.stallTimeout,
  };
}
