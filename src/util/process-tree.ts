/**
 * The processes of one launch on this host, found by the token every launch carries in its environment
 * (`INFIR2_LAUNCH=<token>`), which torchrun, srun, the ranks and their data-loader workers all inherit.
 *
 * A process group cannot say this: torch ≥ 2.1's torchrun starts each rank in a session of its own, and a rank
 * whose torchrun died is reparented out of any tree rooted at the launch (docs/real-engines.md). The environment stays
 * with the process whatever it does to its session, group or parent, and /proc shows it for as long as the process
 * lives. What it misses: a process that execs with a scrubbed environment; the launcher (src/launcher/), a child
 * subreaper, still holds those as descendants while it lives, and stops them itself.
 *
 * Only processes of this user count (the kernel lets no one else read their environment, root aside): a process
 * of another user that carries the token is neither stopped nor counted as alive.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { isLive, readStat } from './process-group.js';

/** The environment variable that names a launch. */
export const LAUNCH_ENV = 'INFIR2_LAUNCH';
/** torchrun's per-rank variables: a process whose values differ from its parent's is a rank's main process. */
const RANK_KEYS = ['RANK', 'LOCAL_RANK', 'TORCHELASTIC_RUN_ID'];

function environ(pid: number): Buffer | null {
  try {
    return readFileSync(`/proc/${pid}/environ`);
  } catch {
    return null;
  }
}

const pids = (): number[] => readdirSync('/proc').filter((n) => /^\d+$/.test(n)).map(Number);
const uid = typeof process.getuid === 'function' ? process.getuid() : null;

function mine(pid: number): boolean {
  try {
    return uid === null || statSync(`/proc/${pid}`).uid === uid;
  } catch {
    return false;
  }
}

/** Whether an environment block holds `NAME=value` as one whole entry. */
function holds(env: Buffer, entry: string): boolean {
  const needle = Buffer.from(`${entry}\0`);
  let at = env.indexOf(needle);
  while (at !== -1) {
    if (at === 0 || env[at - 1] === 0) return true;
    at = env.indexOf(needle, at + 1);
  }
  return false;
}

/** Live processes of this user on this host whose environment names launch `token`. */
export function treeMembers(token: string): number[] {
  if (!token) return [];
  const entry = `${LAUNCH_ENV}=${token}`;
  const out: number[] = [];
  for (const pid of pids()) {
    if (pid === process.pid) continue;
    const env = environ(pid);
    if (!env || !holds(env, entry)) continue;
    if (isLive(readStat(pid)) && mine(pid)) out.push(pid);
  }
  return out;
}

export function treeAlive(token: string): boolean {
  return treeMembers(token).length > 0;
}

function rankKey(pid: number): string {
  const env = environ(pid);
  if (!env) return '';
  return env
    .toString('utf8')
    .split('\0')
    .filter((e) => RANK_KEYS.some((k) => e.startsWith(`${k}=`)))
    .sort()
    .join(' ');
}

/**
 * Whom a graceful stop signals first among `members`: each rank's main process (its torchrun variables differ
 * from its parent's: data-loader workers inherit their rank's), and where there is no rank, the roots of the tree
 * (members whose parent is not one: torchrun, a single-process trainer, srun). The launcher's rule
 * (src/launcher/infir2_launch.py), for a tree whose launcher is gone.
 */
export function stopTargets(members: number[]): { ranks: number[]; roots: number[] } {
  const set = new Set(members);
  const parent = new Map(members.map((p) => [p, readStat(p)?.ppid ?? 0]));
  const key = new Map(members.map((p) => [p, rankKey(p)]));
  const ranks = members.filter((p) => key.get(p) && key.get(p) !== (key.get(parent.get(p)!) ?? rankKey(parent.get(p)!)));
  return { ranks, roots: members.filter((p) => !set.has(parent.get(p)!)) };
}

function signalAll(pids: number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      /* gone, or not ours */
    }
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** How often a stop looks at the tree (each look reads every process's environment: ~ms per hundred). */
const POLL_MS = 200;
/** How long SIGKILLed processes get to disappear (the kernel may be slow to reap under load). */
const REAP_MS = 10_000;

/** SIGKILL every process of the launch until none is left (or REAP_MS passes): a hang's stop. */
export async function killTree(token: string): Promise<'gone' | 'stuck'> {
  const deadline = Date.now() + REAP_MS;
  for (let members = treeMembers(token); members.length; members = treeMembers(token)) {
    if (Date.now() > deadline) return 'stuck';
    signalAll(members, 'SIGKILL');
    await sleep(50);
  }
  return 'gone';
}

export interface TreeStopOptions {
  /** How long the stop targets get to exit after SIGTERM (a save), ms. */
  allowanceMs: number;
  /** How long what is left then gets after SIGTERM, before SIGKILL, ms. */
  graceMs: number;
  /** Ends the allowance early (a hang found meanwhile): the rest is SIGKILLed at once. */
  abort?: AbortSignal;
}

/**
 * Stop the launch's processes gracefully: SIGTERM to the stop targets only (stopTargets), wait until they exit
 * or the allowance passes, SIGTERM the rest, SIGKILL whatever outlives the grace. What the launcher does on its
 * node; here, for a tree whose launcher is gone.
 */
export async function stopTree(token: string, o: TreeStopOptions): Promise<'gone' | 'killed'> {
  let members = treeMembers(token);
  if (!members.length) return 'gone';
  const termed = new Set<number>();
  const deadline = Date.now() + o.allowanceMs;
  while (Date.now() < deadline && !o.abort?.aborted) {
    // Ranks started meanwhile are signalled too; the roots only where no rank ever was.
    const { ranks, roots } = stopTargets(members);
    const fresh = (ranks.length ? ranks : termed.size ? [] : roots).filter((p) => !termed.has(p));
    signalAll(fresh, 'SIGTERM');
    fresh.forEach((p) => termed.add(p));
    if (![...termed].some((p) => members.includes(p))) break;
    await sleep(POLL_MS);
    members = treeMembers(token);
    if (!members.length) return 'gone';
  }
  if (!o.abort?.aborted) {
    signalAll(treeMembers(token), 'SIGTERM');
    const hard = Date.now() + o.graceMs;
    while (Date.now() < hard && !o.abort?.aborted) {
      if (!treeAlive(token)) return 'gone';
      await sleep(POLL_MS);
    }
  }
  await killTree(token);
  return 'killed';
}
