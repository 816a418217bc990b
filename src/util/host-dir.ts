/**
 * The host-wide directory every infir2 worker on a machine shares: one claim file per GPU and one record per
 * live worker. It must be local to the host (never a shared file system: a claim's holder is told alive by its
 * pid) and shared by all workers on it (containers bind-mount it and share the host's pid namespace).
 */
import { chmodSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { makeDirs } from './dir-probe.js';
import { liveStartTicks, processStartTicks } from './process-group.js';

/** INFIR2_HOST_DIR, else `<tmp>/infir2-host`. */
export function hostDir(): string {
  return resolve(process.env.INFIR2_HOST_DIR ?? join(tmpdir(), 'infir2-host'));
}

/** `hostDir()/<sub>`, created on first use; the top is world-writable and sticky like /tmp itself. */
export function hostSubdir(sub: string): string {
  const top = hostDir();
  if (!existsSync(top)) {
    makeDirs(top);
    try {
      chmodSync(top, 0o1777);
    } catch {
      /* made by another user meanwhile */
    }
  }
  const dir = join(top, sub);
  if (!existsSync(dir)) {
    makeDirs(dir);
    // Workers of other users on the host record themselves and claim GPUs here too.
    try {
      chmodSync(dir, 0o1777);
    } catch {
      /* made by another user meanwhile */
    }
  }
  return dir;
}

/** A process, told from a later one that reused its pid by its start time. */
export interface ProcessId {
  pid: number;
  startTicks: number | null;
}

export function thisProcess(): ProcessId {
  return { pid: process.pid, startTicks: processStartTicks(process.pid) };
}

/** Whether `p` is still the same live process. */
export function processAlive(p: ProcessId): boolean {
  const ticks = liveStartTicks(p.pid);
  if (ticks === null) return false;
  return p.startTicks === null || ticks === p.startTicks;
}
