/**
 * A tiny Qwen2-style model for the local reference trainer (`trainer/`): every InfiR2 stage, on CPU, in
 * minutes. These are the trainer's tuned values (docs/local-trainer.md, "The tiny recipe"): CPT teaches the
 * task's format, SFT reaches ~85 % held-out accuracy (arith, avg@4) and RL ~99 %. Paths are relative to the
 * project root; `samples` is re-counted from the data files when they exist. `recipes/tiny.yaml` is this
 * preset with its paths written relative to the file.
 */
import type { RecipeInput } from '../schema.js';

const FAST = { stallTimeout: '5m', attemptTimeout: '1h' } as const;

/** 1000 rows per stage, one epoch of 16-row batches: 62 steps, so each stage ends at `iter_0000062`. */
const SFT_COMMON = {
  backend: 'local',
  pool: 'local',
  ...FAST,
  samples: 1000,
  epochs: 1,
  rolloutBatchSize: 16,
  globalBatchSize: 16,
  microBatchSize: 16,
  saveInterval: 100,
  lr: 2e-3,
  minLr: 2e-4,
  decayStyle: 'cosine',
  warmupFraction: 0.05,
  weightDecay: 0,
  adamBeta2: 0.95,
  seed: 1234,
} as const;

export const tiny: RecipeInput = {
  name: 'tiny',
  description: 'Every InfiR2 stage on a 2-layer model with the local reference trainer (CPU, FP8 emulated)',
  precision: 'fp8',
  runDir: '$INFIR2_HOME/runs',
  fp8BlockSize: 32,
  // The reference trainer runs on Debian's torch 1.13 (which calls itself 1.13.0a0+gitunknown, a pre-release
  // that `>=1.13` would refuse) and on the GPU's pinned 2.11 (docs/gpu.md).
  software: { versions: { torch: '>=1.13.0a0' } },
  model: {
    name: 'tiny-qwen2',
    arch: {
      numLayers: 2,
      hiddenSize: 64,
      ffnHiddenSize: 128,
      numAttentionHeads: 4,
      numQueryGroups: 2,
      rotaryBase: 500,
      vocabSize: 256,
      normEpsilon: 1e-6,
      tieEmbeddings: true,
      maxContext: 128,
    },
  },
  pools: { local: { taskQueue: 'infir2-local', nodes: 1, gpusPerNode: 0, launcher: 'local' } },
  cpt: {
    backend: 'local',
    pool: 'local',
    ...FAST,
    data: 'trainer/data/cpt.jsonl',
    // One WSD schedule: warmup 10, stable to 480, cosine decay over the last 120.
    iterations: 600,
    warmupIters: 10,
    decayIters: 120,
    decayStyle: 'cosine',
    saveInterval: 10,
    logInterval: 10,
    evalInterval: 100,
    evalIters: 2,
    seqLength: 64,
    microBatchSize: 16,
    globalBatchSize: 16,
    lr: 5e-3,
    minLr: 5e-4,
    weightDecay: 0.1,
    adamBeta2: 0.99,
    clipGrad: 1.0,
    initMethodStd: 0.05,
    seed: 1234,
  },
  sft: [
    { ...SFT_COMMON, data: 'trainer/data/sft_stage1.jsonl' },
    { ...SFT_COMMON, data: 'trainer/data/sft_stage2.jsonl' },
  ],
  convert: { backend: 'local', pool: 'local', ...FAST, fp8: { blockSize: 32, pow2Scales: true, fmt: 'e4m3' } },
  rl: {
    backend: 'local',
    pool: 'local',
    ...FAST,
    data: 'trainer/data/rl.jsonl',
    // 16 prompts × 8 samples = 128 per rollout, 2 optimizer steps of 64.
    rolloutBatchSize: 16,
    samplesPerPrompt: 8,
    globalBatchSize: 64,
    saveInterval: 5,
    lr: 2e-4,
    decayStyle: 'constant',
    weightDecay: 0.1,
    adamBeta2: 0.98,
    klLossCoef: 0,
    epsClip: 0.2,
    epsClipHigh: 0.28,
    seed: 1234,
    // InfiR2: 8K → 16K tokens at T 1.0 → 1.1; the tiny model is too diffuse at T ≥ 1 for 30 rollouts to help.
    // Stage 1 answers up to b = 6 within 34 tokens, stage 2 all of them within 42.
    curriculum: [
      { rollouts: 15, maxResponseLen: 34, temperature: 0.8 },
      { rollouts: 15, maxResponseLen: 42, temperature: 0.9 },
    ],
  },
  eval: {
    backend: 'local',
    pool: 'local',
    ...FAST,
    models: ['fp8', 'rl'],
    benchmarks: {
      arith: { data: 'trainer/data/eval_arith.jsonl', samples: 4, temperature: 0.65, topP: 0.95, maxTokens: 64, seed: 1234 },
    },
  },
};
