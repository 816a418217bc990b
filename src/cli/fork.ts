/**
 * `infir2 fork <run> --stage cpt.decay --from-iteration N [--run-id ID] [--set k=v]...`: a new run whose decay
 * (and everything after it) starts from stable checkpoint N of the source run. The source run's files are only
 * read: the decay loads `--load <source cpt root> --ckpt-step N` and saves into the new run's directory.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseVerbArgs, positionals, type Options } from './args.js';
import { UsageError } from '../errors.js';
import { loadCompiled } from './recipe-input.js';
import { checkRunId, startRun } from './run.js';
import { inspectCheckpointDir } from '../rundir/checkpoints.js';
import { deletions } from '../rundir/retention.js';
import { connectClient } from '../temporal/connection.js';
import { resolveRun, startedPlan } from '../temporal/runs.js';

export const USAGE = 'infir2 fork <run> --stage cpt.decay --from-iteration N [--run-id ID] [--set key=value]... [--detach]';
export const OPTIONS = {
  stage: { type: 'string' },
  'from-iteration': { type: 'string' },
  'run-id': { type: 'string' },
  set: { type: 'string', multiple: true },
  detach: { type: 'boolean' },
} satisfies Options;
/** The only stage a fork can start at today: the decay of the CPT lineage. */
const FORKABLE = 'cpt.decay';

export async function run(argv: string[]): Promise<number> {
  const { values, positionals: pos } = parseVerbArgs('fork', argv, OPTIONS, USAGE);
  const [ref] = positionals('fork', pos, ['run'], USAGE);
  if (values.stage !== FORKABLE) throw new UsageError([`fork: --stage must be ${FORKABLE} (got ${values.stage ?? 'nothing'})`, `usage: ${USAGE}`]);
  const iteration = Number(values['from-iteration']);
  if (!Number.isInteger(iteration) || iteration <= 0) {
    throw new UsageError([`fork: --from-iteration must be a positive whole number (got ${values['from-iteration'] ?? 'nothing'})`, `usage: ${USAGE}`]);
  }
  const { client, connection } = await connectClient();
  try {
    const src = await resolveRun(client, ref!);
    const srcPlan = await startedPlan(src);
    const stable = srcPlan.steps.find((s) => s.id === 'cpt.stable');
    if (!stable?.checkpoint) throw new UsageError(`${src.workflowId} has no cpt.stable step to fork from`);
    const insp = inspectCheckpointDir(stable.checkpoint.dir);
    if (!insp.complete.includes(iteration)) {
      const gone = deletions(stable.checkpoint.dir).find((d) => d.iteration === iteration);
      const why = gone ? `checkpoint ${iteration} was deleted by the run's retention policy (${gone.policy}) at ${gone.deletedAt}` : `${stable.checkpoint.dir} has no complete checkpoint ${iteration}`;
      throw new UsageError(`--from-iteration: ${why} (complete: ${insp.complete.join(', ') || 'none'})`);
    }
    const recipeFile = join(srcPlan.runDir, 'recipe.json');
    if (!existsSync(recipeFile)) throw new UsageError(`${src.workflowId}: its resolved recipe ${recipeFile} is missing`);
    const runId = checkRunId(values['run-id'] ?? `${srcPlan.runId}-fork${iteration}`);
    const compiled = await loadCompiled(recipeFile, {
      sets: values.set ?? [],
      runId,
      fork: { sourceCheckpointDir: stable.checkpoint.dir, iteration },
    });
    const note = `forked from \`${src.workflowId}\`: cpt.decay starts from stable checkpoint ${iteration} of \`${stable.checkpoint.dir}\``;
    const origin = { source: compiled.source, sets: values.set ?? [], cwd: process.cwd() };
    return await startRun(client, compiled.plan, compiled.recipe, { detach: values.detach ?? false, note, origin });
  } finally {
    await connection.close();
  }
}
