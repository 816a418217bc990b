/**
 * The local reference trainer (`trainer/main.py`, see trainer/README.md): every stage on a tiny model, with
 * Megatron's argument names, checkpoint layout and log lines, so the plan has the same shape as a cluster
 * plan. Pure: recipe values in, argv out.
 */
import { join } from 'node:path';
import type { Arch, Benchmark, CptConfig, Recipe, RlConfig, SftStage } from '../recipe/schema.js';
import { opt, when } from './argv.js';
import { loadArgs, phaseSummary } from './megatron.js';
import type { CptPhase, StepBody } from './types.js';

export interface LocalContext {
  /** The interpreter that runs the trainer (default `<project>/.venv/bin/python`). */
  python: string;
  projectRoot: string;
  precision: Recipe['precision'];
  fp8BlockSize: number;
  stepDir: string;
  env: Record<string, string>;
  /** GPUs the step holds on its node: none on a CPU pool, one for a single process, one per rank under torchrun. */
  gpus: number;
  nodes: number;
  /**
   * The distributed launcher in front of the trainer (torchrun, or srun + torchrun) on a torchrun or slurm pool;
   * absent: the trainer is one process.
   */
  launch?: string[];
  /** The Slurm job srun starts (job name, squeue probe, scancel), on a slurm pool. */
  tracking?: Pick<StepBody, 'job' | 'onStop' | 'nodeLaunchers'>;
}

/** `--no_python`: torchrun runs the interpreter the plan names, not the `python` first on its PATH. */
const trainer = (c: LocalContext, sub: string) => [
  ...(c.launch ? [...c.launch, '--no_python'] : []),
  c.python,
  join(c.projectRoot, 'trainer', 'main.py'),
  sub,
];

/** FP8 is on when `--fp8-format` is given; `--fp8-block-size` is the local trainer's own. */
function precisionArgs(c: LocalContext): string[] {
  return ['--bf16', ...when(c.precision === 'fp8', '--fp8-format', 'e4m3', '--fp8-recipe', 'blockwise', '--fp8-block-size', String(c.fp8BlockSize))];
}

function checkpointStep(c: LocalContext, head: string[], resumeArgv: string[] | null, saveDir: string, end: number): Pick<StepBody, 'command' | 'resume' | 'progress' | 'checkpoint' | 'completion'> {
  return {
    command: { argv: head, env: { ...c.env }, cwd: c.stepDir },
    resume: resumeArgv ? { argv: resumeArgv } : null,
    progress: { format: 'megatron', totalIterations: end },
    checkpoint: { layout: 'megatron', dir: saveDir },
    completion: { kind: 'checkpoint', dir: saveDir, iteration: end },
  };
}

