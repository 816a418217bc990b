/**
 * Numbers that follow from a recipe and that both lint and the compiler need: the WSD phase boundaries and
 * the step counts of SFT and RL stages (how slime and the local trainer count them).
 */
import type { Arch, CptConfig, Pool, Recipe, SftStage } from './schema.js';

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

/**
 * Parameters of a Qwen2/Llama-style model: embeddings (and an untied output layer), per layer the attention
 * (grouped-query: Q and O of `hidden × hidden`, K and V of `hidden × groups × head dim`, Qwen's QKV biases), the
 * SwiGLU MLP (three `hidden × ffn` matrices) and two norms, and the final norm. Qwen2.5-7B: 7.62 B.
 */
export function paramCount(a: Pick<Arch, 'numLayers' | 'hiddenSize' | 'ffnHiddenSize' | 'numAttentionHeads' | 'numQueryGroups' | 'vocabSize' | 'tieEmbeddings'>): number {
  const headDim = a.hiddenSize / a.numAttentionHeads;
  const kv = a.numQueryGroups * headDim;
  const attention = 2 * a.hiddenSize * a.hiddenSize + 2 * a.hiddenSize * kv + a.hiddenSize + 2 * kv;
  const layer = attention + 3 * a.hiddenSize * a.ffnHiddenSize + 2 * a.hiddenSize;
  return a.numLayers * layer + a.vocabSize * a.hiddenSize * (a.tieEmbeddings ? 1 : 2) + a.hiddenSize;
}

/**
 * Bytes per parameter of a checkpoint with the optimizer's state: BF16 weights (2), FP32 master weights (4) and
 * Adam's two FP32 moments (8). Without it, the BF16 weights alone (2).
 */
export const BYTES_PER_PARAM_WITH_OPTIMIZER = 14;
