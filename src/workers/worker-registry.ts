/**
 * The live workers of a host, one record each in the host directory: what they serve and which GPUs they were
 * given. A starting worker reads it to warn about GPUs it shares with another; `infir2 up` reads it to find the
 * workers it started (even ones its state file forgot) and to refuse to start beside a worker it did not start.
 * A record whose process is gone is stale and removed by whoever reads it.
 */
import { readdirSync, readFileSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../util/atomic-write.js';
import { hostSubdir, processAlive, thisProcess, type ProcessId } from '../util/host-dir.js';

export interface WorkerRecord extends ProcessId {
  /** The Temporal server's address and namespace the worker serves. */
  address: string;
  namespace: string;
  /** Task queues of its pools (the orchestrator queue not included). */
  taskQueues: string[];
  orchestrator: boolean;
  gpus: string[];
  /** The state directory of the `infir2 up` that started it (INFIR2_STARTED_BY), or null. */
  startedBy: string | null;
  startedAt: string;
}

/** The environment variable `up` sets on the workers it starts. */
export const STARTED_BY_ENV = 'INFIR2_STARTED_BY';

function registryDir(): string {
  return hostSubdir('workers');
}

/** Record this worker; returns the removal (also safe to skip: a dead worker's record is swept by readers). */
export function registerWorker(r: Omit<WorkerRecord, 'pid' | 'startTicks' | 'startedAt' | 'startedBy'>): () => void {
  const me = thisProcess();
  const record: WorkerRecord = { ...me, ...r, startedBy: process.env[STARTED_BY_ENV] || null, startedAt: new Date().toISOString() };
  const file = join(registryDir(), `${me.pid}.json`);
  writeFileAtomic(file, JSON.stringify(record, null, 2));
  return () => {
    try {
      unlinkSync(file);
    } catch {
      /* already gone */
    }
  };
}

/** The host's live workers (this process included if registered); stale records are removed. */
export function liveWorkers(): WorkerRecord[] {
  const dir = registryDir();
  const out: WorkerRecord[] = [];
  for (const name of readdirSync(dir)) {
    if (!/^\d+\.json$/.test(name)) continue;
    let r: WorkerRecord;
    try {
      r = JSON.parse(readFileSync(join(dir, name), 'utf8')) as WorkerRecord;
    } catch {
      continue;
    }
    if (processAlive(r)) out.push(r);
    else {
      try {
        unlinkSync(join(dir, name));
      } catch {
        /* swept by another reader */
      }
    }
  }
  return out.sort((a, b) => a.pid - b.pid);
}

/** Warnings for a worker about to start with `gpus`: each other live worker given any of the same GPUs. */
export function gpuOverlapWarnings(gpus: string[], others: WorkerRecord[]): string[] {
  const mine = new Set(gpus);
  return others
    .filter((o) => o.pid !== process.pid)
    .map((o) => ({ o, shared: o.gpus.filter((g) => mine.has(g)) }))
    .filter(({ shared }) => shared.length)
    .map(
      ({ o, shared }) =>
        `warning: GPU${shared.length > 1 ? 's' : ''} ${shared.join(',')} also given to worker pid ${o.pid} (${o.taskQueues.join(', ') || 'orchestrator only'} on ${o.address}): ` +
        `each GPU still runs one trainer at a time (claims in ${hostSubdir('gpus')}); a step waits while the other worker's trainer holds it`,
    );
}
