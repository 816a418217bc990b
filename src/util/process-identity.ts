/**
 * Who a live process is, from /proc: its effective uid, its start time and its command line. Records in places
 * other users can write (the host directory is world-writable by design; a checkpoint root may be on group-shared
 * storage) name processes that infir2 then stops or waits for. Such a record is trusted only when the file's owner
 * is the process's user (nobody can write a record in root's name, and root's `down` acts on no record another
 * user wrote) and, where the record states them, the process's start time and command line are the ones recorded
 * (a pid since reused by another program matches neither).
 */
import { readFileSync } from 'node:fs';
import { liveStartTicks } from './process-group.js';

export interface ProcessFacts {
  pid: number;
  /** Effective uid: the owner of the files it creates. */
  uid: number;
  startTicks: number;
  /** argv as the kernel has it (`/proc/<pid>/cmdline`). */
  cmdline: string[];
}

/** The facts of a live (not zombie) process, or null when there is none at `pid` or /proc cannot say. */
export function processFacts(pid: number): ProcessFacts | null {
  if (!Number.isInteger(pid) || pid <= 0) return null;
  const startTicks = liveStartTicks(pid);
  if (startTicks === null) return null;
  try {
    const uid = Number(/^Uid:\s+\d+\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    if (cmdline.at(-1) === '') cmdline.pop();
    return Number.isInteger(uid) ? { pid, uid, startTicks, cmdline } : null;
  } catch {
    return null;
  }
}

export const euid = (): number | null => process.geteuid?.() ?? null;

/**
 * Why a record owned by `fileUid` that names `pid` (with the start time and command line it states, where it
 * states them) must not be acted on, or null when it may. `null` facts: no such live process (the record is stale,
 * which is the caller's to handle).
 */
export function identityProblem(facts: ProcessFacts, fileUid: number, stated: { startTicks?: number | null; cmdline?: string[] | null }): string | null {
  if (facts.uid !== fileUid) return `written by uid ${fileUid}, but pid ${facts.pid} runs as uid ${facts.uid}`;
  if (stated.startTicks != null && stated.startTicks !== facts.startTicks) return `pid ${facts.pid} is another process now (started later)`;
  if (stated.cmdline && stated.cmdline.join('\0') !== facts.cmdline.join('\0')) {
    return `pid ${facts.pid} runs \`${facts.cmdline.join(' ').slice(0, 120)}\`, not the recorded \`${stated.cmdline.join(' ').slice(0, 120)}\``;
  }
  return null;
}
