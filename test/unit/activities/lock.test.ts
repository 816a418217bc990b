/**
 * DirLock with real processes: exclusive create, the zombie-trainer takeover (a trainer of an earlier attempt is
 * terminated first), stale locks of dead trainers and workers, leases of locks from other hosts, and release
 * that removes only its own lock.
 */
import { chownSync, existsSync, lutimesSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DirLock, LOCK_FILE, LOCK_LEASE_MS, LockBusyError, type LockInfo } from '../../../src/activities/lock.js';
import { groupAlive, processStartTicks } from '../../../src/util/process-group.js';
import { deadPid, isLive, killSpawned, sleep, spawnSleep, spawnTermIgnorer } from './procs.js';

let dir: string;
let file: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'infir2-lock-'));
  file = join(dir, LOCK_FILE);
});
afterEach(async () => {
  await killSpawned();
  rmSync(dir, { recursive: true, force: true });
});

const readInfo = (): LockInfo => JSON.parse(readFileSync(file, 'utf8')) as LockInfo;

function writeLock(info: Partial<LockInfo>, ageMs = 0): LockInfo {
  const full: LockInfo = {
    host: hostname(),
    workerPid: process.pid,
    pgid: null,
    startTicks: null,
    owner: 'someone else',
    since: '2025-01-01T00:00:00.000Z',
    token: 'another-acquisition',
    ...info,
  };
  writeFileSync(file, JSON.stringify(full));
  if (ageMs > 0) {
    const t = new Date(Date.now() - ageMs);
    utimesSync(file, t, t);
  }
  return full;
}

