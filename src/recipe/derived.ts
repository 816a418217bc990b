/**
 * Numbers that follow from a recipe and that both lint and the compiler need: the WSD phase boundaries and
 * the step counts of SFT and RL stages (how slime and the local trainer count them).
 */
import type { CptConfig, Pool, Recipe, SftStage } from './schema.js';

export interface CptBoundaries {
  /** Iteration at which warmup ends (0: no warmup phase). */
  warmupEnd: number;
  /** Iteration at which the stable phase ends and decay starts. */
  stableEnd: number;
  /** Last iteration (`--train-iters`). */
  end: number;
}

export function cptBoundaries(cpt: Pick<CptConfig, 'iterations' | 'warmupIters' | 'decayIters'>): CptBoundaries {
  return { warmupEnd: cpt.warmupIters, stableEnd: cpt.iterations - cpt.decayIters, end: cpt.iterations };
}

/**
 * Steps an SFT stage runs. slime: `num_rollout = epochs × ⌊samples / rolloutBatchSize⌋` (one optimizer step
 * per rollout when rollout batch = global batch); the local trainer: `epochs × ⌊samples / globalBatchSize⌋`.
 * undefined while the sample count is unknown.
 */
export function sftSteps(stage: Pick<SftStage, 'backend' | 'samples' | 'epochs' | 'rolloutBatchSize' | 'globalBatchSize'>): number | undefined {
  if (stage.samples === undefined) return undefined;
  const perEpoch = Math.floor(stage.samples / (stage.backend === 'slime' ? stage.rolloutBatchSize : stage.globalBatchSize));
  return stage.epochs * perEpoch;
}

/**
 * The iteration of a stage's last checkpoint after `steps` steps. slime numbers checkpoints by rollout id,
 * 0-based (`iter_0000019` after 20 rollouts); Megatron and the local trainer by completed steps.
 */
export function lastCheckpoint(backend: string, steps: number): number {
  return backend === 'slime' ? steps - 1 : steps;
}

/** Whether the recipe exports an FP8 model: `convert.fp8.enabled`, by default when training in FP8. */
export function fp8Enabled(r: Pick<Recipe, 'convert' | 'precision'>): boolean {
  return r.convert !== undefined && (r.convert.fp8.enabled ?? r.precision === 'fp8');
}

/** torchrun's processes per node on a pool: `ranksPerNode`, else one per GPU the stage uses, else one (a CPU pool). */
export function poolRanks(pool: Pick<Pool, 'ranksPerNode' | 'gpusPerNode'>, gpusPerNode = pool.gpusPerNode): number {
  return pool.ranksPerNode ?? Math.max(1, gpusPerNode);
}
