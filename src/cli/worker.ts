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
  // The SDK stops the worker on these signals itself; this only remembers which one came, for the last line.
  let signal: string | null = null;
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGQUIT', 'SIGUSR2'] as const) process.once(sig, () => (signal ??= sig));
  const started = Date.now();
  const end = await runPoolWorker({
    taskQueues: queues,
    orchestrator: !values['no-workflows'],
    gpus,
    slots: values.slots ? intFlag('slots', values.slots, 1) : undefined,
    killGraceMs: values['kill-grace'] ? intFlag('kill-grace', values['kill-grace'], 30) * 1000 : undefined,
  });
  process.stderr.write(`${stoppedLine(end ? `its server became another cluster` : signal ? `${signal} received` : 'it was shut down', Date.now() - started)}\n`);
  // Stopped because its server became another cluster: a supervisor that restarts it must not think all is well.
  return end ? 1 : 0;
}

function parseGpus(raw: string): string[] {
  const ids = raw.split(',').map((s) => s.trim()).filter(Boolean);
  for (const id of ids) if (!/^\d+$/.test(id)) throw new UsageError(`--gpus: expected a comma-separated list of GPU indices, got '${raw}'`);
  return ids;
}

/** The worker's last line: why it stopped and how long it ran. Its running steps were stopped on the way out. */
export function stoppedLine(why: string, ranMs: number): string {
  const sec = Math.round(ranMs / 1000);
  const ran = sec < 120 ? `${sec} s` : sec < 7200 ? `${Math.round(sec / 60)} min` : `${(sec / 3600).toFixed(1)} h`;
  return `${new Date().toISOString()} worker stopped (pid ${process.pid}, ran ${ran}): ${why}; it polls no more; a step it was running was stopped (its trainer sent SIGTERM, given the kill grace) and resumes on a worker of its pool`;
}
