/**
 * InfiR2 FP8 for Qwen2.5-1.5B: `scripts/CPT/InfiR2_CPT_FP8_1.5B*.sh`, `scripts/SFT/InfiR2_SFT_FP8_1.5B_stage{1,2}.sh`
 * and the eval scripts (docs/infir2-recipe.md §2–5). InfiR2 ships no 1.5B RL scripts, so there is no RL stage; the FP8 export
 * is what gets evaluated. It differs from the 7B preset where the scripts differ: TP 2, the 1.5B shapes, tied
 * embeddings, SFT LR 5e-5 / 5e-6 and slime's 1.5B model script (vocab 151936).
 */
import type { RecipeInput } from '../schema.js';
import { infir2_7b } from './infir2-7b.js';
import { INFIR2_EVAL } from './infir2-eval.js';

const sft7b = infir2_7b.sft!;

const SLIME_MODEL_1_5B = {
  // slime scripts/models/qwen2.5-1.5B.sh passes --rotary-base 10000; CPT trained with 1000000, which is also
  // Qwen2.5-1.5B's rope_theta, and slime asserts rope_theta == rotary_base: FIXES `sft-1.5b-rotary-base`.
  rotaryBase: 1000000,
  vocabSize: 151936,
};

export const infir2_1_5b: RecipeInput = {
  ...infir2_7b,
  name: 'infir2-1-5b',
  description: 'InfiR2 FP8 recipe for Qwen2.5-1.5B (CPT → SFT ×2 → HF/FP8 export → eval)',
  model: {
    name: 'Qwen2.5-1.5B',
    hf: '/path/to/base_models_hf/qwen2.5-1.5B-Instruct',
    // The 1.5B CPT script points TOKENIZER_MODEL at the 7B directory too (same Qwen2.5 tokenizer).
    tokenizer: '/your_model_path/Qwen2.5-7B',
    base: '/your_checkpoint_path/Qwen2.5-1.5B_torch_dist',
    arch: {
      numLayers: 28,
      hiddenSize: 1536,
      ffnHiddenSize: 8960,
      numAttentionHeads: 12,
      numQueryGroups: 2,
      rotaryBase: 1000000,
      vocabSize: 152064,
      normEpsilon: 1e-6,
      tieEmbeddings: true,
      maxContext: 32768,
    },
  },
  pools: {
    megatron: { taskQueue: 'infir2-megatron', nodes: 1, gpusPerNode: 8, launcher: 'torchrun', rdzvEndpoint: 'localhost:29400' },
    ray: { taskQueue: 'infir2-ray', nodes: 2, gpusPerNode: 8, launcher: 'ray', rayAddress: 'http://127.0.0.1:8265' },
    gpu: { taskQueue: 'infir2-gpu', nodes: 1, gpusPerNode: 8, launcher: 'local' },
  },
  cpt: { ...infir2_7b.cpt!, parallel: { tensor: 2, pipeline: 1, context: 1 } },
  sft: sft7b.map((stage, i) => ({
    ...stage,
    lr: 5e-5,
    minLr: 5e-6,
    parallel: { tensor: 2, pipeline: 1, context: 1, expert: 1, expertTensor: 1 },
    arch: SLIME_MODEL_1_5B,
    wandbGroup: `InfiR2-sft-fp8-1.5B-stg${i + 1}`,
  })),
  rl: undefined,
  eval: INFIR2_EVAL,
};
