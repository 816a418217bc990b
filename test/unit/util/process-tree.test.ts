/**
 * A launch's processes found by the token in their environment, with real processes laid out as torch >= 2.1's
 * torchrun lays out its ranks (each in a session of its own, with RANK/LOCAL_RANK/TORCHELASTIC_RUN_ID) and a
 * data-loader-like child under each rank: membership survives the parent's death, the stop targets are the rank
 * mains only, and stopTree lets them exit before it stops the rest.
 */
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { killTree, stopTargets, stopTree, treeAlive, treeMembers } from '../../../src/util/process-tree.js';
import { isLive, sleep } from '../activities/procs.js';

import { newToken, startAgent, killAgents } from './tree-procs.js';

afterEach(killAgents);

describe('treeMembers', () => {
  it('finds every process of the launch, ranks in sessions of their own included, and nothing else', async () => {
    const token = newToken();
    const p = await startAgent(token, mkdtempSync(join(tmpdir(), 'infir2-tree-')));
    const other = await startAgent(newToken(), mkdtempSync(join(tmpdir(), 'infir2-tree-')));
    expect(treeMembers(token).sort()).toEqual([p.agent, ...p.ranks, ...p.workers].sort());
    // A rank leads a session of its own: its process group is not the agent's.
    expect(Number(readFileSync(`/proc/${p.ranks[0]}/stat`, 'utf8').split(') ')[1]!.split(' ')[3])).toBe(p.ranks[0]);
    for (const pid of [other.agent, ...other.ranks]) expect(treeMembers(token)).not.toContain(pid);
  });

  it('still finds the ranks once their agent was SIGKILLed (the case a process group misses)', async () => {
    const token = newToken();
    const p = await startAgent(token, mkdtempSync(join(tmpdir(), 'infir2-tree-')));
    process.kill(-p.agent, 'SIGKILL');
    await sleep(200);
    expect(isLive(p.agent)).toBe(false);
    expect(treeMembers(token).sort()).toEqual([...p.ranks, ...p.workers].sort());
    expect(treeAlive(token)).toBe(true);
    expect(await killTree(token)).toBe('gone');
    expect(treeAlive(token)).toBe(false);
  });

  it('matches the whole token, not a prefix of another', async () => {
    const token = newToken();
    const p = await startAgent(`${token}0`, mkdtempSync(join(tmpdir(), 'infir2-tree-')));
    expect(treeMembers(token)).toEqual([]);
    expect(treeMembers(`${token}0`)).toContain(p.agent);
    expect(treeMembers('')).toEqual([]);
  });
});

describe('stopTargets / stopTree', () => {
  it('targets the rank mains, not their data-loader workers nor the agent', async () => {
    const token = newToken();
    const p = await startAgent(token, mkdtempSync(join(tmpdir(), 'infir2-tree-')));
    const t = stopTargets(treeMembers(token));
    expect(t.ranks.sort()).toEqual([...p.ranks].sort());
    expect(t.roots).toEqual([p.agent]);
  });

  it('lets the rank mains save, then stops the rest: nothing left, both saved', async () => {
    const token = newToken();
    const dir = mkdtempSync(join(tmpdir(), 'infir2-tree-'));
    await startAgent(token, dir);
    expect(await stopTree(token, { allowanceMs: 20_000, graceMs: 2_000 })).toMatch(/gone|killed/);
    expect(treeAlive(token)).toBe(false);
    expect(existsSync(join(dir, 'saved0')) && existsSync(join(dir, 'saved1'))).toBe(true);
  });

  it('SIGKILLs at once when aborted (a hang found meanwhile)', async () => {
    const token = newToken();
    const dir = mkdtempSync(join(tmpdir(), 'infir2-tree-'));
    await startAgent(token, dir);
    const abort = new AbortController();
    abort.abort();
    const t0 = Date.now();
    expect(await stopTree(token, { allowanceMs: 60_000, graceMs: 60_000, abort: abort.signal })).toBe('killed');
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(treeAlive(token)).toBe(false);
    expect(existsSync(join(dir, 'saved0'))).toBe(false);
  });
});
