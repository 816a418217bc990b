/**
 * The host's worker records: a live worker is listed, a dead one's record is swept; GPU overlap warnings; the
 * loopback addresses `up` compares; which workers a state directory owns.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { foreignWorkers, ownedWorkers, sameAddress } from '../../../src/cli/owned-workers.js';
import { gpuOverlapWarnings, liveWorkers, registerWorker, STARTED_BY_ENV, type WorkerRecord } from '../../../src/workers/worker-registry.js';

let saved: NodeJS.ProcessEnv;
let host: string;
beforeEach(() => {
  saved = { ...process.env };
  host = mkdtempSync(join(tmpdir(), 'infir2-hostdir-'));
  process.env.INFIR2_HOST_DIR = host;
});
afterEach(() => {
  process.env = saved;
});

const record = (o: Partial<WorkerRecord>): WorkerRecord => ({
  pid: 1, startTicks: null, address: '127.0.0.1:7233', namespace: 'default', taskQueues: ['infir2-local'], orchestrator: true, gpus: [], startedBy: null, startedAt: '2026-11-23T00:00:00Z', ...o,
});

describe('worker registry', () => {
  it('lists a registered live worker and removes it on unregister', () => {
    process.env[STARTED_BY_ENV] = '/state';
    const unregister = registerWorker({ address: 'h:1', namespace: 'default', taskQueues: ['q'], orchestrator: false, gpus: ['0'] });
    expect(liveWorkers()).toMatchObject([{ pid: process.pid, address: 'h:1', gpus: ['0'], startedBy: '/state' }]);
    unregister();
    expect(liveWorkers()).toEqual([]);
  });

  it('sweeps the record of a worker that died without unregistering', () => {
    const dead = spawnSync('true').pid!;
    const file = join(host, 'workers', `${dead}.json`);
    liveWorkers(); // makes the directory
    writeFileSync(file, JSON.stringify(record({ pid: dead })));
    expect(liveWorkers()).toEqual([]);
    expect(existsSync(file)).toBe(false);
  });

  it('treats a reused pid (another start time) as a different, dead worker', () => {
    liveWorkers();
    writeFileSync(join(host, 'workers', `${process.pid}.json`), JSON.stringify(record({ pid: process.pid, startTicks: 1 })));
    expect(liveWorkers()).toEqual([]);
  });

  it('warns once per other worker that shares a GPU, naming the GPUs', () => {
    const others = [record({ pid: 11, gpus: ['0', '1'] }), record({ pid: 12, gpus: ['2'] }), record({ pid: process.pid, gpus: ['0'] })];
    const w = gpuOverlapWarnings(['1', '0'], others);
    expect(w).toHaveLength(1);
    expect(w[0]).toMatch(/^warning: GPUs 0,1 also given to worker pid 11 \(infir2-local on 127\.0\.0\.1:7233\): each GPU still runs one trainer at a time/);
    expect(gpuOverlapWarnings([], others)).toEqual([]);
  });
});

describe('what `up` owns', () => {
  it('compares loopback addresses by port', () => {
    expect(sameAddress('localhost:7233', '127.0.0.1:7233')).toBe(true);
    expect(sameAddress('127.0.0.1:7233', '127.0.0.1:7234')).toBe(false);
    expect(sameAddress('temporal:7233', '127.0.0.1:7233')).toBe(false);
  });

  it('owns the recorded worker and the live workers its state directory started; others serving its pools are foreign', () => {
    process.env[STARTED_BY_ENV] = '/other-state';
    const unregister = registerWorker({ address: 'localhost:7233', namespace: 'default', taskQueues: ['infir2-local'], orchestrator: true, gpus: [] });
    try {
      expect(ownedWorkers('/state', null)).toEqual([]);
      expect(ownedWorkers('/other-state', null)).toEqual([process.pid]);
      expect(foreignWorkers('/state', '127.0.0.1:7233', ['local']).map((w) => w.pid)).toEqual([process.pid]);
      expect(foreignWorkers('/state', '127.0.0.1:7233', ['gpu'])).toEqual([]);
      expect(foreignWorkers('/other-state', '127.0.0.1:7233', ['local'])).toEqual([]);
      const dead = spawnSync('true').pid!;
      expect(ownedWorkers('/state', { serverPid: 1, workerPid: dead, address: '', uiUrl: null, dbFile: '', startedAt: '' })).toEqual([]);
    } finally {
      unregister();
    }
  });
});
