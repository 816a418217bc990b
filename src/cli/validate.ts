/**
 * `infir2 validate <recipe> [--set key=value]...`: exit 0 when the recipe is valid (warnings on stderr), exit 2
 * with one `error: <yaml.path>: <problem>` line per problem. Reads no network, needs no GPU.
 */
import { parseVerbArgs, positionals, type Options } from './args.js';
import { loadCompiled } from './recipe-input.js';

export const USAGE = 'infir2 validate <recipe> [--set key=value]...';
export const OPTIONS = { set: { type: 'string', multiple: true } } satisfies Options;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals: pos } = parseVerbArgs('validate', argv, OPTIONS, USAGE);
  const [ref] = positionals('validate', pos, ['recipe'], USAGE);
  const { plan, source, warnings } = await loadCompiled(ref!, { sets: values.set ?? [], runId: 'validate' });
  const note = warnings.length ? ` (${warnings.length} warning${warnings.length > 1 ? 's' : ''})` : '';
  process.stdout.write(`ok: ${source}: recipe '${plan.recipe}' is valid, ${plan.steps.length} steps${note}\n`);
  return 0;
}
