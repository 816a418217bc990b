/**
 * `infir2 validate <recipe> [--set key=value]... [--check-paths]`: exit 0 when the recipe is valid (warnings on
 * stderr), exit 2 with one `error: <yaml.path>: <problem>` line per problem. Reads no network, needs no GPU.
 * `--check-paths` also asks this machine (a worker's node, say) whether the run directory can hold a run (made
 * if need be, writable, not a pseudo file system: probed with one file that is removed again) and whether the
 * plan fits Temporal's payload limit, as `run` will.
 */
import { dirname } from 'node:path';
import { parseVerbArgs, positionals, type Options } from './args.js';
import { loadCompiled } from './recipe-input.js';
import { planPayloadProblem } from './run.js';
import { dirProblem } from '../util/dir-probe.js';
import { formatBytes, freeBytes } from '../rundir/storage.js';

export const USAGE = 'infir2 validate <recipe> [--set key=value]... [--check-paths]';
export const OPTIONS = { set: { type: 'string', multiple: true }, 'check-paths': { type: 'boolean' } } satisfies Options;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals: pos } = parseVerbArgs('validate', argv, OPTIONS, USAGE);
  const [ref] = positionals('validate', pos, ['recipe'], USAGE);
  const { plan, source, warnings } = await loadCompiled(ref!, { sets: values.set ?? [], runId: 'validate' });
  const counted = (level: string, word: string) => {
    const n = warnings.filter((w) => w.level === level).length;
    return n ? [`${n} ${word}${n > 1 ? 's' : ''}`] : [];
  };
  const counts = [...counted('warning', 'warning'), ...counted('hint', 'hint')];
  const note = counts.length ? ` (${counts.join(', ')})` : '';
  if (values['check-paths']) {
    // The runs' root: `run` adds the run id below it.
    const root = dirname(plan.runDir);
    const problems: string[] = [];
    const runDirProblem = dirProblem(plan.runDir);
    if (runDirProblem) problems.push(`runDir ${root}: ${runDirProblem}`);
    const tooBig = planPayloadProblem(plan);
    if (tooBig) problems.push(tooBig);
    if (problems.length) {
      process.stderr.write(problems.map((p) => `error: ${p}\n`).join(''));
      return 2;
    }
    const free = freeBytes(root);
    process.stdout.write(`ok: ${source}: recipe '${plan.recipe}' is valid, ${plan.steps.length} steps${note}; runDir ${root} is writable${free === null ? '' : ` (${formatBytes(free)} free)`}\n`);
    return 0;
  }
  process.stdout.write(`ok: ${source}: recipe '${plan.recipe}' is valid, ${plan.steps.length} steps${note}\n`);
  return 0;
}
