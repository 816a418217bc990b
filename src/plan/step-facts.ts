/**
 * What a Megatron user checks first in a training step, read back from the argv the step will run (Megatron's,
 * slime's and the reference trainer's flags are Megatron's): the parallel layout, the batch, the sequence, the
 * tokens, the learning-rate schedule and the precision. `infir2 plan` shows them; reading them from the command
 * rather than the recipe means the table shows what runs, and `plan --json` (the Plan) stays as it is.
 */
import type { PlanStep } from './types.js';

export interface StepFacts {
  /** GPUs (ranks) the step trains on; 0: CPU. */
  gpus: number;
  tp: number;
  pp: number;
  cp: number;
  /** Data-parallel ranks: GPUs / (TP·PP·CP); null where that does not divide. */
  dp: number | null;
  /** Samples per micro-batch, or `dynamic` (slime packs up to `tokensPerGpu` tokens per GPU). */
  micro: number | 'dynamic' | null;
  /** Samples per optimizer step (RL: prompts × samples per prompt). */
  global: number | null;
  /** `128×16` for RL: prompts × samples per prompt. */
  globalParts: string | null;
  /** Tokens per sample (fixed-length pretraining), or null. */
  seq: number | null;
  /** Dynamic batching's cap of tokens per GPU and micro-batch. */
  tokensPerGpu: number | null;
  /** Tokens per optimizer step (global × seq), where the length is fixed. */
  tokensPerStep: number | null;
  /** The iterations the step trains: from → to; `unit` names what one is. */
  from: number;
  to: number;
  unit: 'iterations' | 'steps' | 'rollouts';
  /** Tokens trained in all (tokensPerStep × iterations), where known. */
  tokens: number | null;
  lr: string | null;
  precision: string;
}

/** The value of the last `--flag` (argparse keeps the last), or undefined. */
export function flagValue(argv: readonly string[], flag: string): string | undefined {
  for (let i = argv.length - 2; i >= 0; i--) if (argv[i] === flag) return argv[i + 1];
  return undefined;
}

const has = (argv: readonly string[], flag: string) => argv.includes(flag);

function int(argv: readonly string[], flag: string): number | null {
  const v = flagValue(argv, flag);
  return v !== undefined && /^\d+$/.test(v) ? Number(v) : null;
}

/** `1e-4`, `2e-5`, `0.005` as written in the argv: the schedule reads as the recipe wrote it. */
const lrOf = (argv: readonly string[], flag: string) => flagValue(argv, flag) ?? null;

function schedule(argv: readonly string[]): string | null {
  const style = flagValue(argv, '--lr-decay-style');
  const lr = lrOf(argv, '--lr');
  if (!style || !lr) return null;
  const min = lrOf(argv, '--min-lr');
  const warmupIters = int(argv, '--lr-warmup-iters');
  const fraction = flagValue(argv, '--lr-warmup-fraction');
  const warmup = warmupIters ? `warmup ${warmupIters}` : fraction && Number(fraction) > 0 ? `warmup ${Number((Number(fraction) * 100).toPrecision(3))} %` : null;
  if (style === 'WSD') {
    const decay = int(argv, '--lr-wsd-decay-iters');
    const curve = flagValue(argv, '--lr-wsd-decay-style') ?? 'linear';
    return [`WSD ${lr}`, warmup, decay ? `${curve} decay ${decay} → ${min ?? '0'}` : null].filter(Boolean).join(', ');
  }
  if (style === 'constant') return `constant ${lr}`;
  return [`${style} ${lr} → ${min ?? '0'}`, warmup].filter(Boolean).join(', ');
}

function precisionOf(argv: readonly string[]): string {
  const format = flagValue(argv, '--fp8-format');
  if (!format) return has(argv, '--bf16') ? 'bf16' : has(argv, '--fp16') ? 'fp16' : 'fp32';
  const recipe = flagValue(argv, '--fp8-recipe');
  const block = int(argv, '--fp8-block-size');
  return ['fp8', format, recipe, block ? `${block}×${block}` : null, has(argv, '--fp8-param-gather') ? 'param-gather' : null].filter(Boolean).join(' ');
}

/**
 * The facts of a training step (cpt, sft, rl), or null for the others. `start` is the iteration it starts from
 * (a CPT phase: the end of the phase before it); the plan table works it out from the steps it depends on.
 */
export function stepFacts(step: PlanStep, start: number): StepFacts | null {
  if (step.kind !== 'cpt' && step.kind !== 'sft' && step.kind !== 'rl') return null;
  const argv = step.command.argv;
  const gpus = step.nodes * step.gpus;
  const tp = int(argv, '--tensor-model-parallel-size') ?? 1;
  const pp = int(argv, '--pipeline-model-parallel-size') ?? 1;
  const cp = int(argv, '--context-parallel-size') ?? 1;
  const ranks = Math.max(1, gpus);
  const dp = ranks % (tp * pp * cp) === 0 ? ranks / (tp * pp * cp) : null;
  const dynamic = has(argv, '--use-dynamic-batch-size');
  const tokensPerGpu = dynamic ? int(argv, '--max-tokens-per-gpu') : null;
  const micro = dynamic ? 'dynamic' : int(argv, '--micro-batch-size');
  const prompts = int(argv, '--rollout-batch-size');
  const samples = int(argv, '--n-samples-per-prompt');
  const global = int(argv, '--global-batch-size') ?? (prompts && samples ? prompts * samples : null);
  const seq = dynamic ? null : int(argv, '--seq-length');
  const tokensPerStep = global !== null && seq !== null ? global * seq : null;
  const to = step.completion.kind === 'checkpoint' ? step.progress.totalIterations ?? step.completion.iteration : start;
  const unit = step.kind === 'cpt' ? 'iterations' : step.kind === 'sft' ? 'steps' : 'rollouts';
  return {
    gpus,
    tp,
    pp,
    cp,
    dp,
    micro,
    global,
    globalParts: step.kind === 'rl' && prompts && samples ? `${prompts}×${samples}` : null,
    seq,
    tokensPerGpu,
    tokensPerStep,
    from: start,
    to,
    unit,
    tokens: tokensPerStep !== null ? tokensPerStep * (to - start) : null,
    lr: schedule(argv),
    precision: precisionOf(argv),
  };
}

/** The iteration a step starts from: a fork's `--ckpt-step`, else the end of the CPT phase it continues, else 0. */
export function startOf(step: PlanStep, steps: readonly PlanStep[]): number {
  if (step.kind !== 'cpt') return 0;
  const ckpt = int(step.command.argv, '--ckpt-step');
  if (ckpt !== null) return ckpt;
  const before = steps.find((s) => step.dependsOn.includes(s.id) && s.kind === 'cpt');
  return before && before.completion.kind === 'checkpoint' ? before.completion.iteration : 0;
}
