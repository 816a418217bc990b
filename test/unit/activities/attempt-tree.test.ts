/**
 * Stopping an attempt with the real launcher (src/launcher/infir2_launch.py) in front of a stand-in of torch >= 2.1's
 * torchrun layout (tree-procs.ts): a graceful stop through the stop file lets every rank save and leaves nothing;
 * a kill leaves nothing at once; a launcher killed from outside leaves its ranks, which the supervisor stops itself;
 * a graceful stop escalated by a hang kills at once. And the lock's takeover of an earlier attempt uses the same.
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AttemptStop, attemptAlive, attemptTree, launchedArgv } from '../../../src/activities/attempt-tree.js';
import { DirLock, LOCK_FILE } from '../../../src/activities/lock.js';
import { isLive, sleep } from './procs.js';
import { killAgents, newToken, PY, startAgent } from '../util/tree-procs.js';

afterEach(killAgents);

const saved = (dir: string) => [0, 1].filter((r) => existsSync(join(dir, `saved${r}`)));

async function launched(allowanceSec = 30) {
  const dir = mkdtempSync(join(tmpdir(), 'infir2-attempt-'));
  const token = newToken();
  // The launcher in front of the agent, exactly as run-step launches a command (its argv ends where the agent's starts).
  const prefix = launchedArgv([], false, PY, allowanceSec);
  const a = await startAgent(token, dir, prefix);
  return { dir, a, tree: attemptTree(token, dir, false, a.child.pid!) };
}

describe('AttemptStop', () => {
  it('graceful: the launcher SIGTERMs the rank mains only; both save; nothing is left; the launcher exits 0', async () => {
    const { dir, a, tree } = await launched();
    const notes: string[] = [];
    expect(await new AttemptStop(tree, 'graceful', 20_000, 2_000, (m) => notes.push(m)).done).toBe('gone');
    expect(saved(dir)).toEqual([0, 1]);
    expect(attemptAlive(tree)).toBe(false);
    expect(await a.exited).toEqual({ code: 0, signal: null });
    expect(JSON.parse(readFileSync(tree.stopFile, 'utf8'))).toEqual({ mode: 'stop', allowanceSec: 20 });
    expect(notes).toEqual([]);
  });

  it('kill: every process at once, no save', async () => {
    const { dir, a, tree } = await launched();
    const t0 = Date.now();
    expect(await new AttemptStop(tree, 'kill', 0, 0, () => undefined).done).toBe('killed');
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(attemptAlive(tree)).toBe(false);
    expect(saved(dir)).toEqual([]);
    expect((await a.exited).signal).toBe('SIGKILL');
  });

  it('a launcher killed from outside leaves its ranks; the supervisor stops them itself, and they save', async () => {
    const { dir, a, tree } = await launched();
    process.kill(a.child.pid!, 'SIGKILL');
    await a.exited;
    process.kill(a.agent, 'SIGKILL'); // torchrun gone too: only the ranks and their workers are left
    await sleep(100);
    expect(attemptAlive(tree)).toBe(true);
    expect(await new AttemptStop(tree, 'graceful', 20_000, 2_000, () => undefined).done).toMatch(/gone|killed/);
    expect(attemptAlive(tree)).toBe(false);
    expect(saved(dir)).toEqual([0, 1]);
  });

  it('a graceful stop escalated (a hang found meanwhile) kills at once', async () => {
    const { a, tree } = await launched();
    // The ranks never see the request: the stop file points elsewhere, and the launcher is stopped (SIGSTOP).
    process.kill(a.child.pid!, 'SIGSTOP');
    const notes: string[] = [];
    const stop = new AttemptStop(tree, 'graceful', 60_000, 60_000, (m) => notes.push(m));
    await sleep(300);
    expect(attemptAlive(tree)).toBe(true);
    const t0 = Date.now();
    stop.escalate('no progress for 31s while stopping');
    expect(await stop.done).toBe('killed');
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(attemptAlive(tree)).toBe(false);
    expect(notes).toEqual(['no progress for 31s while stopping: killing every process of the attempt']);
  });
});

describe('DirLock takeover of an earlier attempt with a tree', () => {
  it('stops every process of it gracefully (the ranks save) before the lock is taken', async () => {
    const { dir, tree } = await launched();
    const first = await DirLock.acquire(dir, 'wf attempt 1');
    first.setTrainer(tree.launcherPid!, tree);
    const msgs: string[] = [];
    await DirLock.acquire(dir, 'wf attempt 2', { onTakeover: (m) => msgs.push(m), killGraceMs: 2_000, stopAllowanceMs: 20_000 });
    expect(msgs[0]).toBe(`terminating a trainer of an earlier attempt (wf attempt 1, launch ${tree.token})`);
    expect(attemptAlive(tree)).toBe(false);
    expect(saved(dir)).toEqual([0, 1]);
    expect(JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8'))).toMatchObject({ owner: 'wf attempt 2', host: hostname() });
  });

  it('tells the launchers of another host\'s expired lock to kill their trees', async () => {
    const { dir, a, tree } = await launched();
    const first = await DirLock.acquire(dir, 'wf attempt 1');
    first.setTrainer(tree.launcherPid!, tree);
    // The lock as a worker on another host left it, two lease lengths ago.
    const info = JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8'));
    const { writeFileSync, utimesSync } = await import('node:fs');
    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ ...info, host: 'gpu-node-17' }));
    const old = new Date(Date.now() - 300_000);
    utimesSync(join(dir, LOCK_FILE), old, old);
    await DirLock.acquire(dir, 'wf attempt 2');
    expect(JSON.parse(readFileSync(tree.stopFile, 'utf8'))).toEqual({ mode: 'kill' });
    expect(await a.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(isLive(a.agent)).toBe(false);
  });
});
