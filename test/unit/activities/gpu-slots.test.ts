/**
 * GpuSlots: k of the worker's GPUs per step, lowest ids first; waiters wake on release; abort while waiting;
 * across processes, one claim per GPU on the host.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { getEventListeners } from 'node:events';
import { chownSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GpuSlots } from '../../../src/activities/gpu-slots.js';
import { HostGpuClaims, holderWords } from '../../../src/activities/host-gpu-claims.js';

/** Let every queued promise continuation run. */
const flush = () => new Promise<void>((r) => setImmediate(r));

/** Track whether a promise has settled, without awaiting it. */
function track<T>(p: Promise<T>) {
  const s: { done: boolean; value?: T; error?: unknown } = { done: false };
  p.then(
    (v) => Object.assign(s, { done: true, value: v }),
    (e) => Object.assign(s, { done: true, error: e }),
  );
  return s;
}

describe('GpuSlots', () => {
  it('hands out the lowest free ids in the worker order', async () => {
    const g = new GpuSlots(['0', '1', '2', '3'], null);
    expect(await g.acquire(2)).toEqual(['0', '1']);
    expect(await g.acquire(1)).toEqual(['2']);
    expect(await g.acquire(1)).toEqual(['3']);
  });

  it('keeps the worker order of ids that are not 0..n-1', async () => {
    const g = new GpuSlots(['4', '5', '6', '7'], null);
    expect(await g.acquire(3)).toEqual(['4', '5', '6']);
    expect(await g.acquire(1)).toEqual(['7']);
  });

  it('returns released ids to their place, so the next acquire takes the lowest again', async () => {
    const g = new GpuSlots(['0', '1', '2', '3'], null);
    const a = await g.acquire(2); // 0,1
    const b = await g.acquire(2); // 2,3
    g.release(b);
    g.release([a[1]!]); // free: 1,2,3 (sorted back into worker order)
    expect(await g.acquire(2)).toEqual(['1', '2']);
    expect(await g.acquire(1)).toEqual(['3']);
  });

  it('makes a waiting acquirer wait until enough GPUs are free, then wakes it', async () => {
    const g = new GpuSlots(['0', '1', '2', '3'], null);
    const a = await g.acquire(3);
    const waiting = track(g.acquire(2));
    await flush();
    expect(waiting.done).toBe(false);

    g.release([a[0]!]); // free: 0 and 3
    await flush();
    expect(waiting).toEqual({ done: true, value: ['0', '3'] });
  });

  it('keeps waiting while a release frees too few', async () => {
    const g = new GpuSlots(['0', '1', '2', '3'], null);
    const a = await g.acquire(4);
    const waiting = track(g.acquire(3));
    g.release([a[3]!]);
    await flush();
    expect(waiting.done).toBe(false);
    g.release([a[1]!]);
    await flush();
    expect(waiting.done).toBe(false);
    g.release([a[0]!]);
    await flush();
    expect(waiting).toEqual({ done: true, value: ['0', '1', '3'] });
  });

  it('wakes every waiter that fits; the rest keep waiting', async () => {
    const g = new GpuSlots(['0', '1', '2', '3'], null);
    const all = await g.acquire(4);
    const w1 = track(g.acquire(1));
    const w2 = track(g.acquire(1));
    const w3 = track(g.acquire(4));
    g.release(all.slice(0, 2));
    await flush();
    expect(w1).toEqual({ done: true, value: ['0'] });
    expect(w2).toEqual({ done: true, value: ['1'] });
    expect(w3.done).toBe(false);
    g.release([...w1.value!, ...w2.value!, ...all.slice(2)]);
    await flush();
    expect(w3).toEqual({ done: true, value: ['0', '1', '2', '3'] });
  });

  it('never hands one GPU to two holders', async () => {
    const g = new GpuSlots(['0', '1', '2', '3'], null);
    const held = new Set<string>();
    const take = async (k: number) => {
      const ids = await g.acquire(k);
      for (const id of ids) {
        expect(held.has(id), `GPU ${id} handed out twice`).toBe(false);
        held.add(id);
      }
      await flush();
      for (const id of ids) held.delete(id);
      g.release(ids);
    };
    await Promise.all([3, 2, 1, 4, 2, 2, 1, 3, 1, 4].map(take));
    expect(await g.acquire(4)).toEqual(['0', '1', '2', '3']);
  });

  it('rejects at once when the step needs more GPUs than the worker has', async () => {
    const g = new GpuSlots(['0', '1'], null);
    await expect(g.acquire(3)).rejects.toThrow('the step needs 3 GPUs per node but this worker has 2 (0,1)');
    const none = new GpuSlots([], null);
    await expect(none.acquire(1)).rejects.toThrow('the step needs 1 GPUs per node but this worker has 0 (none)');
    // Nothing was taken by the failed calls.
    expect(await g.acquire(2)).toEqual(['0', '1']);
  });

  it('resolves k = 0 at once with no ids, even when every GPU is busy or the worker has none', async () => {
    const g = new GpuSlots(['0'], null);
    await g.acquire(1);
    const zero = track(g.acquire(0));
    await flush();
    expect(zero).toEqual({ done: true, value: [] });
    expect(await new GpuSlots([], null).acquire(0)).toEqual([]);
  });

  it('rejects a waiting acquirer with the abort reason and leaves the slots untouched', async () => {
    const g = new GpuSlots(['0', '1'], null);
    const a = await g.acquire(2);
    const ac = new AbortController();
    const waiting = track(g.acquire(1, ac.signal));
    await flush();
    expect(waiting.done).toBe(false);
    const reason = new Error('activity cancelled');
    ac.abort(reason);
    await flush();
    expect(waiting).toEqual({ done: true, error: reason });
    g.release(a);
    expect(await g.acquire(2)).toEqual(['0', '1']); // the aborted waiter took nothing
  });

  it('rejects at once when already aborted and the GPUs are busy', async () => {
    const g = new GpuSlots(['0'], null);
    await g.acquire(1);
    const ac = new AbortController();
    ac.abort(new Error('gone'));
    await expect(g.acquire(1, ac.signal)).rejects.toThrow('gone');
  });

  it('still rejects with an error when aborted without a reason', async () => {
    const g = new GpuSlots(['0'], null);
    await g.acquire(1);
    const ac = new AbortController();
    const p = g.acquire(1, ac.signal);
    ac.abort();
    await expect(p).rejects.toMatchObject({ name: 'AbortError' });
  });

  // BUG (see report): every wake-up of a waiter that still does not fit adds another 'abort' listener to the
  // signal (src/activities/gpu-slots.ts:17) and none is ever removed. A step waiting for its GPUs on the
  // activity's cancellation signal collects one listener per release on the worker.
  it('does not pile up abort listeners on the signal while it waits through many releases', async () => {
    const g = new GpuSlots(['0', '1'], null);
    const held = await g.acquire(1); // one free: a 2-GPU request waits
    const ac = new AbortController();
    const waiting = track(g.acquire(2, ac.signal));
    for (let i = 0; i < 20; i++) {
      const one = await g.acquire(1); // takes the free one
      g.release(one); // wakes the waiter, which still does not fit
      await flush();
    }
    expect(waiting.done).toBe(false);
    expect(getEventListeners(ac.signal, 'abort').length).toBeLessThanOrEqual(1);
    g.release(held);
    await flush();
    expect(waiting).toEqual({ done: true, value: ['0', '1'] });
  });
});

