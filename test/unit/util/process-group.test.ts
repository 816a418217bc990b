/**
 * Process groups with real processes: membership from /proc, start ticks, and terminateGroup's SIGTERM → grace →
 * SIGKILL escalation over the whole group (grandchildren included).
 */
import { chmodSync, copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { groupAlive, groupMembers, processStartTicks, terminateGroup } from '../../../src/util/process-group.js';
import {
  allInGroup,
  deadPid,
  IGNORE_TERM_PY,
  isLive,
  killSpawned,
  PYTHON,
  sleep,
  spawnGroup,
  spawnSleep,
  spawnTermIgnorer,
  waitForOutput,
} from '../activities/procs.js';

afterEach(killSpawned);

describe('groupMembers / groupAlive / processStartTicks', () => {
  it('finds the leader of a fresh detached group', () => {
    const p = spawnSleep();
    expect(groupMembers(p.pid)).toEqual([p.pid]);
    expect(groupAlive(p.pid)).toBe(true);
  });

  it('finds every member of a group, children included', async () => {
    const p = spawnGroup('/bin/sh', ['-c', '/bin/sleep 30 & /bin/sleep 30 & echo started; wait']);
    await waitForOutput(p, 'started');
    await sleep(50);
    const members = groupMembers(p.pid);
    expect(members).toHaveLength(3);
    expect(members).toContain(p.pid);
    expect(members.sort()).toEqual(allInGroup(p.pid).map((m) => m.pid).sort());
  });

  it('does not count a zombie as a live member', async () => {
    // python (exec'd in place of sh) never reaps its short-lived child, which stays a zombie in the group.
    const p = spawnGroup('/bin/sh', ['-c', `/bin/sleep 0.05 & exec ${PYTHON} -c 'import time; print("ready", flush=True); time.sleep(60)'`]);
    await waitForOutput(p, 'ready');
    const deadline = Date.now() + 5_000;
    while (!allInGroup(p.pid).some((m) => m.state === 'Z') && Date.now() < deadline) await sleep(20);
    const zombies = allInGroup(p.pid).filter((m) => m.state === 'Z');
    expect(zombies).toHaveLength(1);
    expect(groupMembers(p.pid)).toEqual([p.pid]);
  });

  it('reads a process whose name holds spaces and parentheses', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'infir2-pg-'));
    try {
      const odd = join(dir, 'a) b (c');
      copyFileSync('/bin/sleep', odd);
      chmodSync(odd, 0o755);
      const p = spawnGroup(odd, ['30']);
      await sleep(50);
      expect(groupMembers(p.pid)).toEqual([p.pid]);
      expect(processStartTicks(p.pid)).toBeGreaterThan(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('knows a group with no live member is not alive', async () => {
    const pid = await deadPid();
    expect(groupMembers(pid)).toEqual([]);
    expect(groupAlive(pid)).toBe(false);
  });

  it('gives a stable start time, later for a later process, and null for a dead pid', async () => {
    const self = processStartTicks(process.pid);
    expect(Number.isInteger(self)).toBe(true);
    const p = spawnSleep();
    const t = processStartTicks(p.pid)!;
    expect(Number.isInteger(t)).toBe(true);
    expect(t).toBeGreaterThanOrEqual(self!);
    expect(processStartTicks(p.pid)).toBe(t);
    expect(processStartTicks(await deadPid())).toBeNull();
  });
});

describe('terminateGroup', () => {
  it("returns 'gone' when the group dies on SIGTERM, well before the grace", async () => {
    const p = spawnSleep();
    const t0 = Date.now();
    expect(await terminateGroup(p.pid, 10_000)).toBe('gone');
    expect(Date.now() - t0).toBeLessThan(3_000);
    expect(groupAlive(p.pid)).toBe(false);
    expect(await p.exited).toEqual({ code: null, signal: 'SIGTERM' });
  });

  it('escalates to SIGKILL after the grace when the trainer ignores SIGTERM', async () => {
    const p = await spawnTermIgnorer();
    const t0 = Date.now();
    expect(await terminateGroup(p.pid, 400)).toBe('killed');
    const took = Date.now() - t0;
    expect(took).toBeGreaterThanOrEqual(400);
    expect(took).toBeLessThan(5_000);
    expect(groupAlive(p.pid)).toBe(false);
    expect(await p.exited).toEqual({ code: null, signal: 'SIGKILL' });
  });

  it('kills grandchildren in the group, including one that ignores SIGTERM after its parent died', async () => {
    const p = spawnGroup('/bin/sh', ['-c', `/bin/sleep 30 & ${PYTHON} -c '${IGNORE_TERM_PY}' & wait`]);
    await waitForOutput(p, 'ready');
    const members = groupMembers(p.pid);
    expect(members).toHaveLength(3); // sh, sleep, python
    expect(await terminateGroup(p.pid, 300)).toBe('killed');
    expect(groupMembers(p.pid)).toEqual([]);
    for (const pid of members) expect(isLive(pid), `pid ${pid} survived`).toBe(false);
  });

  it('stops a group whose leader has already exited but whose children live on', async () => {
    const p = spawnGroup('/bin/sh', ['-c', `${PYTHON} -c '${IGNORE_TERM_PY}' & exit 0`]);
    await waitForOutput(p, 'ready');
    expect(await p.exited).toEqual({ code: 0, signal: null });
    const orphans = groupMembers(p.pid);
    expect(orphans).toHaveLength(1);
    expect(orphans[0]).not.toBe(p.pid);
    expect(await terminateGroup(p.pid, 200)).toBe('killed');
    expect(isLive(orphans[0]!)).toBe(false);
  });

  it("returns 'gone' at once for a group that no longer exists", async () => {
    const pid = await deadPid();
    const t0 = Date.now();
    expect(await terminateGroup(pid, 10_000)).toBe('gone');
    expect(Date.now() - t0).toBeLessThan(500);
  });

  it('does not touch other groups', async () => {
    const victim = spawnSleep();
    const bystander = spawnSleep();
    expect(await terminateGroup(victim.pid, 2_000)).toBe('gone');
    expect(groupAlive(bystander.pid)).toBe(true);
    expect(isLive(bystander.pid)).toBe(true);
  });
});
