/**
 * `infir2 plan <recipe> [--json] [--set key=value]... [--run-id ID]`: the compiled plan as a stage table, or
 * the whole Plan as JSON (what the workflow receives). Nothing is written, nothing is started.
 */
import { parseVerbArgs, positionals, type Options } from './args.js';
import { loadPlan } from './recipe-input.js';
import { formatPlanTable } from '../plan/format.js';

export const USAGE = 'infir2 plan <recipe> [--json] [--set key=value]... [--run-id ID]';
export const OPTIONS = { json: { type: 'boolean' }, set: { type: 'string', multiple: true }, 'run-id': { type: 'string' } } satisfies Options;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals: pos } = parseVerbArgs('plan', argv, OPTIONS, USAGE);
  const [ref] = positionals('plan', pos, ['recipe'], USAGE);
  const plan = await loadPlan(ref!, { sets: values.set ?? [], ...(values['run-id'] ? { runId: values['run-id'] } : {}) });
  process.stdout.write(values.json ? `${JSON.stringify(plan, null, 2)}\n` : `${formatPlanTable(plan)}\n`);
  return 0;
}
