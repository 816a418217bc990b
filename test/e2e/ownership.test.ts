/**
 * `up` and `down` own what they start, and a worker never serves two servers (issue 20, item 1): the server
 * killed and `up` again leaves one worker, `down` leaves none; `up` refuses beside a worker it did not start; a
 * worker whose server is replaced by one on another database stops, while a restart on the same database is
 * ridden out.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { startDevServer, stopDevServer } from '../../src/temporal/dev-server.js';
import { groupAlive, terminateGroup } from '../../src/util/process-group.js';
import { freePort, ROOT, sleep, TEMPORAL_BIN, waitFor } from '../integration/harness.js';

const run = promisify(execFile);
const CLI = join(ROOT, 'bin', 'infir2.js');

async function infir2(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, timeout: 150_000 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** Live `infir2 worker` processes whose environment names this host directory. */
function workersOf(hostDir: string): number[] {
  return workerProcesses().filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`INFIR2_HOST_DIR=${hostDir}`);
    } catch {
      return false;
    }
  });
}

function workerProcesses(): number[] {
  const pids: number[] = [];
  for (const name of readdirProc()) {
    try {
      const cmd = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue;
      if (cmd.some((a) => a.endsWith('infir2.js')) && cmd.includes('worker')) pids.push(Number(name));
    } catch {
      /* exited */
    }
  }
  return pids;
}

function readdirSafe(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function readdirProc(): string[] {
  return readdirSync('/proc').filter((n) => /^\d+$/.test(n));
}

const cleanup: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c().catch(() => undefined);
});

describe('up and down own what they start', () => {
  it('server killed, `up` again: one worker; a worker `up` did not start is refused; `down`: none', async () => {
    const home = mkdtempSync(join(tmpdir(), 'infir2-home-'));
    const hostDir = join(home, 'host');
    const port = await freePort();
    const env = { INFIR2_HOME: home, INFIR2_HOST_DIR: hostDir, TEMPORAL_ADDRESS: `127.0.0.1:${port}` };
    cleanup.push(async () => void (await infir2(['down'], env)));

    expect((await infir2(['up', '--port', String(port), '--headless'], env)).code).toBe(0);
    const first = JSON.parse(readFileSync(join(home, 'embedded.json'), 'utf8')) as { serverPid: number; workerPid: number };
    await waitFor('the first worker', () => workersOf(hostDir).length === 1);
    // Connected, not just started: a worker still connecting when its server dies exits on its own (cannot
    // reach Temporal), which is not the case under test. Its registry record is written once it has connected.
    await waitFor('the first worker to connect', () => readdirSafe(join(hostDir, 'workers')).some((f) => f === `${first.workerPid}.json`));

    // The server dies; its worker lives on and would reconnect to the next server.
    process.kill(-first.serverPid, 'SIGKILL');
    await waitFor('the server to die', () => !groupAlive(first.serverPid));
    expect(groupAlive(first.workerPid)).toBe(true);

    const again = await infir2(['up', '--port', String(port), '--headless'], env);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(`stopped the earlier local worker (pid ${first.workerPid}): its server was gone`);
    expect(groupAlive(first.workerPid)).toBe(false);
    const second = JSON.parse(readFileSync(join(home, 'embedded.json'), 'utf8')) as { workerPid: number };
    await waitFor('the new worker', () => workersOf(hostDir).length === 1 && workersOf(hostDir)[0] === second.workerPid);
    await sleep(1_000);
    expect(workersOf(hostDir)).toEqual([second.workerPid]);

    // A worker someone started by hand on the same pool and server: `up` refuses rather than share the queue.
    const foreign = spawn(process.execPath, [CLI, 'worker', '--pool', 'local'], { env: { ...process.env, ...env }, detached: true, stdio: 'ignore' });
    cleanup.push(() => terminateGroup(foreign.pid!, 5_000).then(() => undefined));
    await waitFor('the foreign worker to register', () => workersOf(hostDir).length === 2 && registryHas(hostDir, foreign.pid!), 60_000);
    const refused = await infir2(['up', '--port', String(port), '--headless'], env);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(new RegExp(`^error: a worker that \`infir2 up\` did not start already serves infir2-local on 127\\.0\\.0\\.1:${port} \\(pid ${foreign.pid}, since [^)]+\\): stop it, or give \`up\` other --pool names\\n$`));
    await terminateGroup(foreign.pid!, 10_000);

    const down = await infir2(['down'], env);
    expect(down.code).toBe(0);
    expect(down.stdout).toContain(`stopped the local worker (pid ${second.workerPid})`);
    expect(workersOf(hostDir)).toEqual([]);
  }, 240_000);
});

describe('a worker serves one server', () => {
  it('rides out a restart on the same database, and stops when the server is replaced by another', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'infir2-identity-'));
    const port = await freePort();
    const opts = (state: string) => ({ temporalBin: TEMPORAL_BIN, stateDir: join(dir, state), port, headless: true });
    let server = await startDevServer(opts('a'));
    cleanup.push(() => stopDevServer(server.pid));
    const worker: ChildProcess = spawn(process.execPath, [CLI, 'worker', '--pool', 'p'], {
      env: { ...process.env, TEMPORAL_ADDRESS: server.address, INFIR2_HOST_DIR: join(dir, 'host') },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    cleanup.push(() => terminateGroup(worker.pid!, 5_000).then(() => undefined));
    let err = '';
    worker.stderr!.on('data', (d) => (err += d));
    const exited = new Promise<number | null>((r) => worker.once('exit', (code) => r(code)));
    await waitFor('the worker', () => err.includes('worker ready'));

    await stopDevServer(server.pid);
    server = await startDevServer(opts('a')); // same database: same cluster
    await sleep(12_000); // past one identity check
    expect(worker.exitCode).toBeNull();

    await stopDevServer(server.pid);
    server = await startDevServer(opts('b')); // another database behind the same address
    const code = await Promise.race([exited, sleep(40_000).then(() => 'still running')]);
    expect(code).toBe(1);
    expect(err).toMatch(/the Temporal server at 127\.0\.0\.1:\d+ is now another cluster \(id [0-9a-f-]+ → [0-9a-f-]+: a different database\); stopping so that this worker never mixes the runs of two servers/);
  }, 180_000);
});

function registryHas(hostDir: string, pid: number): boolean {
  try {
    readFileSync(join(hostDir, 'workers', `${pid}.json`));
    return true;
  } catch {
    return false;
  }
}
