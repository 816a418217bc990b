/**
 * `infir2 parity <recipe> [--stage cpt] [--iterations N] [--seeds K] [--run-id ID] [--set key=value]... [--detach]`:
 * is FP8 lossless on this recipe's model and data? The first N iterations of its CPT run in BF16 and in FP8, each
 * with K seeds (plan/parity.ts), as one run; at its end, FP8's gap to BF16 is judged against BF16's own
 * seed-to-seed noise (report/parity.ts) and printed, and the run's report carries the verdict and the curves.
 * On the tiny recipe: minutes on 2 cores; on a real recipe it runs the plan's Megatron commands, a few GPU-hours.
 */
import { join } from 'node:path';
import { parseVerbArgs, positionals, type Options } from './args.js';
import { UsageError } from '../errors.js';
import { visibleLines } from '../util/visible.js';
import { mergeParityPlans, PARITY_FILE, parityVariants, type ParitySpec } from '../plan/parity.js';
import { readRunData } from '../report/run-data.js';
import { parityText, parityVerdict } from '../report/parity.js';
import { connectClient } from '../temporal/connection.js';
import { defaultRunId, loadCompiled } from './recipe-input.js';
import { checkRunId, startRun } from './run.js';

export const USAGE = 'infir2 parity <recipe> [--stage cpt] [--iterations N] [--seeds K] [--run-id ID] [--set key=value]... [--detach]';
export const OPTIONS = {
  stage: { type: 'string' },
  iterations: { type: 'string' },
  seeds: { type: 'string' },
  'run-id': { type: 'string' },
  set: { type: 'string', multiple: true },
  detach: { type: 'boolean' },
} satisfies Options;

const DEFAULT_ITERATIONS = 200;
const LATER_STAGES = ['sft', 'convert', 'rl', 'eval'];
const DEFAULT_SEEDS = 2;

function whole(flag: string, v: string | undefined, dflt: number, min: number): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new UsageError(`--${flag}: expected a whole number of at least ${min}, got '${v}'`);
  return n;
}

export async function run(argv: string[]): Promise<number> {
  const { values, positionals: pos } = parseVerbArgs('parity', argv, OPTIONS, USAGE);
  const [recipeRef] = positionals('parity', pos, ['recipe'], USAGE);
  if ((values.stage ?? 'cpt') !== 'cpt') throw new UsageError(`--stage: expected cpt (a prefix of the pre-training schedule), got '${values.stage}'`);
  const iterations = whole('iterations', values.iterations, DEFAULT_ITERATIONS, 2);
  const k = whole('seeds', values.seeds, DEFAULT_SEEDS, 2);
  const sets = values.set ?? [];
  const runId = checkRunId(values['run-id'] ?? `parity-${defaultRunId()}`);
  const base = await loadCompiled(recipeRef!, { sets, runId });
  const cpt = (base.recipe as { cpt?: { iterations: number; warmupIters: number; decayIters: number; seed: number } }).cpt;
  if (!cpt) throw new UsageError(`${recipeRef}: the recipe has no cpt stage to compare`);
  if (iterations <= cpt.warmupIters) throw new UsageError(`--iterations: ${iterations} ends inside the warmup (cpt.warmupIters=${cpt.warmupIters}): expected more, so that the stable phase is compared too`);
  // Past the stable phase's end the cut schedule (--train-iters N + decay) would decay later than the recipe does:
  // no longer a prefix of the real run.
  const stableEnd = cpt.iterations - cpt.decayIters;
  if (iterations > stableEnd) throw new UsageError(`--iterations: ${iterations} goes past the recipe's stable phase, which ends at ${stableEnd} (cpt.iterations − cpt.decayIters): expected at most ${stableEnd}`);
  const variants = parityVariants(Array.from({ length: k }, (_, i) => cpt.seed + i));
  const runDir = base.plan.runDir;
  const parts = [];
  for (const variant of variants) {
    // The recipe's own schedule, cut after N: the decay keeps its length, so --train-iters is N + decayIters and
    // the warmup and stable learning rates are the real run's.
    // The later stages are not run (and might not validate alone: an `fp8` evaluation in a BF16 recipe).
    const vsets = [...sets, ...LATER_STAGES.map((k) => `${k}=null`), `precision=${variant.precision}`, `cpt.seed=${variant.seed}`, `cpt.iterations=${iterations + cpt.decayIters}`, `runDir=${join(runDir, 'variants')}`];
    parts.push({ variant, plan: (await loadCompiled(recipeRef!, { sets: vsets, runId: variant.name, onWarning: () => undefined })).plan });
  }
  const plan = mergeParityPlans(runId, runDir, parts);
  const spec: ParitySpec = { stage: 'cpt', iterations, variants };
  const { client, connection } = await connectClient();
  let code: number;
  try {
    code = await startRun(client, plan, base.recipe, {
      detach: values.detach ?? false,
      note: `parity: CPT's first ${iterations} iterations in BF16 and FP8, seeds ${variants.filter((v) => v.precision === 'bf16').map((v) => v.seed).join(', ')}`,
      origin: { source: base.source, sets, cwd: process.cwd() },
      files: { [PARITY_FILE]: spec },
    });
  } finally {
    await connection.close();
  }
  if (!values.detach) process.stdout.write(`\n${visibleLines(parityText(parityVerdict(readRunData(runDir), spec)))}\n`);
  return code;
}
