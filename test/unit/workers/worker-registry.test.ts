/**
 * The host's worker records: a live worker is listed, a dead one's record is swept; GPU overlap warnings; the
 * loopback addresses `up` compares; which workers a state directory owns.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { foreignWorkers, ownedWorkers, sameAddress } from '../../../src/cli/owned-workers.js';
import { gpuOverlapWarnings, liveWorkers, registerWorker, scanWorkers, STARTED_BY_ENV, type WorkerRecord } from '../../../src/workers/worker-registry.js';
import { processStartTicks } from '../../../src/util/process-group.js';
import { runInProcess } from '../cli/run-cli.js';

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
  pid: 1, startTicks: null, address: '127.0.0.1:7233', namespace: 'default', taskQueues: ['infir2-local'], orchestrator: true, gpus: [], startedBy: null, startedAt: '2026-11-23T00:00:00Z', uid: 0, cmdline: ['x'], ...o,
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

const isRoot = process.geteuid?.() === 0;
const NOBODY = 65534;

/** A long-lived process in its own group (the kind `down` stops), and its end. */
function victim(): { pid: number; alive: () => boolean; end: () => void } {
  const p = spawn('sleep', ['300'], { detached: true, stdio: 'ignore' });
  return {
    pid: p.pid!,
    alive: () => processStartTicks(p.pid!) !== null && p.exitCode === null && p.signalCode === null,
    end: () => {
      try {
        process.kill(-p.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    },
  };
}

describe('records another local user wrote (the host directory is world-writable)', () => {
  it.skipIf(!isRoot)("a record `nobody` wrote naming root's process group: root's `down` names it and leaves the process alone", async () => {
    const v = victim();
    const state = mkdtempSync(join(tmpdir(), 'infir2-state-'));
    process.env.INFIR2_HOME = state;
    chmodSync(host, 0o1777); // as the default host directory under /tmp is
    try {
      scanWorkers(); // makes the directory
      const file = join(host, 'workers', `${v.pid}.json`);
      // What the issue's attacker wrote, as nobody: the victim's pid, no start time, root's state directory.
      const forged = JSON.stringify(record({ pid: v.pid, startTicks: null, startedBy: state, uid: 0 }));
      execFileSync(process.execPath, ['-e', `require('fs').writeFileSync(${JSON.stringify(file)}, ${JSON.stringify(forged)})`], { uid: NOBODY, gid: NOBODY });
      const r = await runInProcess(['down']);
      expect(r.code).toBe(0);
      expect(r.stdout).not.toMatch(/stopped the local worker/);
      expect(r.stderr).toContain(`warning: worker registry: ignored ${file}: `);
      expect(v.alive()).toBe(true);
      // The same record with a start time and the victim's command line: still another user's word about root's process.
      const facts = { startTicks: processStartTicks(v.pid), cmdline: ['sleep', '300'] };
      const better = JSON.stringify(record({ pid: v.pid, startedBy: state, uid: 0, ...facts }));
      execFileSync(process.execPath, ['-e', `require('fs').writeFileSync(${JSON.stringify(file)}, ${JSON.stringify(better)})`], { uid: NOBODY, gid: NOBODY });
      expect(scanWorkers().ignored).toEqual([`ignored ${file}: written by uid ${NOBODY}, but pid ${v.pid} runs as uid 0`]);
      expect((await runInProcess(['down'])).stdout).not.toMatch(/stopped/);
      expect(v.alive()).toBe(true);
    } finally {
      v.end();
    }
  });

  it.skipIf(!isRoot)("a record nobody wrote for nobody's own process is trusted as nobody's, and never one root's `down` owns", () => {
    chmodSync(host, 0o1777);
    scanWorkers();
    const state = '/root-state';
    const child = spawn('sleep', ['300'], { uid: NOBODY, gid: NOBODY, detached: true, stdio: 'ignore' });
    try {
      const file = join(host, 'workers', `${child.pid}.json`);
      for (let i = 0; i < 100 && processStartTicks(child.pid!) === null; i++) execFileSync('sleep', ['0.01']);
      const rec = JSON.stringify(record({ pid: child.pid!, startTicks: processStartTicks(child.pid!), cmdline: ['sleep', '300'], uid: NOBODY, startedBy: state }));
      execFileSync(process.execPath, ['-e', `require('fs').writeFileSync(${JSON.stringify(file)}, ${JSON.stringify(rec)})`], { uid: NOBODY, gid: NOBODY });
      expect(scanWorkers().live.map((w) => w.pid)).toEqual([child.pid]);
      expect(ownedWorkers(state, null)).toEqual([]);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('a record that is a link, a FIFO or a hard link is named and passed over, never read through or blocked on', () => {
    scanWorkers();
    const dir = join(host, 'workers');
    const [v, w] = [victim(), victim()];
    try {
      const target = join(host, 'elsewhere.json');
      writeFileSync(target, JSON.stringify(record({ pid: v.pid })));
      execFileSync('ln', ['-s', target, join(dir, `${v.pid}.json`)]);
      execFileSync('ln', [target, join(dir, `${w.pid}.json`)]);
      execFileSync('mkfifo', [join(dir, `${process.pid}.json`)]);
      const scan = scanWorkers();
      expect(scan.live).toEqual([]);
      const why = ' refused (infir2 writes and trusts only its own regular files there)';
      expect(scan.ignored.sort()).toEqual([
        `ignored ${join(dir, `${process.pid}.json`)}: is a FIFO:${why}`,
        `ignored ${join(dir, `${v.pid}.json`)}: is a symbolic link:${why}`,
        `ignored ${join(dir, `${w.pid}.json`)}: has 2 hard links (another name for someone else's file):${why}`,
      ].sort());
    } finally {
      v.end();
      w.end();
    }
  });

  it("a worker's own record: its start time and command line, owned by its user", () => {
    const unregister = registerWorker({ address: 'h:1', namespace: 'default', taskQueues: ['q'], orchestrator: false, gpus: [] });
    try {
      const [me] = liveWorkers();
      expect(me).toMatchObject({ pid: process.pid, uid: process.geteuid?.(), startTicks: processStartTicks(process.pid) });
      expect(me!.cmdline).toEqual(readFileSync('/proc/self/cmdline', 'utf8').split('\0').filter(Boolean));
    } finally {
      unregister();
    }
  });
});
