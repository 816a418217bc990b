/**
 * Real processes for the process-group and lock tests: each is spawned detached (the leader of its own group),
 * remembered, and SIGKILLed as a group by `killSpawned()` in afterEach.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

export const PYTHON = '/usr/bin/python3';
/** A trainer that ignores SIGTERM; prints `ready` once the handler is in place. */
export const IGNORE_TERM_PY =
  'import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print("ready", flush=True); time.sleep(60)';

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export interface Spawned {
  child: ChildProcess;
  /** The pid, which is also the process group id. */
  pid: number;
  /** Resolves with how the leader ended once Node has reaped it. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output: () => string;
}

const spawnedGroups = new Set<number>();

export function spawnGroup(file: string, args: string[]): Spawned {
  const child = spawn(file, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  if (child.pid === undefined) throw new Error(`could not spawn ${file}`);
  spawnedGroups.add(child.pid);
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, pid: child.pid, exited, output: () => out };
}

export const spawnSleep = () => spawnGroup('/bin/sleep', ['30']);

/** A python that ignores SIGTERM, resolved once it is ready (so SIGTERM cannot race the handler). */
export async function spawnTermIgnorer(): Promise<Spawned> {
  const p = spawnGroup(PYTHON, ['-c', IGNORE_TERM_PY]);
  await waitForOutput(p, 'ready');
  return p;
}

export async function waitForOutput(p: Spawned, text: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!p.output().includes(text)) {
    if (Date.now() > deadline) throw new Error(`no '${text}' from pid ${p.pid} within ${timeoutMs} ms; output: ${p.output()}`);
    await sleep(10);
  }
}

/** State letter from /proc/<pid>/stat, or null when the pid does not exist. */
export function procState(pid: number): string | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2).split(' ')[0] ?? null;
  } catch {
    return null;
  }
}

/** A process that runs (exists and is neither a zombie nor dead). */
export function isLive(pid: number): boolean {
  const s = procState(pid);
  return s !== null && s !== 'Z' && s !== 'X';
}

/** Every pid in group `pgid`, zombies included (independent of the code under test). */
export function allInGroup(pgid: number): Array<{ pid: number; state: string }> {
  const found: Array<{ pid: number; state: string }> = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const text = readFileSync(`/proc/${name}/stat`, 'utf8');
      const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
      if (Number(rest[2]) === pgid) found.push({ pid: Number(name), state: rest[0] ?? '?' });
    } catch {
      /* exited meanwhile */
    }
  }
  return found;
}

/** A pid that exited and was reaped: nothing runs under it (pids are not reused within a test). */
export async function deadPid(): Promise<number> {
  const p = spawnGroup('/bin/true', []);
  await p.exited;
  return p.pid;
}

/** SIGKILL every group spawned here and wait until none has a live member. */
export async function killSpawned(): Promise<void> {
  for (const pgid of spawnedGroups) {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  const deadline = Date.now() + 5_000;
  while (Date.now() < deadline && [...spawnedGroups].some((g) => allInGroup(g).some((m) => isLive(m.pid)))) await sleep(20);
  spawnedGroups.clear();
}
