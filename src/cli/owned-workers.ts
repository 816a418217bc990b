/**
 * The workers `infir2 up` owns: the one recorded in its state file, and any live worker whose registry record
 * says this state directory started it (one the state file forgot: written over by an `up` after the server
 * died, or lost). `up` and `down` both go through here, so that nothing `up` started is ever left running, and
 * nothing else is ever stopped: a registry record counts only when it is trusted (workers/worker-registry.ts) and
 * was written by this user (the workers `up` starts run as it); a recorded pid only while it still runs as this
 * user with the start time (or, for a state file written before start times were kept, the command line) of
 * what `up` started.
 */
import { poolTaskQueue } from '../temporal/constants.js';
import { euid, processFacts } from '../util/process-identity.js';
import { terminateGroup } from '../util/process-group.js';
import { mine, scanWorkers, type RegistryScan, type WorkerRecord } from '../workers/worker-registry.js';
import type { EmbeddedState } from './embedded.js';

/** Whether `pid` still is a process `up` started: this user's, and the same start time or, without one, a command line like `expect`. */
function stillOurs(pid: number | null | undefined, startTicks: number | null | undefined, expect: (argv: string[]) => boolean): boolean {
  const facts = pid ? processFacts(pid) : null;
  if (!facts || facts.uid !== euid()) return false;
  return startTicks != null ? facts.startTicks === startTicks : expect(facts.cmdline);
}

const isWorkerArgv = (argv: string[]) => argv.includes('worker') && argv.some((a) => /(^|\/)infir2(\.js)?$/.test(a));

/** Live pids of the workers started by the `up` of `state`, the recorded one first. */
export function ownedWorkers(state: string, recorded: EmbeddedState | null, scan: RegistryScan = scanWorkers()): number[] {
  const pids: number[] = [];
  if (recorded?.workerPid && stillOurs(recorded.workerPid, recorded.workerStartTicks, isWorkerArgv)) pids.push(recorded.workerPid);
  for (const w of scan.live) if (w.startedBy === state && mine(w) && !pids.includes(w.pid)) pids.push(w.pid);
  return pids;
}

/** Whether the dev server `up` recorded still runs (its pid not since reused by another program or user). */
export function ownServerAlive(s: EmbeddedState): boolean {
  return stillOurs(s.serverPid, s.serverStartTicks, (argv) => argv.includes('start-dev'));
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
export function foreignWorkers(state: string, address: string, pools: string[], scan: RegistryScan = scanWorkers()): WorkerRecord[] {
  const queues = new Set(pools.map(poolTaskQueue));
  return scan.live.filter((w) => w.startedBy !== state && sameAddress(w.address, address) && w.taskQueues.some((q) => queues.has(q)));
}