export function cptPhaseStep(c: LocalContext, phase: CptPhase, cpt: CptConfig, arch: Arch): StepBody {
  const head = [
    ...trainer(c, 'pretrain'),
    '--data-path', cpt.data,
    ...opt('--num-layers', arch.numLayers),
    ...opt('--hidden-size', arch.hiddenSize),
    ...opt('--ffn-hidden-size', arch.ffnHiddenSize),
    ...opt('--num-attention-heads', arch.numAttentionHeads),
    ...opt('--num-query-groups', arch.numQueryGroups),
    ...opt('--seq-length', cpt.seqLength),
    ...opt('--max-position-embeddings', arch.maxContext),
    ...opt('--rotary-base', arch.rotaryBase),
    ...opt('--norm-epsilon', arch.normEpsilon),
    ...when(!arch.tieEmbeddings, '--untie-embeddings-and-output-weights'),
    ...opt('--micro-batch-size', cpt.microBatchSize),
    ...opt('--global-batch-size', cpt.globalBatchSize),
    ...opt('--train-iters', phase.trainIters),
    ...opt('--save-interval', cpt.saveInterval),
    ...opt('--log-interval', cpt.logInterval),
    ...opt('--eval-interval', cpt.evalInterval),
    ...opt('--eval-iters', cpt.evalIters),
    // Megatron's document split: its test split is validated once, when training ends (`… on test set`).
    '--split', cpt.split,
    ...opt('--lr', cpt.lr),
    ...opt('--min-lr', cpt.minLr),
    '--lr-decay-style', 'WSD',
    ...opt('--lr-warmup-iters', phase.warmupIters),
    ...opt('--lr-wsd-decay-iters', cpt.decayIters),
    '--lr-wsd-decay-style', cpt.decayStyle,
    ...opt('--weight-decay', cpt.weightDecay),
    ...opt('--adam-beta1', cpt.adamBeta1),
    ...opt('--adam-beta2', cpt.adamBeta2),
    ...opt('--clip-grad', cpt.clipGrad),
    ...opt('--init-method-std', cpt.initMethodStd),
    ...opt('--seed', cpt.seed),
    ...precisionArgs(c),
    '--save', phase.saveDir,
  ];
  const tail = [...opt('--exit-interval', phase.exitInterval), ...when(phase.overrideScheduler, '--override-opt_param-scheduler'), ...cpt.extraArgs];
  return {
    ...checkpointStep(c, [...head, ...loadArgs(phase.first), ...tail], [...head, ...loadArgs(phase.resume), ...tail], phase.saveDir, phase.end),
    ...c.tracking,
    inputs: { data: cpt.data, ...(phase.first.load !== phase.saveDir ? { load: phase.first.load } : {}), ...(phase.first.pretrained ? { pretrained: phase.first.pretrained } : {}) },
    outputs: { checkpointDir: phase.saveDir },
    gpus: c.gpus,
    nodes: c.nodes,
    summary: phaseSummary(phase, cpt),
  };
}

export interface LocalSftSpec {
  stage: SftStage;
  refLoad: string;
  saveDir: string;
  steps: number;
}

export function sftStep(c: LocalContext, s: LocalSftSpec): StepBody {
  const st = s.stage;
  const argv = [
    ...trainer(c, 'sft'),
    '--ref-load', s.refLoad,
    // --load = --save: a rerun resumes from the stage's own tracker, as slime does.
    '--load', s.saveDir,
    '--save', s.saveDir,
    '--data-path', st.data,
    ...opt('--num-epoch', st.epochs),
    ...opt('--global-batch-size', st.globalBatchSize),
    ...opt('--micro-batch-size', st.microBatchSize),
    ...opt('--lr', st.lr),
    ...opt('--min-lr', st.minLr),
    '--lr-decay-style', st.decayStyle,
    ...opt('--lr-warmup-iters', Math.round(st.warmupFraction * s.steps)),
    ...opt('--weight-decay', st.weightDecay),
    ...opt('--adam-beta2', st.adamBeta2),
    ...opt('--save-interval', st.saveInterval),
    '--log-interval', '1',
    ...opt('--seed', st.seed),
    ...precisionArgs(c),
    ...st.extraArgs,
  ];
  return {
    ...checkpointStep(c, argv, argv, s.saveDir, s.steps),
    inputs: { refLoad: s.refLoad, data: st.data },
    outputs: { checkpointDir: s.saveDir },
    gpus: c.gpus,
    nodes: c.nodes,
    summary: `SFT (local): ${st.epochs} epoch(s) of ${st.samples} samples = ${s.steps} steps, LR ${st.lr}`,
  };
}

export interface LocalRlSpec {
  rl: RlConfig;
  curriculum: RlConfig['curriculum'][number];
  hfCheckpoint: string;
  refLoad: string;
  saveDir: string;
}