describe('DirLock.acquire', () => {
  it('creates the lock file recording host, worker pid and owner', async () => {
    const msgs: string[] = [];
    const lock = await DirLock.acquire(dir, 'run-1/cpt.stable attempt 1', { onTakeover: (m) => msgs.push(m) });
    expect(lock.file).toBe(file);
    const info = readInfo();
    expect(info).toMatchObject({ host: hostname(), workerPid: process.pid, pgid: null, startTicks: null, owner: 'run-1/cpt.stable attempt 1' });
    expect(Number.isNaN(Date.parse(info.since))).toBe(false);
    expect(msgs).toEqual([]);
    lock.release();
  });

  it('is exclusive: another live worker on this host that is still launching keeps its lock', async () => {
    const other = spawnSleep(); // stands in for a second worker process
    const theirs = writeLock({ workerPid: other.pid, owner: 'run-1/cpt.stable attempt 1' });
    await expect(DirLock.acquire(dir, 'attempt 2')).rejects.toThrow(LockBusyError);
    await expect(DirLock.acquire(dir, 'attempt 2')).rejects.toThrow(`is locked by worker pid ${other.pid} (run-1/cpt.stable attempt 1), which is still launching it`);
    expect(readInfo()).toEqual(theirs);
  });

  it('terminates a live trainer of an earlier attempt by the same worker, then takes the lock over', async () => {
    const trainer = spawnSleep();
    const first = await DirLock.acquire(dir, 'wf attempt 1');
    first.setTrainer(trainer.pid, null);
    await sleep(5); // a distinct `since`
    const msgs: string[] = [];
    const second = await DirLock.acquire(dir, 'wf attempt 2', { onTakeover: (m) => msgs.push(m), killGraceMs: 2_000 });

    expect(groupAlive(trainer.pid)).toBe(false);
    expect(await trainer.exited).toEqual({ code: null, signal: 'SIGTERM' });
    expect(msgs[0]).toBe(`terminating a trainer of an earlier attempt (wf attempt 1, process group ${trainer.pid})`);
    expect(readInfo()).toMatchObject({ owner: 'wf attempt 2', workerPid: process.pid, pgid: null });

    first.release(); // the old holder's release must not remove the new lock
    expect(existsSync(file)).toBe(true);
    second.release();
    expect(existsSync(file)).toBe(false);
  });

  it('SIGKILLs an earlier trainer that ignores SIGTERM once the grace is over', async () => {
    const trainer = await spawnTermIgnorer();
    const first = await DirLock.acquire(dir, 'wf attempt 1');
    first.setTrainer(trainer.pid, null);
    const t0 = Date.now();
    await DirLock.acquire(dir, 'wf attempt 2', { killGraceMs: 300 });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
    expect(await trainer.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(readInfo().owner).toBe('wf attempt 2');
  });

  it("stopOrphan: the trainer of a dead worker is stopped before the next attempt waits for the GPUs it holds, and the lock stays", async () => {
    const trainer = spawnSleep();
    writeLock({ workerPid: await deadPid(), pgid: trainer.pid, startTicks: processStartTicks(trainer.pid), owner: 'wf attempt 1' });
    const msgs: string[] = [];
    expect(await DirLock.stopOrphan(dir, { onTakeover: (m) => msgs.push(m), killGraceMs: 2_000 })).toBe(true);
    expect(groupAlive(trainer.pid)).toBe(false);
    expect(msgs[0]).toMatch(/^stopping the trainer of wf attempt 1, whose worker \(pid \d+\) is gone, before waiting for its GPUs$/);
    expect(readInfo().owner).toBe('wf attempt 1'); // taking the lock is acquire's
  });

  it('stopOrphan leaves a trainer whose worker lives, and a directory with no lock', async () => {
    const trainer = spawnSleep();
    writeLock({ workerPid: process.pid, pgid: trainer.pid, startTicks: processStartTicks(trainer.pid), owner: 'wf attempt 1' });
    expect(await DirLock.stopOrphan(dir)).toBe(false);
    expect(groupAlive(trainer.pid)).toBe(true);
    rmSync(file);
    expect(await DirLock.stopOrphan(dir)).toBe(false);
  });

  it('takes over the stale lock of a dead trainer without signalling anything', async () => {
    const gone = await deadPid();
    writeLock({ workerPid: gone, pgid: gone, startTicks: 12345, owner: 'old attempt' });
    const msgs: string[] = [];
    await DirLock.acquire(dir, 'new attempt', { onTakeover: (m) => msgs.push(m) });
    expect(msgs).toEqual([`taking over a stale lock of old attempt on ${hostname()}`]);
    expect(readInfo()).toMatchObject({ owner: 'new attempt', workerPid: process.pid });
  });

  it('takes over the lock of a dead worker that never launched a trainer', async () => {
    writeLock({ workerPid: await deadPid(), pgid: null, owner: 'crashed worker' });
    await DirLock.acquire(dir, 'new attempt');
    expect(readInfo().owner).toBe('new attempt');
  });

  it('does not kill a process that merely reuses the recorded pid (different start time)', async () => {
    const unrelated = spawnSleep();
    const ticks = processStartTicks(unrelated.pid)!;
    writeLock({ workerPid: await deadPid(), pgid: unrelated.pid, startTicks: ticks - 1000, owner: 'old attempt' });
    const msgs: string[] = [];
    await DirLock.acquire(dir, 'new attempt', { onTakeover: (m) => msgs.push(m), killGraceMs: 200 });
    expect(isLive(unrelated.pid)).toBe(true);
    expect(msgs.some((m) => m.startsWith('terminating'))).toBe(false);
    expect(readInfo().owner).toBe('new attempt');
  });

  it('refuses a lock from another host whose lease is fresh', async () => {
    const theirs = writeLock({ host: 'gpu-node-17', workerPid: 1, pgid: 4242, owner: 'run-9/rl.stage1 attempt 3' });
    await expect(DirLock.acquire(dir, 'mine')).rejects.toThrow(new LockBusyError(`${dir} is locked by run-9/rl.stage1 attempt 3 on gpu-node-17`));
    expect(readInfo()).toEqual(theirs);
  });

  it('refuses a lock from another host just inside its lease', async () => {
    writeLock({ host: 'gpu-node-17', owner: 'x' }, LOCK_LEASE_MS - 30_000);
    await expect(DirLock.acquire(dir, 'mine')).rejects.toBeInstanceOf(LockBusyError);
  });

  it('takes over a lock from another host whose lease expired', async () => {
    writeLock({ host: 'gpu-node-17', workerPid: 1, pgid: 4242, owner: 'run-9/rl.stage1 attempt 3' }, LOCK_LEASE_MS + 60_000);
    const msgs: string[] = [];
    await DirLock.acquire(dir, 'mine', { onTakeover: (m) => msgs.push(m) });
    expect(msgs).toEqual(['taking over a stale lock of run-9/rl.stage1 attempt 3 on gpu-node-17']);
    expect(readInfo()).toMatchObject({ host: hostname(), owner: 'mine', pgid: null });
  });

  it('runs the stop command an unreleased lock recorded (a Ray job outlives its submit client)', async () => {
    // Same host: the zombie `ray job submit` client is terminated, then its job is stopped.
    const client = spawnSleep();
    const stop = { argv: ['ray', 'job', 'stop', 'infir2-r1-rl.stage1-a1'], cwd: dir, env: { A: '1' } };
    const first = await DirLock.acquire(dir, 'wf attempt 1');
    first.setTrainer(client.pid, null, stop);
    expect(readInfo().stop).toEqual(stop);
    const ran: unknown[] = [];
    const msgs: string[] = [];
    await DirLock.acquire(dir, 'wf attempt 2', { onTakeover: (m) => msgs.push(m), killGraceMs: 500, runStop: async (c) => void ran.push(c) });
    expect(groupAlive(client.pid)).toBe(false);
    expect(ran).toEqual([stop]);
    expect(msgs.at(-1)).toBe('stopping the work of wf attempt 1: ray job stop infir2-r1-rl.stage1-a1');
    expect(readInfo()).toMatchObject({ owner: 'wf attempt 2', stop: null });
  });

  it('runs the stop command of another host\'s expired lock, and none for a released lock', async () => {
    const stop = { argv: ['ray', 'job', 'stop', 'x-a3'], cwd: '/', env: {} };
    writeLock({ host: 'gpu-node-17', workerPid: 1, pgid: 4242, owner: 'old', stop }, LOCK_LEASE_MS + 60_000);
    const ran: unknown[] = [];
    const runStop = async (c: unknown) => void ran.push(c);
    const lock = await DirLock.acquire(dir, 'mine', { runStop });
    expect(ran).toEqual([stop]);
    lock.setTrainer(process.pid, null, { ...stop, argv: ['ray', 'job', 'stop', 'mine'] });
    lock.release();
    (await DirLock.acquire(dir, 'next', { runStop })).release();
    expect(ran).toEqual([stop]); // a clean release leaves nothing to stop
  });

  it.skipIf(process.geteuid?.() !== 0)("another user's lock naming a live group on this host: never kills it nor runs its stop command", async () => {
    // What a user who can write a shared checkpoint root could plant for root's worker: a group to kill, a command to run.
    const victim = spawnSleep();
    const stop = { argv: ['touch', join(dir, 'ran')], cwd: dir, env: {} };
    writeLock({ pgid: victim.pid, startTicks: null, workerPid: await deadPid(), owner: 'planted', stop });
    chownSync(file, 65534, 65534);
    const ran: unknown[] = [];
    await expect(DirLock.acquire(dir, 'mine', { killGraceMs: 500, runStop: async (c) => void ran.push(c) })).rejects.toThrow(
      new RegExp(`is locked by planted on ${hostname()} \\(a lock file of uid 65534\\)`),
    );
    expect(groupAlive(victim.pid)).toBe(true);
    // Once its lease is over it is taken over, still without a signal or its command.
    const t = new Date(Date.now() - LOCK_LEASE_MS - 60_000);
    utimesSync(file, t, t);
    (await DirLock.acquire(dir, 'mine', { killGraceMs: 500, runStop: async (c) => void ran.push(c) })).release();
    expect(groupAlive(victim.pid)).toBe(true);
    expect(ran).toEqual([]);
  });

  it('a link planted as the lock is no lock: never read through, replaced once its grace is over', async () => {
    const outside = join(mkdtempSync(join(tmpdir(), 'infir2-outside-')), 'record');
    writeFileSync(outside, JSON.stringify({ host: hostname(), workerPid: await deadPid(), pgid: null, startTicks: null, owner: 'x', since: '', token: 't' }));
    symlinkSync(outside, file);
    const t = new Date(Date.now() - 60_000);
    lutimesSync(file, t, t);
    const lock = await DirLock.acquire(dir, 'mine');
    expect(readInfo().owner).toBe('mine');
    expect(JSON.parse(readFileSync(outside, 'utf8')).owner).toBe('x');
    lock.release();
  });

  it('replaces an unreadable lock file whose lease expired', async () => {
    writeFileSync(file, '{"host": "half-writ');
    const t = new Date(Date.now() - LOCK_LEASE_MS - 1000);
    utimesSync(file, t, t);
    await DirLock.acquire(dir, 'mine');
    expect(readInfo().owner).toBe('mine');
  });

  it('fails with the file system error when the directory does not exist', async () => {
    await expect(DirLock.acquire(join(dir, 'missing'), 'mine')).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('DirLock.setTrainer / touch / release', () => {
  it('records the trainer group and its start time atomically', async () => {
    const trainer = spawnSleep();
    const lock = await DirLock.acquire(dir, 'a');
    const since = readInfo().since;
    lock.setTrainer(trainer.pid, null);
    expect(readInfo()).toEqual({
      host: hostname(),
      workerPid: process.pid,
      pgid: trainer.pid,
      startTicks: processStartTicks(trainer.pid),
      owner: 'a',
      since,
      token: expect.any(String),
      tree: null,
      stop: null,
    });
    expect(readdirSync(dir)).toEqual([LOCK_FILE]); // no temp file left behind
    lock.release();
  });

  it('refreshes the lease on touch, and survives the file being gone', async () => {
    const lock = await DirLock.acquire(dir, 'a');
    const old = new Date(Date.now() - 10 * 60_000);
    utimesSync(file, old, old);
    lock.touch();
    expect(Date.now() - statSync(file).mtimeMs).toBeLessThan(5_000);
    rmSync(file);
    expect(() => lock.touch()).not.toThrow();
  });

  it('removes its own lock on release; a second release is a no-op', async () => {
    const lock = await DirLock.acquire(dir, 'a');
    lock.release();
    expect(existsSync(file)).toBe(false);
    expect(() => lock.release()).not.toThrow();
    // The directory is free again.
    const again = await DirLock.acquire(dir, 'b');
    expect(readInfo().owner).toBe('b');
    again.release();
  });

  it('keeps its own lock after setTrainer, and still releases it', async () => {
    const trainer = spawnSleep();
    const lock = await DirLock.acquire(dir, 'a');
    lock.setTrainer(trainer.pid, null);
    lock.release();
    expect(existsSync(file)).toBe(false);
  });

  it.each([
    ['another host', { host: 'gpu-node-17' }],
    ['another worker pid', { workerPid: 1 }],
    ['a later acquisition by this worker', { since: '2099-01-01T00:00:00.000Z' }],
  ])('does not remove a lock that now belongs to %s', async (_name, change) => {
    const lock = await DirLock.acquire(dir, 'a');
    const mine = readInfo();
    // A later acquisition always has a token of its own; release matches the token, nothing else.
    const theirs = writeLock({ ...mine, owner: 'b', token: 'theirs', ...change });
    lock.release();
    expect(readInfo()).toEqual(theirs);
  });
});
