/**
 * Recipe → Plan. Walks the stages in pipeline order, decides each step's inputs from the steps before it (the
 * hand-offs InfiR2 leaves to a human: REF_LOAD, the iter dir to convert, HF_CHECKPOINT), and asks the stage's
 * backend for the command. Pure apart from finding the project root when none is given.
 */
import { isAbsolute, join } from 'node:path';
import { iterDirName } from '../backends/argv.js';
import type * as local from '../backends/local.js';
import { distributedLauncher, slurmJobName, slurmTracking, torchLaunch } from '../backends/launch.js';
import type { StepBody } from '../backends/types.js';
import { BYTES_PER_PARAM_WITH_OPTIMIZER, cptBoundaries, fp8Enabled, lastCheckpoint, paramCount, poolRanks, sftSteps } from '../recipe/derived.js';
import { SLUG_HINT, SLUG_RE } from '../recipe/fields.js';
import { error, RecipeError } from '../recipe/issues.js';
import { projectRoot as findProjectRoot } from '../recipe/project-root.js';
import type { Arch, EvalModel, Keep, Recipe } from '../recipe/schema.js';
import { BUILD, type BuildContext, type LocalStage } from './backend-table.js';
import { cptLineage, type Fork } from './cpt-lineage.js';
import { runLayout, type RunLayout } from './layout.js';
import { preflightSpec } from './preflight-spec.js';
import type { PreflightSpec } from './preflight-types.js';
import { stallSpec, type AdaptiveStall } from './stall-spec.js';
import type { BackendName, CheckpointEvalSpec, Plan, PlanStep, RetryBudgets, StepKind } from './types.js';

export interface CompileOptions {
  /** The run's id: a slug; the run lives in `<recipe.runDir>/<runId>`. */
  runId: string;
  /** Where `trainer/` and `src/backends/tools/` live. @default found from this module */
  projectRoot?: string;
  /** Interpreter for the local trainer (a GPU node points it at a CUDA PyTorch). @default `<projectRoot>/.venv/bin/python` */
  python?: string;
  /** Start cpt.decay from another run's stable checkpoint and leave out warmup and stable. */
  fork?: Fork;
}

const EVAL_MODEL_NAMES: Record<EvalModel, string> = {
  base: 'the base model',
  hf: 'the HF-exported SFT model',
  fp8: 'the FP8-exported SFT model',
  rl: 'the final RL model',
};

/** A torch_dist checkpoint that a later stage can load: its root, final iteration, and the step that writes it. */
interface Lineage {
  root: string;
  iteration: number | 'release';
  stepId: string | null;
}

/** An HF model directory and the step that writes it. */
interface HfModel {
  dir: string;
  stepId: string | null;
}

export function compilePlan(recipe: Recipe, opts: CompileOptions): Plan {
  if (!SLUG_RE.test(opts.runId) || opts.runId.length > 63) {
    throw new RecipeError([error('--run-id', `'${opts.runId}' is not a valid run id: expected ${SLUG_HINT}`)]);
  }
  if (opts.fork) checkFork(recipe, opts.fork);
  return new Compiler(recipe, opts).plan();
}

/** A fork starts cpt.decay from a complete stable-phase checkpoint of another run. */
function checkFork(recipe: Recipe, fork: Fork): void {
  const fail = (msg: string) => {
    throw new RecipeError([error('fork', msg)]);
  };
  if (!recipe.cpt) fail('the recipe has no cpt stage to fork a decay of');
  const { stableEnd } = cptBoundaries(recipe.cpt!);
  if (!Number.isInteger(fork.iteration) || fork.iteration < 1) fail(`iteration must be a whole number ≥ 1, got ${fork.iteration}`);
  if (fork.iteration > stableEnd) fail(`iteration ${fork.iteration} is past the stable phase, which ends at ${stableEnd}`);
  if (!isAbsolute(fork.sourceCheckpointDir) || /iter_\d+\/?$/.test(fork.sourceCheckpointDir)) {
    fail(`sourceCheckpointDir must be an absolute checkpoint root (not an iter_* directory), got ${fork.sourceCheckpointDir}`);
  }
}

class Compiler implements BuildContext {
  private readonly steps: PlanStep[] = [];
  readonly layout: RunLayout;
  readonly root: string;
  readonly runId: string;
  private readonly python: string;
  /** The checkpoints each save root's step writes, as withRetention estimates them, for its preflight. */
  private readonly saves = new Map<string, NonNullable<PreflightSpec['saves']>>();

