/**
 * Process groups on Linux. A trainer is spawned as the leader of its own group (execa `detached`), so that
 * torchrun's or ray's children die with it. execa 9 has no `killDescendants`, and `detached` turns off its
 * exit cleanup, so every exit path here signals the whole group itself (execa 10 added `killDescendants`, and needs Node 22).
 */
import { readdirSync, readFileSync } from 'node:fs';

/** How long a signalled group gets to save and exit before SIGKILL. */
export const DEFAULT_KILL_GRACE_MS = 30_000;

export interface ProcStat {
  pid: number;
  state: string;
  ppid: number;
  pgid: number;
  startTicks: number;
}

/** A process's /proc/<pid>/stat fields this project reads (null: gone, or no procfs). */
export function readStat(pid: number): ProcStat | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { pid, state: rest[0] ?? '?', ppid: Number(rest[1]), pgid: Number(rest[2]), startTicks: Number(rest[19]) };
  } catch {
    return null;
  }
}

/** A process that has not exited: not a zombie (Z) nor dead (X). */
export const isLive = (st: ProcStat | null): boolean => !!st && st.state !== 'Z' && st.state !== 'X';

/** Start time of a process (clock ticks since boot), to tell a live process from a reused pid. */
export function processStartTicks(pid: number): number | null {
  return readStat(pid)?.startTicks ?? null;
}

/** Start time of a process that is alive (not a zombie), or null. */
export function liveStartTicks(pid: number): number | null {
  const st = readStat(pid);
  return isLive(st) ? st!.startTicks : null;
}

/** Live (non-zombie) members of a process group. */
export function groupMembers(pgid: number): number[] {
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((n) => /^\d+$/.test(n));
  } catch {
    // No procfs: fall back to kill(0), which cannot tell zombies apart.
    try {
      process.kill(-pgid, 0);
      return [pgid];
    } catch {
      return [];
    }
  }
  const members: number[] = [];
  for (const p of pids) {
    const st = readStat(Number(p));
    if (st && st.pgid === pgid && isLive(st)) members.push(st.pid);
  }
  return members;
}

/** Whether `pid` exists and this process may signal it (a zombie counts). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function groupAlive(pgid: number): boolean {
  return groupMembers(pgid).length > 0;
}

/**
 * Whether the process group a trainer was launched as still lives: a member is alive, and the leader, if it is
 * still there, is the same process (`startTicks` recorded at launch; null: not known). The leader may be gone
 * while its children live on.
 */
export function trainerGroupAlive(pgid: number, startTicks: number | null): boolean {
  if (!groupAlive(pgid)) return false;
  const ticks = processStartTicks(pgid);
  return ticks === null || startTicks === null || ticks === startTicks;
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * SIGTERM the group, wait up to `graceMs` for every member to exit, then SIGKILL and wait again.
 * Resolves once no live member remains (or after 10 s more, if the kernel cannot reap them).
 */
export async function terminateGroup(pgid: number, graceMs = DEFAULT_KILL_GRACE_MS): Promise<'gone' | 'killed'> {
  if (!groupAlive(pgid)) return 'gone';
  signalGroup(pgid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!groupAlive(pgid)) return 'gone';
    await sleep(100);
  }
  signalGroup(pgid, 'SIGKILL');
  const hard = Date.now() + 10_000;
  while (Date.now() < hard && groupAlive(pgid)) await sleep(50);
  return 'killed';
}
