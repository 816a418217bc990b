/** `infir2 list [--json] [--recipe NAME]`: runs, newest first, with their status and the stages running now. */
import { intFlag, parseVerbArgs, positionals, type Options } from './args.js';
import { table } from './status-view.js';
import { SA } from '../temporal/constants.js';
import { connectClient } from '../temporal/connection.js';

export const USAGE = 'infir2 list [--json] [--recipe NAME] [--limit N]';
export const OPTIONS = {
  json: { type: 'boolean' },
  recipe: { type: 'string' },
  limit: { type: 'string', default: '50' },
} satisfies Options;

export interface RunListing {
  workflowId: string;
  recipe: string | null;
  runId: string | null;
  precision: string | null;
  status: string;
  stages: string[];
  startTime: string;
  closeTime: string | null;
}

export async function run(argv: string[]): Promise<number> {
  const { values, positionals: pos } = parseVerbArgs('list', argv, OPTIONS, USAGE);
  positionals('list', pos, [], USAGE);
  const limit = intFlag('limit', values.limit, 50);
  const { client, connection } = await connectClient();
  try {
    // A run that continued as new is listed once: its open execution (or its last).
    const clauses = [`WorkflowType = 'recipeRun'`, `ExecutionStatus != 'ContinuedAsNew'`];
    if (values.recipe) clauses.push(`RecipeName = '${values.recipe.replace(/'/g, '')}'`);
    const runs: RunListing[] = [];
    for await (const wf of client.workflow.list({ query: clauses.join(' AND '), pageSize: limit })) {
      const sa = wf.typedSearchAttributes;
      runs.push({
        workflowId: wf.workflowId,
        recipe: sa.get(SA.recipeName) ?? null,
        runId: sa.get(SA.runId) ?? null,
        precision: sa.get(SA.precision) ?? null,
        status: wf.status.name.toLowerCase(),
        stages: sa.get(SA.stage) ?? [],
        startTime: wf.startTime.toISOString(),
        closeTime: wf.closeTime?.toISOString() ?? null,
      });
      if (runs.length >= limit) break;
    }
    if (values.json) {
      process.stdout.write(JSON.stringify(runs, null, 2) + '\n');
    } else if (!runs.length) {
      process.stdout.write('no runs yet: start one with `infir2 run recipes/tiny.yaml`\n');
    } else {
      const rows = [['RUN', 'STATUS', 'STAGES', 'PRECISION', 'STARTED'], ...runs.map((r) => [r.workflowId, r.status, r.stages.join(',') || '-', r.precision ?? '-', r.startTime.replace('T', ' ').slice(0, 19)])];
      process.stdout.write(table(rows) + '\n');
    }
    return 0;
  } finally {
    await connection.close();
  }
}