  constructor(
    readonly r: Recipe,
    private readonly opts: CompileOptions,
  ) {
    this.layout = runLayout(r.runDir, opts.runId);
    this.root = opts.projectRoot ?? findProjectRoot();
    this.runId = opts.runId;
    this.python = opts.python ?? join(this.root, '.venv', 'bin', 'python');
  }

  plan(): Plan {
    const trained = this.cpt() ?? (this.r.model.base ? { root: this.r.model.base, iteration: 'release' as const, stepId: null } : null);
    const sft = this.sft(trained);
    const exported = this.convert(sft);
    const rl = this.rl(sft, exported);
    this.eval(exported, rl);
    const r = this.r;
    return {
      version: 1,
      recipe: r.name,
      runId: this.opts.runId,
      runDir: this.layout.run,
      precision: r.precision,
      model: r.model.name,
      pools: Object.fromEntries(
        Object.entries(r.pools).map(([name, p]) => [name, { taskQueue: p.taskQueue, nodes: p.nodes, gpusPerNode: p.gpusPerNode, launcher: p.launcher }]),
      ),
      steps: this.steps,
      ...(r.notify ? { notify: { webhooks: r.notify.webhooks.map((w) => ({ url: w.url, format: w.format, events: [...w.events] })) } } : {}),
    };
  }

  /** Add a step: the backend's body plus what the recipe says about pools, retries, timeouts and logs. */
  private add(
    id: string,
    kind: StepKind,
    backend: BackendName,
    stage: StageLimits,
    dependsOn: (string | null)[],
    body: StepBody,
    checkpointEval?: CheckpointEvalSpec,
  ): void {
    this.steps.push({ ...this.step(id, kind, backend, stage, dependsOn, body), ...(checkpointEval ? { checkpointEval } : {}) });
  }

  /** A step: the backend's body plus what the recipe says about pools, retries, timeouts and logs. */
  private step(id: string, kind: StepKind, backend: BackendName, stage: StageLimits, dependsOn: (string | null)[], body: StepBody): PlanStep {
    const { gpus, nodes, runtimeEnv: _, ...rest } = body;
    const preflight = preflightSpec({
      r: this.r,
      backend,
      body,
      localPython: this.python,
      pool: this.poolOf(stage.pool),
      jobName: slurmJobName(this.runId, id),
      saves: body.checkpoint ? this.saves.get(body.checkpoint.dir) : undefined,
    });
    // Secrets by reference: names only, filled in by the worker at launch (activities/secrets.ts).
    if (Object.keys(stage.secrets ?? {}).length) rest.command = { ...rest.command, secrets: { ...stage.secrets } };
    return {
      id,
      kind,
      backend,
      pool: stage.pool,
      nodes,
      gpus,
      dependsOn: [...new Set(dependsOn.filter((d): d is string => d !== null))],
      ...rest,
      stallTimeoutSec: stage.stallTimeout,
      ...(rest.progress.format !== 'none' && stage.startupTimeout !== undefined ? { stall: stallSpec(kind, stage as Required<AdaptiveStall> & { stallTimeout: number }) } : {}),
      attemptTimeoutSec: stage.attemptTimeout,
      retries: { ...stage.retries, config: 0 },
      logMaxMB: this.r.logs.maxMB,
      preflight,
    };
  }

  /**
   * The evaluation of a training step's checkpoints while it trains (`evalEvery`): the steps that export one
   * checkpoint (`{iterDir}` of `root`) to HF and run `eval`'s benchmarks on it, with `{iteration}` in their ids
   * and paths (`<run>/<step>/evals/<iteration>/`), each with the convert and eval stages' limits and pool. On
   * the local backend they run at the lowest CPU priority on one thread, so that on a shared CPU the trainer
   * keeps its pace. Lint requires `eval` and `convert` with it.
   */
  checkpointEvalSpec(stepId: string, every: number | undefined, root: string, arch: Partial<Arch> | undefined): CheckpointEvalSpec | undefined {
    const ev = this.r.eval;
    const c = this.r.convert;
    if (every === undefined || !ev || !c) return undefined;
    const dirId = `${stepId}/evals/{iteration}`;
    const outDir = join(this.layout.stepDir(dirId), 'hf');
    const what = `${stepId} checkpoint {iteration}`;
    const gentle = (body: StepBody, backend: string): StepBody =>
      backend === 'local' ? { ...body, command: { ...body.command, argv: ['nice', '-n', '19', ...body.command.argv], env: { ...body.command.env, OMP_NUM_THREADS: '1' } } } : body;
    const exported = gentle(BUILD.hfExport[c.backend](this, { id: dirId, convert: c, iterDir: join(root, '{iterDir}'), outDir, what, arch }), c.backend);
    const exportId = `${stepId}.eval{iteration}.export`;
    const steps = [
      this.step(exportId, 'convert', c.backend, c, [], exported),
      // evalscope serves each eval on its own port: past the final eval steps' ports.
      ...Object.entries(ev.benchmarks).map(([name, benchmark], i) =>
        this.step(`${stepId}.eval{iteration}.${name}`, 'eval', ev.backend, ev, [exportId], gentle(BUILD.eval[ev.backend](this, { id: `${dirId}/${name}`, eval: ev, model: 'hf', name, benchmark, modelDir: outDir, what, index: 50 + i }), ev.backend)),
      ),
    ];
    return { every, root, taskQueue: this.poolOf(ev.pool).taskQueue, steps };
  }

