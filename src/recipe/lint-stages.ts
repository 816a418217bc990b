/**
 * Lint, part 1: each stage on its own — that there is something to run, where it runs (pools, launchers, GPUs),
 * its CPT schedule, its parallelism and the arguments it may not override. `lint.ts` adds the checks of what
 * passes between stages and runs them all.
 */
import { cptBoundaries, poolRanks } from './derived.js';
import { error, warning, type Issue } from './issues.js';
import { didYouMean } from './suggest.js';
import type { Recipe } from './schema.js';

/** One check: every problem it finds in a recipe. */
export type Check = (r: Recipe) => Issue[];

/** A stage as the pool and launcher checks see it. */
interface StageRef {
  path: string;
  pool: string;
  backend: string;
  nodes?: number | undefined;
  gpusPerNode?: number | undefined;
  extraArgs: string[];
  env: Record<string, string>;
  secrets: Record<string, string>;
  attemptTimeout: number;
  startupTimeout?: number;
}

function stageRefs(r: Recipe): StageRef[] {
  const refs: StageRef[] = [];
  if (r.cpt) refs.push({ path: 'cpt', ...r.cpt });
  (r.sft ?? []).forEach((s, i) => refs.push({ path: `sft.${i}`, ...s }));
  if (r.convert) refs.push({ path: 'convert', ...r.convert });
  if (r.rl) refs.push({ path: 'rl', ...r.rl });
  if (r.eval) refs.push({ path: 'eval', ...r.eval });
  return refs;
}

/** Backends that only run on GPUs. */
const GPU_BACKENDS = new Set(['megatron', 'slime', 'evalscope']);
/** The launchers each backend can be started with. */
const LAUNCHERS_OF: Record<string, readonly string[]> = {
  megatron: ['torchrun', 'slurm', 'local'],
  slime: ['ray'],
  // The local trainer's pretraining runs data-parallel under torchrun or srun + torchrun.
  local: ['local', 'torchrun', 'slurm'],
};

const somethingToDo: Check = (r) =>
  stageRefs(r).length === 0 ? [error('(recipe)', 'no stages: add at least one of cpt, sft, convert, rl, eval')] : [];

const pools: Check = (r) => {
  const out: Issue[] = [];
  const names = Object.keys(r.pools);
  for (const s of stageRefs(r)) {
    const pool = r.pools[s.pool];
    if (!pool) {
      out.push(error(`${s.path}.pool`, `no pool '${s.pool}' in pools${didYouMean(s.pool, names) || `; defined: ${names.join(', ') || 'none'}`}`));
      continue;
    }
    if (s.nodes !== undefined && s.nodes > pool.nodes) {
      out.push(error(`${s.path}.nodes`, `${s.nodes} nodes, but pool '${s.pool}' has ${pool.nodes}: lower it or grow pools.${s.pool}.nodes`));
    }
    if (s.gpusPerNode !== undefined && s.gpusPerNode > pool.gpusPerNode) {
      out.push(error(`${s.path}.gpusPerNode`, `${s.gpusPerNode} GPUs per node, but pool '${s.pool}' has ${pool.gpusPerNode}`));
    }
    if (GPU_BACKENDS.has(s.backend) && (s.gpusPerNode ?? pool.gpusPerNode) === 0) {
      out.push(error(`${s.path}.pool`, `the ${s.backend} backend needs GPUs, but pool '${s.pool}' has gpusPerNode 0`));
    }
    const allowed = LAUNCHERS_OF[s.backend];
    if (allowed && !allowed.includes(pool.launcher)) {
      out.push(error(`${s.path}.pool`, `the ${s.backend} backend cannot start on a '${pool.launcher}' pool: give it a pool with launcher ${allowed.join(' or ')}`));
    }
    const nodes = s.nodes ?? pool.nodes;
    const distributed = s.backend === 'megatron' || (s.backend === 'local' && s.path === 'cpt');
    if (s.backend === 'local' && s.path !== 'cpt' && (pool.launcher === 'torchrun' || pool.launcher === 'slurm')) {
      out.push(warning(`${s.path}.pool`, `the local trainer is data-parallel in pretraining only: this stage runs as one process on pool '${s.pool}' (launcher ${pool.launcher})`));
    }
    if (distributed && nodes > 1 && pool.launcher !== 'slurm') {
      out.push(error(`${s.path}.nodes`, `${nodes} nodes need the same torchrun on every node; infir2 starts one command from the pool's head worker: use a pool with launcher: slurm (srun starts torchrun on each node)`));
    }
    if (distributed && nodes > 1 && pool.launcher === 'slurm' && pool.rdzvEndpoint.startsWith('localhost:')) {
      out.push(error(`pools.${s.pool}.rdzvEndpoint`, `is ${pool.rdzvEndpoint}; a ${nodes}-node rendezvous needs the head node's host:port`));
    }
  }
  return out;
};

