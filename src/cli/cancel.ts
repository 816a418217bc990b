/** `infir2 cancel <run>`: cancel the run; its steps' supervisors stop every training process. */
import { parseVerbArgs, positionals, type Options } from './args.js';
import { connectClient } from '../temporal/connection.js';
import { resolveRun } from '../temporal/runs.js';

export const USAGE = 'infir2 cancel <run> [--no-wait]';
export const OPTIONS = { 'no-wait': { type: 'boolean' } } satisfies Options;
/** The supervisors SIGTERM the trainers (which save), then SIGKILL after their grace. */
const WAIT_MS = 120_000;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals: pos } = parseVerbArgs('cancel', argv, OPTIONS, USAGE);
  const [ref] = positionals('cancel', pos, ['run'], USAGE);
  const { client, connection } = await connectClient();
  try {
    const r = await resolveRun(client, ref!);
    const d = await r.handle.describe();
    if (d.status.name !== 'RUNNING') {
      process.stdout.write(`${r.workflowId} is not running (${d.status.name.toLowerCase()}); nothing to cancel\n`);
      return 0;
    }
    await r.handle.cancel();
    process.stdout.write(`cancel requested for ${r.workflowId}\n`);
    if (values['no-wait']) return 0;
    const deadline = Date.now() + WAIT_MS;
    while (Date.now() < deadline) {
      const s = (await r.handle.describe()).status.name;
      if (s !== 'RUNNING') {
        process.stdout.write(`${r.workflowId}: ${s.toLowerCase()}; no training process of it is left\n`);
        return 0;
      }
      await new Promise((res) => setTimeout(res, 500));
    }
    process.stdout.write(`${r.workflowId} is still stopping (trainers are saving); check with: infir2 status ${r.workflowId}\n`);
    return 0;
  } finally {
    await connection.close();
  }
}
