/**
 * A tiny Qwen2-style model for the local reference trainer (`trainer/`): every InfiR2 stage, on CPU, in
 * minutes. Paths are relative to the project root. The sizes are placeholders until the trainer's tuned
 * values land; `samples` is re-counted from the data files when they exist.
 */
import type { RecipeInput } from '../schema.js';

const FAST = { stallTimeout: '5m', attemptTimeout: '1h' } as const;

const SFT_COMMON = {
  backend: 'local',
  pool: 'local',
  ...FAST,
  epochs: 2,
  rolloutBatchSize: 16,
  globalBatchSize: 16,
  microBatchSize: 8,
  saveInterval: 20,
  lr: 1e-3,
  minLr: 1e-4,
  decayStyle: 'cosine',
  warmupFraction: 0.05,
  weightDecay: 0,
  seed: 1234,
} as const;

export const tiny: RecipeInput = {
  name: 'tiny',
  description: 'Every InfiR2 stage on a 2-layer model with the local reference trainer (CPU, FP8 emulated)',
  precision: 'fp8',
  runDir: 'runs',
  fp8BlockSize: 32,
  model: {
    name: 'tiny-qwen2',
    arch: {
      numLayers: 2,
      hiddenSize: 64,
      ffnHiddenSize: 256,
      numAttentionHeads: 4,
      numQueryGroups: 2,
      rotaryBase: 10000,
      vocabSize: 256,
      normEpsilon: 1e-6,
      tieEmbeddings: true,
      maxContext: 256,
    },
  },
  pools: { local: { taskQueue: 'infir2-local', nodes: 1, gpusPerNode: 0, launcher: 'local' } },
  cpt: {
    backend: 'local',
    pool: 'local',
    ...FAST,
    data: 'trainer/data/cpt.jsonl',
    iterations: 160,
    warmupIters: 20,
    decayIters: 40,
    decayStyle: 'cosine',
    saveInterval: 20,
    logInterval: 1,
    evalInterval: 40,
    evalIters: 2,
    seqLength: 128,
    microBatchSize: 8,
    globalBatchSize: 16,
    lr: 3e-3,
    minLr: 3e-4,
    weightDecay: 0.1,
    clipGrad: 1.0,
    initMethodStd: 0.02,
    seed: 1236,
  },
  sft: [
    { ...SFT_COMMON, data: 'trainer/data/sft_stage1.jsonl', samples: 256 },
    { ...SFT_COMMON, data: 'trainer/data/sft_stage2.jsonl', samples: 256 },
  ],
  convert: { backend: 'local', pool: 'local', ...FAST, fp8: { blockSize: 32, pow2Scales: true, fmt: 'e4m3' } },
  rl: {
    backend: 'local',
    pool: 'local',
    ...FAST,
    data: 'trainer/data/rl.jsonl',
    rolloutBatchSize: 8,
    samplesPerPrompt: 4,
    globalBatchSize: 32,
    saveInterval: 5,
    lr: 1e-4,
    decayStyle: 'constant',
    weightDecay: 0,
    klLossCoef: 0,
    epsClip: 0.2,
    epsClipHigh: 0.28,
    seed: 1234,
    curriculum: [
      { rollouts: 10, maxResponseLen: 32, temperature: 1.0 },
      { rollouts: 10, maxResponseLen: 64, temperature: 1.1 },
    ],
  },
  eval: {
    backend: 'local',
    pool: 'local',
    ...FAST,
    models: ['fp8', 'rl'],
    benchmarks: {
      arith: { data: 'trainer/data/eval_arith.jsonl', samples: 4, temperature: 0.65, topP: 0.95, maxTokens: 32, seed: 1234 },
    },
  },
};