const cptSchedule: Check = (r) => {
  const c = r.cpt;
  if (!c) return [];
  const out: Issue[] = [];
  const b = cptBoundaries(c);
  if (c.warmupIters + c.decayIters >= c.iterations) {
    out.push(error('cpt.decayIters', `warmupIters (${c.warmupIters}) + decayIters (${c.decayIters}) must be less than iterations (${c.iterations}) so that a stable phase remains`));
    return out;
  }
  const phases = [
    ...(b.warmupEnd > 0 ? [{ name: 'warmup', start: 0, end: b.warmupEnd }] : []),
    { name: 'stable', start: b.warmupEnd, end: b.stableEnd },
    { name: 'decay', start: b.stableEnd, end: b.end },
  ];
  for (const p of phases) {
    if (p.end - p.start < c.saveInterval) {
      out.push(warning('cpt.saveInterval', `${c.saveInterval} is longer than the ${p.name} phase (${p.end - p.start} iterations): it saves only at its end, so a crash restarts it from iteration ${p.start}`));
    } else if (p.end % c.saveInterval !== 0 && p.name !== 'decay') {
      out.push(warning('cpt.saveInterval', `${c.saveInterval} does not divide the ${p.name} boundary ${p.end}; the boundary checkpoint is still written (the phase exits there), but forks can only start from multiples of ${c.saveInterval}`));
    }
  }
  if (c.seqLength > r.model.arch.maxContext) {
    out.push(error('cpt.seqLength', `${c.seqLength} exceeds model.arch.maxContext (${r.model.arch.maxContext})`));
  }
  if (c.backend === 'megatron' && !r.model.base) {
    out.push(warning('model.base', 'not set: CPT starts from random weights; set it to the base model as a torch_dist checkpoint root'));
  }
  if (c.backend === 'megatron' && c.profile) {
    out.push(warning('cpt.profile', `on, as in the InfiR2 scripts: with logInterval ${c.logInterval} Megatron also writes a CUDA memory snapshot every iteration (docs/infir2-recipe.md §7); set cpt.profile: false unless you are profiling`));
  }
  if (c.backend === 'megatron' && c.data.match(/\.(bin|idx)$/)) {
    out.push(error('cpt.data', `Megatron takes the indexed-dataset prefix: drop the .${c.data.slice(-3)} extension`));
  }
  if (c.backend === 'local' && !c.data.endsWith('.jsonl')) {
    out.push(error('cpt.data', 'the local trainer reads a .jsonl file of {"text": ...} rows'));
  }
  return out;
};

/** Megatron's data-parallel arithmetic: TP×PP×CP divides the GPUs, and DP×micro-batch divides the global batch. */
const parallelism: Check = (r) => {
  const out: Issue[] = [];
  const check = (path: string, backend: string, poolName: string, nodes: number | undefined, gpus: number | undefined, p: { tensor: number; pipeline: number; context: number }, gbs?: number, mbs?: number) => {
    const pool = r.pools[poolName];
    if (!pool || backend === 'local') return;
    const world = (nodes ?? pool.nodes) * (gpus ?? pool.gpusPerNode);
    const mp = p.tensor * p.pipeline * p.context;
    if (world === 0) return;
    if (world % mp !== 0) {
      out.push(error(`${path}.parallel`, `tensor × pipeline × context = ${mp} does not divide the ${world} GPUs of this stage`));
      return;
    }
    const dp = world / mp;
    if (gbs !== undefined && mbs !== undefined && gbs % (dp * mbs) !== 0) {
      out.push(error(`${path}.globalBatchSize`, `${gbs} is not a multiple of data-parallel size (${dp}) × microBatchSize (${mbs})`));
    }
  };
  if (r.cpt) check('cpt', r.cpt.backend, r.cpt.pool, r.cpt.nodes, r.cpt.gpusPerNode, r.cpt.parallel, r.cpt.globalBatchSize, r.cpt.microBatchSize);
  (r.sft ?? []).forEach((s, i) => check(`sft.${i}`, s.backend, s.pool, s.nodes, s.gpusPerNode, s.parallel));
  if (r.rl) check('rl', r.rl.backend, r.rl.pool, r.rl.nodes, r.rl.gpusPerNode, r.rl.parallel);
  return out;
};

