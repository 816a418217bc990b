/**
 * `infir2 plan <recipe> [--json] [--set key=value]... [--run-id ID]`: the compiled plan as a stage table with
 * the checkpoint-interval advice under it, or the whole Plan as JSON (what the workflow receives, nothing
 * else). Nothing is written, nothing is started.
 */
import { parseVerbArgs, positionals, type Options } from './args.js';
import { formatCheckpointAdvice } from './checkpoint-advice-view.js';
import { loadCompiled } from './recipe-input.js';
import { formatPlanTable } from '../plan/format.js';
import { checkpointAdvice } from '../recipe/goodput-advice.js';

export const USAGE = 'infir2 plan <recipe> [--json] [--set key=value]... [--run-id ID]';
export const OPTIONS = { json: { type: 'boolean' }, set: { type: 'string', multiple: true }, 'run-id': { type: 'string' } } satisfies Options;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals: pos } = parseVerbArgs('plan', argv, OPTIONS, USAGE);
  const [ref] = positionals('plan', pos, ['recipe'], USAGE);
  const { plan, recipe } = await loadCompiled(ref!, { sets: values.set ?? [], ...(values['run-id'] ? { runId: values['run-id'] } : {}) });
  if (values.json) {
    process.stdout.write(`${JSON.stringify(plan, null, 2)}\n`);
    return 0;
  }
  const advice = formatCheckpointAdvice(checkpointAdvice(recipe), recipe.goodput);
  process.stdout.write(`${formatPlanTable(plan)}\n${advice ? `\n${advice}\n` : ''}`);
  return 0;
}