  /**
   * The step's checkpoint retention (none when `keep` limits nothing) and the checkpoints of other roots it
   * reads. `protect`: the iterations later steps load (dropped with `keep.boundaries: false`, which lint refuses
   * where one is loaded); `span`: the iterations the step trains.
   */
  private withRetention(body: StepBody, keep: Keep, protect: number[], span: number, saveInterval: number, arch: Arch, reads: { dir: string; iteration: number }[] = [], evals?: CheckpointEvalSpec): StepBody {
    if (!body.checkpoint) return body;
    const checkpoint = body.checkpoint;
    if (reads.length) body = { ...body, reads };
    const last = keep.last ?? null;
    const every = keep.every ?? null;
    const params = paramCount(arch);
    const checkpointBytes = params * BYTES_PER_PARAM_WITH_OPTIMIZER;
    const kept = [...new Set(keep.boundaries ? protect : [])].sort((a, b) => a - b);
    const saves = Math.ceil(span / saveInterval) + kept.length;
    if (last === null && every === null) {
      // What the preflight holds the root's free space against: every checkpoint the step saves stays.
      this.saves.set(checkpoint.dir, { dir: checkpoint.dir, checkpointBytes, boundBytes: saves * checkpointBytes, bound: `${saves} checkpoints, all kept` });
      return body;
    }
    const maxKept = Math.min(saves, (last ?? 0) + (every === null ? 0 : Math.ceil(span / every)) + kept.length + 1);
    const summary = [last !== null ? `keep last ${last}` : 'keep', every !== null ? `every ${every}` : null, kept.length ? `boundaries ${kept.join(', ')}` : null]
      .filter(Boolean)
      .join(', ');
    this.saves.set(checkpoint.dir, { dir: checkpoint.dir, checkpointBytes, boundBytes: maxKept * checkpointBytes, bound: `at most ${maxKept} checkpoints at once (${summary})` });
    // The last evaluation step's result file says a checkpoint's evaluation is over (writeResult's path).
    const lastEval = evals?.steps.at(-1);
    const awaitEval = evals && lastEval ? { awaitEval: { every: evals.every, marker: join(this.layout.run, 'results', `${lastEval.id}.json`) } } : {};
    const retention = { last, every, protect: kept, summary, maxKept, checkpointBytes: { withOptimizer: checkpointBytes, weightsOnly: params * 2 }, ...awaitEval };
    return { ...body, checkpoint: { ...checkpoint, retention } };
  }

  private poolOf(name: string) {
    const pool = this.r.pools[name];
    // lint reports unknown pools; a programmatic caller that skipped it gets the same message.
    if (!pool) throw new RecipeError([error('pools', `no pool '${name}'`)]);
    return pool;
  }

  size(stage: { pool: string; nodes?: number | undefined; gpusPerNode?: number | undefined }) {
    const pool = this.poolOf(stage.pool);
    return { pool, nodes: stage.nodes ?? pool.nodes, gpusPerNode: stage.gpusPerNode ?? pool.gpusPerNode };
  }

  localCtx(stepId: string, env: Record<string, string>, stage: LocalStage, dataParallel = false): local.LocalContext {
    const base = { python: this.python, projectRoot: this.root, precision: this.r.precision, fp8BlockSize: this.r.fp8BlockSize, stepDir: this.layout.stepDir(stepId), env };
    const { pool, nodes, gpusPerNode } = this.size(stage);
    if (!(dataParallel && distributedLauncher(pool))) return { ...base, gpus: Math.min(1, gpusPerNode), nodes: 1 };
    const ranks = poolRanks(pool, gpusPerNode);
    const jobName = slurmJobName(this.runId, stepId);
    return {
      ...base,
      gpus: Math.min(ranks, gpusPerNode),
      nodes,
      launch: torchLaunch(this.r.software, pool, nodes, ranks, jobName, this.root),
      tracking: slurmTracking(this.r.software, pool, jobName),
    };
  }