/** A pool's ranks: at most one per GPU on a GPU pool (one process per device, as NCCL requires). */
const ranks: Check = (r) =>
  Object.entries(r.pools)
    .filter(([, p]) => p.ranksPerNode !== undefined && p.gpusPerNode > 0 && p.ranksPerNode > p.gpusPerNode)
    .map(([name, p]) => error(`pools.${name}.ranksPerNode`, `${p.ranksPerNode} ranks on ${p.gpusPerNode} GPUs per node: expected at most one rank per GPU (${p.gpusPerNode})`));

/** The local trainer's data parallelism: every rank takes whole micro-batches of each global batch. */
const localDataParallel: Check = (r) => {
  const c = r.cpt;
  const pool = c && r.pools[c.pool];
  if (!c || !pool || c.backend !== 'local' || !(pool.launcher === 'torchrun' || pool.launcher === 'slurm')) return [];
  const world = (c.nodes ?? pool.nodes) * poolRanks(pool, c.gpusPerNode ?? pool.gpusPerNode);
  if (c.globalBatchSize % (world * c.microBatchSize) === 0) return [];
  return [error('cpt.globalBatchSize', `${c.globalBatchSize} is not a multiple of ranks (${world}) × microBatchSize (${c.microBatchSize}): the ranks cannot share each global batch equally`)];
};

/** Flags whose value infir2 manages (the checkpoint lineage), and flags that break resuming. */
const MANAGED = ['--load', '--save', '--ref-load', '--ckpt-step', '--pretrained-checkpoint', '--start-rollout-id', '--exit-interval', '--train-iters', '--hf-checkpoint'];
const RESETS = ['--no-load-optim', '--no-load-rng', '--finetune'];

const extraArgs: Check = (r) => {
  const out: Issue[] = [];
  for (const s of stageRefs(r)) {
    s.extraArgs.forEach((arg, j) => {
      const flag = arg.split('=')[0]!;
      const at = `${s.path}.extraArgs.${j}`;
      if (RESETS.includes(flag) && s.path !== 'eval' && s.path !== 'convert') {
        out.push(error(at, `${flag} drops the optimizer/scheduler (or RNG) state every time the stage resumes, so a crash replays warmup and resets Adam (the InfiR2 scripts' defect, docs/infir2-recipe.md §3.2): remove it; infir2 resumes with the full state`));
      } else if (MANAGED.includes(flag) && (s.path === 'cpt' || s.path.startsWith('sft') || s.path === 'rl')) {
        out.push(error(at, `${flag} is set by infir2 to keep one checkpoint lineage across phases and resumes; remove it (pick a decay start with \`infir2 fork --from-iteration N\`, initial weights with refLoad)`));
      } else if ((flag === '--rdzv-endpoint' || flag === '--rdzv_endpoint') && s.backend === 'slime') {
        out.push(error(at, `${flag} is not a slime argument (slime rejects unknown arguments, docs/infir2-recipe.md §7); Ray places the processes`));
      }
    });
  }
  return out;
};

/** A variable is a secret or a plain value, never both: the plain value would travel in history after all. */
const secrets: Check = (r) =>
  stageRefs(r).flatMap((s) =>
    Object.keys(s.secrets)
      .filter((name) => name in s.env)
      .map((name) => error(`${s.path}.secrets.${name}`, `${name} is also set in ${s.path}.env, whose values travel in the plan and the run's history: keep it in secrets only`)),
  );

/** An attempt must be able to get past its startup: a startup limit beyond the attempt's own limit never applies. */
const startup: Check = (r) =>
  stageRefs(r)
    .filter((s) => s.startupTimeout !== undefined && s.startupTimeout > s.attemptTimeout)
    .map((s) => error(`${s.path}.startupTimeout`, `${s.startupTimeout}s is longer than ${s.path}.attemptTimeout (${s.attemptTimeout}s): expected at most the attempt timeout`));

/** The checks of this file, in the order their messages are printed. */
export const STAGE_CHECKS: Check[] = [somethingToDo, pools, ranks, cptSchedule, parallelism, localDataParallel, extraArgs, secrets, startup];