export function rlStep(c: LocalContext, s: LocalRlSpec): StepBody {
  const { rl, curriculum: k } = s;
  const argv = [
    ...trainer(c, 'rl'),
    '--hf-checkpoint', s.hfCheckpoint,
    '--ref-load', s.refLoad,
    '--load', s.saveDir,
    '--save', s.saveDir,
    '--prompt-data', rl.data,
    ...opt('--num-rollout', k.rollouts),
    ...opt('--rollout-batch-size', rl.rolloutBatchSize),
    ...opt('--n-samples-per-prompt', rl.samplesPerPrompt),
    ...opt('--rollout-max-response-len', k.maxResponseLen),
    ...opt('--rollout-temperature', k.temperature),
    ...opt('--eps-clip', rl.epsClip),
    ...opt('--eps-clip-high', rl.epsClipHigh),
    ...opt('--kl-loss-coef', rl.klLossCoef),
    ...opt('--global-batch-size', rl.globalBatchSize),
    ...opt('--lr', rl.lr),
    '--lr-decay-style', rl.decayStyle,
    ...opt('--weight-decay', rl.weightDecay),
    ...opt('--adam-beta2', rl.adamBeta2),
    ...opt('--save-interval', rl.saveInterval),
    '--log-interval', '1',
    ...opt('--seed', rl.seed),
    ...precisionArgs(c),
    ...rl.extraArgs,
  ];
  return {
    ...checkpointStep(c, argv, argv, s.saveDir, k.rollouts),
    inputs: { hfCheckpoint: s.hfCheckpoint, refLoad: s.refLoad, data: rl.data },
    outputs: { checkpointDir: s.saveDir },
    gpus: c.gpus,
    nodes: c.nodes,
    summary: `RL (local GRPO): ${k.rollouts} rollouts of ${rl.rolloutBatchSize}×${rl.samplesPerPrompt}, responses ≤ ${k.maxResponseLen} tokens at T=${k.temperature}`,
  };
}

export function hfExportStep(c: LocalContext, iterDir: string, outDir: string, vocabSize: number | undefined, what: string): StepBody {
  return {
    command: { argv: [...trainer(c, 'convert-hf'), '--input-dir', iterDir, '--output-dir', outDir, '--force', ...opt('--vocab-size', vocabSize)], env: { ...c.env }, cwd: c.stepDir },
    resume: null,
    progress: { format: 'none', totalIterations: null },
    checkpoint: null,
    completion: { kind: 'files', paths: [join(outDir, 'config.json'), join(outDir, 'model.safetensors')] },
    inputs: { checkpoint: iterDir },
    outputs: { hfDir: outDir },
    gpus: c.gpus,
    nodes: c.nodes,
    summary: `export ${what} to HF safetensors (local)`,
  };
}

export function fp8CastStep(c: LocalContext, inDir: string, outDir: string, blockSize: number, pow2: boolean): StepBody {
  return {
    command: {
      argv: [...trainer(c, 'convert-fp8'), '--input-bf16-hf-path', inDir, '--output-fp8-hf-path', outDir, '--block-size', String(blockSize), '--force-pow-2-scale', pow2 ? 'true' : 'false'],
      env: { ...c.env },
      cwd: c.stepDir,
    },
    resume: null,
    progress: { format: 'none', totalIterations: null },
    checkpoint: null,
    completion: { kind: 'files', paths: [join(outDir, 'config.json'), join(outDir, 'model.safetensors')] },
    inputs: { hf: inDir },
    outputs: { hfDir: outDir },
    gpus: c.gpus,
    nodes: c.nodes,
    summary: `cast to FP8 E4M3 (local), ${blockSize}×${blockSize} blocks, ${pow2 ? 'power-of-2' : 'FP32'} scales, fmt e4m3`,
  };
}

export function evalStep(c: LocalContext, benchmarkName: string, b: Benchmark, modelPath: string, what: string): StepBody {
  const report = join(c.stepDir, 'report.json');
  return {
    command: {
      argv: [
        ...trainer(c, 'eval'),
        '--model-path', modelPath,
        '--data-path', b.data ?? '',
        '--benchmark', benchmarkName,
        ...opt('--n-samples', b.samples),
        ...opt('--temperature', b.temperature),
        ...opt('--top-p', b.topP),
        ...opt('--max-tokens', b.maxTokens),
        ...opt('--seed', b.seed),
        '--output', report,
      ],
      env: { ...c.env },
      cwd: c.stepDir,
    },
    resume: null,
    progress: { format: 'none', totalIterations: null },
    checkpoint: null,
    completion: { kind: 'files', paths: [report] },
    inputs: { model: modelPath, ...(b.data ? { data: b.data } : {}) },
    outputs: { report },
    gpus: c.gpus,
    nodes: c.nodes,
    summary: `evaluate ${what} on ${benchmarkName} (local): avg@${b.samples}, T=${b.temperature}, ≤ ${b.maxTokens} tokens`,
  };
}