  archFor(override: Partial<Arch> | undefined): Arch {
    return { ...this.r.model.arch, ...override };
  }

  private cpt(): Lineage | null {
    const cpt = this.r.cpt;
    if (!cpt) return null;
    const decayRoot = this.layout.checkpoints('cpt.decay');
    const phases = cptLineage(cpt, { cptRoot: this.layout.cptRoot, decayRoot, base: this.r.model.base }, this.opts.fork);
    let prev: string | null = null;
    for (const phase of phases) {
      // Boundaries: the ends of the phases that save into this phase's root (warmup and stable share one). The
      // root's bound counts every iteration saved there, by either phase: one directory, one policy, one bound.
      const sharing = phases.filter((p) => p.saveDir === phase.saveDir);
      const protect = sharing.map((p) => p.end);
      const span = Math.max(...sharing.map((p) => p.end)) - Math.min(...sharing.map((p) => p.start));
      const reads = phase.first.load !== phase.saveDir && typeof phase.first.ckptStep === 'number' ? [{ dir: phase.first.load, iteration: phase.first.ckptStep }] : [];
      const evals = this.checkpointEvalSpec(phase.id, cpt.evalEvery, phase.saveDir, undefined);
      const body = this.withRetention(BUILD.cpt[cpt.backend](this, { phase, cpt }), cpt.keep, protect, span, cpt.saveInterval, this.r.model.arch, reads, evals);
      this.add(phase.id, 'cpt', cpt.backend, cpt, [prev], body, evals);
      prev = phase.id;
    }
    const decay = phases[phases.length - 1]!;
    return { root: decay.saveDir, iteration: decay.end, stepId: decay.id };
  }

  private sft(from: Lineage | null): Lineage | null {
    let last = from;
    for (const [i, st] of (this.r.sft ?? []).entries()) {
      const id = `sft.stage${i + 1}`;
      const refLoad = st.refLoad ?? last?.root;
      const steps = sftSteps(st);
      if (!refLoad) throw new RecipeError([error(`sft.${i}.refLoad`, 'nothing to start from: add a cpt stage, set model.base or refLoad')]);
      if (steps === undefined) throw new RecipeError([error(`sft.${i}.samples`, 'required: the number of rows in the data file')]);
      const saveDir = this.layout.checkpoints(id);
      const dependsOn = st.refLoad ? [] : [last?.stepId ?? null];
      const body = BUILD.sft[st.backend](this, { id, stage: st, refLoad, saveDir, steps });
      const evals = this.checkpointEvalSpec(id, st.evalEvery, saveDir, st.arch);
      this.add(id, 'sft', st.backend, st, dependsOn, this.withRetention(body, st.keep, [lastCheckpoint(st.backend, steps)], steps, st.saveInterval, this.archFor(st.arch), [], evals), evals);
      last = { root: saveDir, iteration: lastCheckpoint(st.backend, steps), stepId: id };
    }
    return last;
  }

  /**
   * Export a torch_dist checkpoint to HF. `vocab`: the exported model's vocabulary as its stage's model
   * arguments say (slime's model script for SFT/RL), unless convert.vocabSize says otherwise.
   */
  private hfExport(id: string, from: Lineage, outDir: string, what: string, arch: Partial<Arch> | undefined): void {
    const c = this.r.convert!;
    if (from.iteration === 'release') throw new RecipeError([error('convert', 'nothing to export: add an sft or cpt stage')]);
    const iterDir = join(from.root, iterDirName(from.iteration));
    const body = BUILD.hfExport[c.backend](this, { id, convert: c, iterDir, outDir, what, arch });
    this.add(id, 'convert', c.backend, c, [from.stepId], body);
  }

  private convert(from: Lineage | null): { hf: HfModel; fp8: HfModel | null } | null {
    const c = this.r.convert;
    if (!c) return null;
    if (!from) throw new RecipeError([error('convert', 'nothing to export: add an sft or cpt stage')]);
    const hf = { dir: join(this.layout.stepDir('convert.hf'), 'hf'), stepId: 'convert.hf' };
    const lastSft = this.r.sft?.[this.r.sft.length - 1];
    this.hfExport('convert.hf', from, hf.dir, `the final ${from.stepId ?? 'base'} checkpoint`, lastSft?.arch);
    if (!fp8Enabled(this.r)) return { hf, fp8: null };
    const fp8 = { dir: join(this.layout.stepDir('convert.fp8'), 'hf'), stepId: 'convert.fp8' };
    const body = BUILD.fp8Cast[c.backend](this, { convert: c, inDir: hf.dir, outDir: fp8.dir });
    this.add('convert.fp8', 'convert', c.backend, c, ['convert.hf'], body);
    return { hf, fp8 };
  }

