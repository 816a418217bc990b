/**
 * What each backend compiles each kind of step to: one row per (step kind, backend). The compiler (compile.ts)
 * decides a step's inputs from the steps before it and looks its body up here, so adding a backend is its module
 * in src/backends/ and its rows in this table; nothing in the compiler's walk changes.
 */
import { join } from 'node:path';
import * as convert from '../backends/convert.js';
import * as evalscope from '../backends/evalscope.js';
import { slurmJobName } from '../backends/launch.js';
import * as local from '../backends/local.js';
import * as megatron from '../backends/megatron.js';
import * as slime from '../backends/slime.js';
import type { CptPhase, StepBody } from '../backends/types.js';
import type { Arch, Benchmark, ConvertConfig, CptConfig, EvalConfig, EvalModel, Pool, Recipe, RlConfig, SftStage } from '../recipe/schema.js';
import type { RunLayout } from './layout.js';

/** Where a local step runs: its stage's pool and size. */
export type LocalStage = { pool: string; nodes?: number | undefined; gpusPerNode?: number | undefined };

/** What the compiler offers a builder: the recipe, the run's layout, and the shared pieces of a command. */
export interface BuildContext {
  readonly r: Recipe;
  readonly layout: RunLayout;
  readonly runId: string;
  /** Where `trainer/` and `src/backends/tools/` live. */
  readonly root: string;
  /**
   * The local trainer's context. `dataParallel` (pretraining, the one data-parallel stage of the local trainer):
   * on a torchrun or slurm pool the trainer starts under that launcher, one process per rank.
   */
  localCtx(stepId: string, env: Record<string, string>, stage: LocalStage, dataParallel?: boolean): local.LocalContext;
  size(stage: { pool: string; nodes?: number | undefined; gpusPerNode?: number | undefined }): { pool: Pool; nodes: number; gpusPerNode: number };
  /** The model's architecture with a stage's overrides. */
  archFor(override: Partial<Arch> | undefined): Arch;
}

export interface CptIn { phase: CptPhase; cpt: CptConfig }
export interface SftIn { id: string; stage: SftStage; refLoad: string; saveDir: string; steps: number }
export interface HfExportIn { id: string; convert: ConvertConfig; iterDir: string; outDir: string; what: string; arch: Partial<Arch> | undefined }
export interface Fp8CastIn { convert: ConvertConfig; inDir: string; outDir: string }
export interface RlIn { id: string; rl: RlConfig; curriculum: RlConfig['curriculum'][number]; hfCheckpoint: string; refLoad: string; saveDir: string }
export interface EvalIn { id: string; eval: EvalConfig; model: EvalModel; name: string; benchmark: Benchmark; modelDir: string; what: string; index: number }

type Build<In> = (cx: BuildContext, i: In) => StepBody;

/** What every slime step needs: where it runs, the model it trains, what it loads and where it saves. */
function slimeCommon(cx: BuildContext, id: string, stage: SftStage | RlConfig, hfCheckpoint: string, refLoad: string, saveDir: string, wandbGroup: string | undefined): slime.SlimeCommon {
  const { pool, nodes, gpusPerNode } = cx.size(stage);
  return {
    id,
    stepDir: cx.layout.stepDir(id),
    runId: cx.runId,
    software: cx.r.software,
    precision: cx.r.precision,
    pool,
    nodes,
    gpusPerNode,
    arch: cx.archFor(stage.arch),
    hfCheckpoint,
    refLoad,
    saveDir,
    wandbGroup: wandbGroup ?? `${cx.r.name}-${id}`,
  };
}

