/** `infir2 status <run> [--json]`: per-step status, iteration/total, loss, last complete checkpoint, attempts. */
import { parseVerbArgs, positionals, type Options } from './args.js';
import { renderStatusTable } from './status-view.js';
import { connectClient } from '../temporal/connection.js';
import { resolveRun, runStatus } from '../temporal/runs.js';

export const USAGE = 'infir2 status <run> [--json]';
export const OPTIONS = { json: { type: 'boolean' } } satisfies Options;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals: pos } = parseVerbArgs('status', argv, OPTIONS, USAGE);
  const [ref] = positionals('status', pos, ['run'], USAGE);
  const { client, connection } = await connectClient();
  try {
    const r = await resolveRun(client, ref!);
    const st = await runStatus(client, r, false);
    process.stdout.write(values.json ? JSON.stringify({ workflowId: r.workflowId, ...st }, null, 2) + '\n' : renderStatusTable(r.workflowId, st) + '\n');
    return 0;
  } finally {
    await connection.close();
  }
}
