/**
 * The workers `infir2 up` owns: the one recorded in its state file, and any live worker whose registry record
 * says this state directory started it (one the state file forgot: written over by an `up` after the server
 * died, or lost). `up` and `down` both go through here, so that nothing `up` started is ever left running.
 */
import { poolTaskQueue } from '../temporal/constants.js';
import { processAlive } from '../util/host-dir.js';
import { terminateGroup } from '../util/process-group.js';
import { liveWorkers, type WorkerRecord } from '../workers/worker-registry.js';
import type { EmbeddedState } from './embedded.js';

/** Live pids of the workers started by the `up` of `state`, the recorded one first. */
export function ownedWorkers(state: string, recorded: EmbeddedState | null): number[] {
  const pids: number[] = [];
  if (recorded?.workerPid && processAlive({ pid: recorded.workerPid, startTicks: recorded.workerStartTicks ?? null })) pids.push(recorded.workerPid);
  for (const w of liveWorkers()) if (w.startedBy === state && !pids.includes(w.pid)) pids.push(w.pid);
  return pids;
}

/** Stop them (each is its own process group: its trainers get SIGTERM and save); returns what was stopped. */
export async function stopWorkers(pids: number[], graceMs = 60_000): Promise<number[]> {
  await Promise.all(pids.map((pid) => terminateGroup(pid, graceMs)));
  return pids;
}

/** host:port with the loopback names made one, so that `localhost:7233` and `127.0.0.1:7233` compare equal. */
export function sameAddress(a: string, b: string): boolean {
  const norm = (s: string) => s.trim().toLowerCase().replace(/^(localhost|127\.0\.0\.1|\[::1\]|::1):/, 'loopback:');
  return norm(a) === norm(b);
}

/** Live workers `up` did not start that already serve one of `pools` at `address`. */
export function foreignWorkers(state: string, address: string, pools: string[]): WorkerRecord[] {
  const queues = new Set(pools.map(poolTaskQueue));
  return liveWorkers().filter((w) => w.startedBy !== state && sameAddress(w.address, address) && w.taskQueues.some((q) => queues.has(q)));
}
