/**
 * The live workers of a host, one record each in the host directory: what they serve and which GPUs they were
 * given. A starting worker reads it to warn about GPUs it shares with another; `infir2 up` and `down` read it to
 * find the workers `up` started (even ones its state file forgot), to stop them, and to refuse to start beside a
 * worker it did not start. A record whose process is gone is stale and removed by whoever reads it.
 *
 * The directory is world-writable (every local user's workers record themselves there), so a record is trusted
 * only when it is a regular file of its own (no link, no second name), its owner is the user its process runs as,
 * and the process's start time and command line are the ones it records (util/process-identity.ts). Anything else
 * is ignored and named: a record written by `nobody` naming root's process once made root's `down` kill it.
 */
import { readdirSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../util/atomic-write.js';
import { hostSubdir, type ProcessId } from '../util/host-dir.js';
import { euid, identityProblem, processFacts } from '../util/process-identity.js';
import { readFileSafe } from '../util/safe-fs.js';

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
  /** The user it runs as (the record's owner must be the same). */
  uid: number;
  /** Its command line, as /proc has it: a reader checks that the pid still runs it. */
  cmdline: string[];
}

/** The environment variable `up` sets on the workers it starts. */
export const STARTED_BY_ENV = 'INFIR2_STARTED_BY';

/** A record is a few hundred bytes; anything much larger is not one. */
const MAX_RECORD_BYTES = 64 * 1024;

function registryDir(): string {
  return hostSubdir('workers');
}

/** Record this worker; returns the removal (also safe to skip: a dead worker's record is swept by readers). */
export function registerWorker(r: Omit<WorkerRecord, 'pid' | 'startTicks' | 'startedAt' | 'startedBy' | 'uid' | 'cmdline'>): () => void {
  const me = processFacts(process.pid);
  if (!me) throw new Error('cannot read this process in /proc: the worker registry needs procfs');
  const record: WorkerRecord = {
    pid: me.pid,
    startTicks: me.startTicks,
    ...r,
    startedBy: process.env[STARTED_BY_ENV] || null,
    startedAt: new Date().toISOString(),
    uid: me.uid,
    cmdline: me.cmdline,
  };
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

export interface RegistryScan {
  /** Trusted records of live workers, by pid. */
  live: WorkerRecord[];
  /** One line per record passed over, naming the file and why (`down` and `up` print them). */
  ignored: string[];
}

const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');

/** What is missing or wrong in a parsed record, or null when it has a worker record's shape. */
function shapeProblem(r: Partial<WorkerRecord> | null, pid: number): string | null {
  if (typeof r !== 'object' || r === null) return 'not a JSON object';
  if (r.pid !== pid) return `its pid ${String(r.pid)} is not its name's ${pid}`;
  if (typeof r.startTicks !== 'number') return 'no start time (written by an infir2 before records were checked: restart that worker)';
  if (typeof r.uid !== 'number' || !isStrings(r.cmdline) || !r.cmdline.length) return 'no command line (written by an infir2 before records were checked: restart that worker)';
  if (typeof r.address !== 'string' || typeof r.namespace !== 'string' || !isStrings(r.taskQueues) || !isStrings(r.gpus)) return 'not a worker record';
  if (r.startedBy !== null && typeof r.startedBy !== 'string') return 'not a worker record';
  return null;
}

/** The host's live workers (this process included if registered), stale records removed, untrusted ones named. */
export function scanWorkers(): RegistryScan {
  const dir = registryDir();
  const out: RegistryScan = { live: [], ignored: [] };
  for (const name of readdirSync(dir)) {
    const m = /^(\d+)\.json$/.exec(name);
    if (!m) continue;
    const file = join(dir, name);
    const ignore = (why: string) => out.ignored.push(`ignored ${file}: ${why}`);
    let read;
    try {
      read = readFileSafe(file, { maxBytes: MAX_RECORD_BYTES, oneLink: true });
    } catch (err) {
      ignore(err instanceof Error ? err.message.replace(`${file} `, '') : String(err));
      continue;
    }
    if (!read) continue; // removed meanwhile
    let r: Partial<WorkerRecord> | null;
    try {
      r = JSON.parse(read.text) as Partial<WorkerRecord> | null;
    } catch {
      ignore('not JSON');
      continue;
    }
    const facts = processFacts(Number(m[1]));
    // No such process, or another one at its pid: a stale record, swept (a sticky directory lets only its owner).
    if (!facts || (typeof r?.startTicks === 'number' && r.startTicks !== facts.startTicks)) {
      try {
        unlinkSync(file);
      } catch {
        /* swept by another reader, or not ours to remove */
      }
      continue;
    }
    const why = shapeProblem(r, facts.pid) ?? identityProblem(facts, read.stat.uid, { startTicks: r!.startTicks, cmdline: r!.cmdline });
    if (why) ignore(why);
    else out.live.push(r as WorkerRecord);
  }
  out.live.sort((a, b) => a.pid - b.pid);
  return out;
}

/** The host's trusted live workers (see scanWorkers). */
export function liveWorkers(): WorkerRecord[] {
  return scanWorkers().live;
}

/** Whether a trusted record was written by this process's own user (the workers `up` starts run as its user). */
export function mine(w: WorkerRecord): boolean {
  return w.uid === euid();
}

/** Warnings for a worker about to start with `gpus`: each other live worker given any of the same GPUs. */
export function gpuOverlapWarnings(gpus: string[], others: WorkerRecord[]): string[] {
  const mineGpus = new Set(gpus);
  return others
    .filter((o) => o.pid !== process.pid)
    .map((o) => ({ o, shared: o.gpus.filter((g) => mineGpus.has(g)) }))
    .filter(({ shared }) => shared.length)
    .map(
      ({ o, shared }) =>
        `warning: GPU${shared.length > 1 ? 's' : ''} ${shared.join(',')} also given to worker pid ${o.pid} (${o.taskQueues.join(', ') || 'orchestrator only'} on ${o.address}): ` +
        `each GPU still runs one trainer at a time (claims in ${hostSubdir('gpus')}); a step waits while the other worker's trainer holds it`,
    );
}