  private rl(from: Lineage | null, exported: { hf: HfModel; fp8: HfModel | null } | null): Lineage | null {
    const rl = this.r.rl;
    if (!rl) return null;
    // InfiR2 rolls out with the FP8 export (HF_CHECKPOINT) and trains from the SFT checkpoint (REF_LOAD).
    const hf: HfModel = rl.hfCheckpoint
      ? { dir: rl.hfCheckpoint, stepId: null }
      : (this.r.precision === 'fp8' ? exported?.fp8 : null) ?? exported?.hf ?? { dir: this.r.model.hf ?? '', stepId: null };
    let last: Lineage | null = rl.refLoad ? { root: rl.refLoad, iteration: 'release', stepId: null } : from;
    if (!last) throw new RecipeError([error('rl.refLoad', 'nothing to start from: add an sft or cpt stage, set model.base or rl.refLoad')]);
    for (const [i, k] of rl.curriculum.entries()) {
      const id = `rl.stage${i + 1}`;
      const saveDir = this.layout.checkpoints(id);
      const dependsOn = [last.stepId, hf.stepId];
      const body = BUILD.rl[rl.backend](this, { id, rl, curriculum: k, hfCheckpoint: hf.dir, refLoad: last.root, saveDir });
      const evals = this.checkpointEvalSpec(id, rl.evalEvery, saveDir, rl.arch);
      this.add(id, 'rl', rl.backend, rl, dependsOn, this.withRetention(body, rl.keep, [lastCheckpoint(rl.backend, k.rollouts)], k.rollouts, rl.saveInterval, this.archFor(rl.arch), [], evals), evals);
      last = { root: saveDir, iteration: lastCheckpoint(rl.backend, k.rollouts), stepId: id };
    }
    return last;
  }

  private eval(exported: { hf: HfModel; fp8: HfModel | null } | null, rl: Lineage | null): void {
    const ev = this.r.eval;
    if (!ev) return;
    const models: EvalModel[] = ev.models ?? [rl ? 'rl' : exported?.fp8 ? 'fp8' : exported ? 'hf' : 'base'];
    const benchmarks = Object.entries(ev.benchmarks);
    let index = 0;
    for (const m of models) {
      const model = this.evalModel(m, exported, rl);
      for (const [name, b] of benchmarks) {
        const id = models.length > 1 ? `eval.${m}.${name}` : `eval.${name}`;
        const what = EVAL_MODEL_NAMES[m];
        const body = BUILD.eval[ev.backend](this, { id, eval: ev, model: m, name, benchmark: b, modelDir: model.dir, what, index });
        this.add(id, 'eval', ev.backend, ev, [model.stepId], body);
        index++;
      }
    }
  }

  /** The HF directory of an evaluated model; the final RL checkpoint is exported first (convert.rl). */
  private evalModel(m: EvalModel, exported: { hf: HfModel; fp8: HfModel | null } | null, rl: Lineage | null): HfModel {
    const missing = (what: string) => new RecipeError([error('eval.models', `'${m}' needs ${what}`)]);
    switch (m) {
      case 'base':
        if (!this.r.model.hf) throw missing('model.hf');
        return { dir: this.r.model.hf, stepId: null };
      case 'hf':
        if (!exported) throw missing('a convert stage');
        return exported.hf;
      case 'fp8':
        if (!exported?.fp8) throw missing('convert.fp8 enabled');
        return exported.fp8;
      case 'rl': {
        if (!rl || !this.r.convert) throw missing('an rl and a convert stage');
        const dir = join(this.layout.stepDir('convert.rl'), 'hf');
        if (!this.steps.some((s) => s.id === 'convert.rl')) this.hfExport('convert.rl', rl, dir, `the final ${rl.stepId} checkpoint`, this.r.rl?.arch);
        return { dir, stepId: 'convert.rl' };
      }
    }
  }
}

/** What a stage says about where and how long its steps run. */
type StageLimits = { pool: string; retries: Omit<RetryBudgets, 'config'>; stallTimeout: number; attemptTimeout: number; secrets?: Record<string, string> } & AdaptiveStall;