export const BUILD = {
  cpt: {
    megatron: (cx, { phase, cpt }) =>
      megatron.cptPhaseStep({
        phase,
        cpt,
        arch: cx.r.model.arch,
        precision: cx.r.precision,
        software: cx.r.software,
        ...cx.size(cpt),
        tokenizer: cx.r.model.tokenizer ?? cx.r.model.hf ?? '',
        dataCache: cpt.dataCache ?? join(cx.layout.run, 'cpt', 'data-cache'),
        stepDir: cx.layout.stepDir(phase.id),
        wandbExpName: `${cx.r.name}-${phase.id}`,
        jobName: slurmJobName(cx.runId, phase.id),
        projectRoot: cx.root,
      }),
    local: (cx, { phase, cpt }) => local.cptPhaseStep(cx.localCtx(phase.id, cpt.env, cpt, true), phase, cpt, cx.r.model.arch),
  },
  sft: {
    slime: (cx, { id, stage, refLoad, saveDir, steps }) =>
      slime.sftStep({ ...slimeCommon(cx, id, stage, stage.hfCheckpoint ?? cx.r.model.hf ?? '', refLoad, saveDir, stage.wandbGroup), stage, rollouts: steps }),
    local: (cx, { id, stage, refLoad, saveDir, steps }) => local.sftStep(cx.localCtx(id, stage.env, stage), { stage, refLoad, saveDir, steps }),
  },
  hfExport: {
    convert: (cx, { id, convert: c, iterDir, outDir, what, arch }) =>
      convert.hfExportStep({ stepDir: cx.layout.stepDir(id), software: cx.r.software, iterDir, outDir, originHf: cx.r.model.hf ?? '', vocabSize: c.vocabSize ?? cx.archFor(arch).vocabSize, what }),
    local: (cx, { id, convert: c, iterDir, outDir, what }) => local.hfExportStep(cx.localCtx(id, c.env, c), iterDir, outDir, c.vocabSize, what),
  },
  fp8Cast: {
    convert: (cx, { convert: c, inDir, outDir }) =>
      convert.fp8CastStep({
        stepDir: cx.layout.stepDir('convert.fp8'),
        software: cx.r.software,
        projectRoot: cx.root,
        inDir,
        outDir,
        pow2Scales: c.fp8.pow2Scales,
        fmt: c.fp8.fmt === 'none' ? null : c.fp8.fmt,
        blockSize: c.fp8.blockSize,
      }),
    local: (cx, { convert: c, inDir, outDir }) => local.fp8CastStep(cx.localCtx('convert.fp8', c.env, c), inDir, outDir, c.fp8.blockSize, c.fp8.pow2Scales),
  },
  rl: {
    // Stage k > 1 starts from stage k − 1's checkpoints (docs/RL.md).
    slime: (cx, { id, rl, curriculum, hfCheckpoint, refLoad, saveDir }) =>
      slime.rlStep({ ...slimeCommon(cx, id, rl, hfCheckpoint, refLoad, saveDir, curriculum.wandbGroup), rl, curriculum }),
    local: (cx, { id, rl, curriculum, hfCheckpoint, refLoad, saveDir }) => local.rlStep(cx.localCtx(id, rl.env, rl), { rl, curriculum, hfCheckpoint, refLoad, saveDir }),
  },
  eval: {
    evalscope: (cx, { id, eval: ev, model, name, benchmark, modelDir, what, index }) =>
      evalscope.evalStep({
        stepDir: cx.layout.stepDir(id),
        projectRoot: cx.root,
        software: cx.r.software,
        eval: ev,
        benchmarkName: name,
        benchmark,
        modelPath: modelDir,
        servedName: `${cx.r.name}-${model}`,
        port: ev.server.port + index,
        what,
      }),
    local: (cx, { id, eval: ev, name, benchmark, modelDir, what }) => local.evalStep(cx.localCtx(id, ev.env, ev), name, benchmark, modelDir, what),
  },
} satisfies {
  cpt: Record<CptConfig['backend'], Build<CptIn>>;
  sft: Record<SftStage['backend'], Build<SftIn>>;
  hfExport: Record<ConvertConfig['backend'], Build<HfExportIn>>;
  fp8Cast: Record<ConvertConfig['backend'], Build<Fp8CastIn>>;
  rl: Record<RlConfig['backend'], Build<RlIn>>;
  eval: Record<EvalConfig['backend'], Build<EvalIn>>;
};
