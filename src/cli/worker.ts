/** `infir2 worker --pool NAME [--slots N] [--gpus LIST]`: serve pools (and the orchestrator queue). */
import { intFlag, parseVerbArgs, positionals, type Options } from './args.js';
import { UsageError } from '../errors.js';
import { poolTaskQueue } from '../temporal/constants.js';
import { runPoolWorker } from '../workers/pool-worker.js';

export const USAGE = 'infir2 worker --pool NAME [--pool NAME]... [--task-queue Q]... [--slots N] [--gpus 0,1,...] [--no-workflows] [--kill-grace SECONDS]';
export const OPTIONS = {
  pool: { type: 'string', multiple: true },
  'task-queue': { type: 'string', multiple: true },
  slots: { type: 'string' },
  gpus: { type: 'string' },
  'no-workflows': { type: 'boolean' },
  'kill-grace': { type: 'string' },
} satisfies Options;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals: pos } = parseVerbArgs('worker', argv, OPTIONS, USAGE);
  positionals('worker', pos, [], USAGE);
  const queues = [...(values.pool ?? []).map(poolTaskQueue), ...(values['task-queue'] ?? [])];
  if (!queues.length && values['no-workflows']) throw new UsageError(['worker: nothing to serve: give --pool NAME', `usage: ${USAGE}`]);
  const gpus = parseGpus(values.gpus ?? process.env.CUDA_VISIBLE_DEVICES ?? '');
  const end = await runPoolWorker({
    taskQueues: queues,
    orchestrator: !values['no-workflows'],
    gpus,
    slots: values.slots ? intFlag('slots', values.slots, 1) : undefined,
    killGraceMs: values['kill-grace'] ? intFlag('kill-grace', values['kill-grace'], 30) * 1000 : undefined,
  });
  // Stopped because its server became another cluster: a supervisor that restarts it must not think all is well.
  return end ? 1 : 0;
}

function parseGpus(raw: string): string[] {
  const ids = raw.split(',').map((s) => s.trim()).filter(Boolean);
  for (const id of ids) if (!/^\d+$/.test(id)) throw new UsageError(`--gpus: expected a comma-separated list of GPU indices, got '${raw}'`);
  return ids;
}