describe('GpuSlots across processes on one host', () => {
  const tmp = () => mkdtempSync(join(tmpdir(), 'infir2-gpus-'));

  it('never hands one GPU to two workers: the second waits, naming the holder, until the first releases', async () => {
    const claims = new HostGpuClaims(tmp());
    const w1 = new GpuSlots(['0', '1'], claims);
    const w2 = new GpuSlots(['0'], claims);
    const mine = await w1.acquire(1, undefined, 'run-a attempt 1');
    expect(mine).toEqual(['0']);
    const heard: Array<string | null> = [];
    const waiting = track(w2.acquire(1, undefined, 'run-b attempt 1', (why) => heard.push(why)));
    await flush();
    expect(waiting.done).toBe(false);
    expect(heard).toEqual([`GPUs: needs 1; GPU 0 is held by run-a attempt 1 (worker pid ${process.pid})`]);
    // Worker 1 still has GPU 1 for itself; worker 2 was only given GPU 0.
    expect(await w1.acquire(1)).toEqual(['1']);
    w1.release(mine);
    await waitUntil(() => waiting.done, 3_000);
    expect(waiting.value).toEqual(['0']);
    expect(heard.at(-1)).toBeNull();
  });

  it('takes over the claim of a worker that died with no trainer', async () => {
    const dir = tmp();
    const dead = deadPid();
    writeFileSync(join(dir, 'gpu-0.json'), JSON.stringify({ gpu: '0', worker: { pid: dead, startTicks: null }, trainer: null, owner: 'gone', since: '', token: 't' }));
    const g = new GpuSlots(['0'], new HostGpuClaims(dir));
    expect(await g.acquire(1)).toEqual(['0']);
    expect(JSON.parse(readFileSync(join(dir, 'gpu-0.json'), 'utf8')).worker.pid).toBe(process.pid);
  });

  it('keeps the GPU claimed while the trainer of a dead worker still runs', async () => {
    const dir = tmp();
    const trainer = spawn('sleep', ['30'], { detached: true, stdio: 'ignore' });
    try {
      writeFileSync(join(dir, 'gpu-0.json'), JSON.stringify({ gpu: '0', worker: { pid: deadPid(), startTicks: null }, trainer: { pid: trainer.pid, startTicks: null }, owner: 'zombie attempt', since: '', token: 't' }));
      const claims = new HostGpuClaims(dir);
      const r = claims.tryClaim('0', 'me');
      expect('holder' in r && holderWords(r.holder)).toMatch(/GPU 0 is held by zombie attempt \(a trainer whose worker \(pid \d+\) is gone, trainer pid \d+\)/);
      process.kill(-trainer.pid!, 'SIGKILL');
      await waitUntil(() => claims.holder('0') === null, 3_000);
      expect('claim' in claims.tryClaim('0', 'me')).toBe(true);
    } finally {
      try {
        process.kill(-trainer.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  });

  it('keeps the GPU claimed while any process of the launch lives, also one in a session of its own after its parent died', async () => {
    const dir = tmp();
    const launch = `t${process.pid}gpu`;
    // A "torchrun" that starts a "rank" in a new session (torch >= 2.1) and is then SIGKILLed: the rank lives on.
    const torchrun = spawn('/usr/bin/python3', ['-c', 'import subprocess, sys, time\np = subprocess.Popen(["sleep", "30"], start_new_session=True)\nprint(p.pid, flush=True)\ntime.sleep(30)'], {
      detached: true,
      stdio: ['ignore', 'pipe', 'ignore'],
      env: { ...process.env, INFIR2_LAUNCH: launch },
    });
    const rank = Number(await new Promise<string>((resolve) => torchrun.stdout!.once('data', (d: Buffer) => resolve(d.toString()))));
    try {
      writeFileSync(join(dir, 'gpu-0.json'), JSON.stringify({ gpu: '0', worker: { pid: deadPid(), startTicks: null }, trainer: { pid: torchrun.pid, startTicks: null }, launch, owner: 'zombie attempt', since: '', token: 't' }));
      const claims = new HostGpuClaims(dir);
      process.kill(-torchrun.pid!, 'SIGKILL');
      await waitUntil(() => torchrun.exitCode !== null || torchrun.signalCode !== null, 3_000);
      expect(claims.holder('0')?.owner).toBe('zombie attempt');
      process.kill(rank, 'SIGKILL');
      await waitUntil(() => claims.holder('0') === null, 3_000);
    } finally {
      for (const pid of [-torchrun.pid!, rank]) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
    }
  });

  it.skipIf(process.geteuid?.() !== 0)("a claim another user wrote in the name of root's process holds nothing; a FIFO is no claim and blocks nobody", async () => {
    const dir = tmp();
    const rootTrainer = spawn('sleep', ['30'], { detached: true, stdio: 'ignore' });
    try {
      // `nobody` says root's live process holds GPU 0: root's worker would wait on it forever.
      const file = join(dir, 'gpu-0.json');
      writeFileSync(file, JSON.stringify({ gpu: '0', worker: { pid: rootTrainer.pid, startTicks: null }, trainer: { pid: rootTrainer.pid, startTicks: null }, owner: 'planted', since: '', token: 't' }));
      chownSync(file, 65534, 65534);
      const claims = new HostGpuClaims(dir);
      expect(claims.holder('0')).toBeNull();
      expect('claim' in claims.tryClaim('0', 'me')).toBe(true);
      execFileSync('mkfifo', [join(dir, 'gpu-1.json')]);
      expect(claims.holder('1')).toBeNull(); // read without blocking
    } finally {
      process.kill(-rootTrainer.pid!, 'SIGKILL');
    }
  });

  it('gives back every claim of a multi-GPU request that cannot be met whole', async () => {
    const claims = new HostGpuClaims(tmp());
    const other = new GpuSlots(['1'], claims);
    await other.acquire(1);
    const g = new GpuSlots(['0', '1'], claims);
    const waiting = track(g.acquire(2));
    await flush();
    expect(waiting.done).toBe(false);
    expect(claims.holder('0')).toBeNull(); // not hoarded while waiting for GPU 1
  });
});

/** A pid no process has: a child that has exited and been reaped. */
function deadPid(): number {
  const r = spawnSync('true');
  return r.pid!;
}

async function waitUntil(cond: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}
