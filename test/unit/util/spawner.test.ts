/**
 * The spawn helper (util/spawner.ts): what the supervisor relied on from execa stays true (a detached process in
 * its own session, stdout and stderr interleaved in one stream with backpressure, the exit code or signal, a
 * clear reason when it cannot start), from the helper and from this process alike; a helper that dies loses no
 * trainer, only its exit status, and says so.
 */
import { readFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { pidAlive } from '../../../src/util/process-group.js';
import { Spawner, type SpawnedProcess } from '../../../src/util/spawner.js';

const text = (p: SpawnedProcess) =>
  new Promise<string>((resolve) => {
    let out = '';
    p.all.on('data', (d: Buffer) => (out += d.toString()));
    p.all.on('end', () => resolve(out));
  });
/** Field 6 of /proc/<pid>/stat: the session id. */
const sessionOf = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[3]);

const spawners = { helper: new Spawner(true), 'this process': new Spawner(false) };
afterAll(() => spawners.helper.helper?.disconnect());

describe.each(Object.entries(spawners))('a process started by %s', (_, spawner) => {
  const sh = (script: string, env: Record<string, string> = {}) => spawner.spawn('sh', ['-c', script], { cwd: '/tmp', env });

  it('interleaves stdout and stderr in one stream and reports the exit code; its environment adds to ours', async () => {
    const p = await sh('echo out; echo err >&2; echo "$GREETING $HOME"; exit 3', { GREETING: 'hi' });
    const out = text(p);
    expect(await p.exited).toEqual({ exitCode: 3 });
    expect(await out).toBe(`out\nerr\nhi ${process.env.HOME}\n`);
  });

  it('runs in a session of its own, in the cwd given', async () => {
    const p = await spawner.spawn('sh', ['-c', 'pwd; sleep 0.5'], { cwd: '/proc', env: {} });
    const out = text(p);
    expect(sessionOf(p.pid!)).toBe(p.pid);
    await p.exited;
    expect(await out).toBe('/proc\n');
  });

  it('reports the signal that killed it', async () => {
    const p = await sh('kill -TERM $$; sleep 5');
    void text(p);
    expect(await p.exited).toEqual({ signal: 'SIGTERM' });
  });

  it('a program that does not exist: no pid, and why', async () => {
    const p = await spawner.spawn('/no/such/trainer', [], { cwd: '/tmp', env: {} });
    expect(p.pid).toBeUndefined();
    expect((await p.exited).message).toMatch(/could not start \/no\/such\/trainer: .*ENOENT/);
  });

  it('a writer waits while the reader is paused (backpressure), and nothing is lost', async () => {
    // 8 MiB: far more than a socket's buffers; the writer must block, not fail with EAGAIN.
    const p = await spawner.spawn('python3', ['-c', 'import sys\nfor i in range(131072): sys.stdout.write("%063d\\n" % i)'], { cwd: '/tmp', env: {} });
    p.all.pause();
    await new Promise((r) => setTimeout(r, 700));
    expect(pidAlive(p.pid!)).toBe(true);
    const reading = text(p);
    p.all.resume(); // a stream paused by hand stays paused when a reader comes
    const out = await reading;
    expect(await p.exited).toEqual({ exitCode: 0 });
    const lines = out.split('\n');
    expect(lines.length).toBe(131073);
    expect(lines[131071]).toBe('131071'.padStart(63, '0'));
  });

  it('ends soon after the exit even while a process it left holds the output open', async () => {
    const p = await sh('sleep 30 & echo $!');
    let left = '';
    p.all.on('data', (d: Buffer) => (left += d.toString()));
    const t0 = Date.now();
    expect(await p.exited).toEqual({ exitCode: 0 });
    expect(Date.now() - t0).toBeLessThan(5_000);
    process.kill(Number(left.trim()), 'SIGKILL');
  });
});

describe('the spawn helper', () => {
  it('refuses a connection that does not name a live launch', async () => {
    const spawner = spawners.helper;
    const p = await spawner.spawn('sh', ['-c', 'echo "$PPID"'], { cwd: '/tmp', env: {} });
    void text(p);
    await p.exited;
    const path = (spawner as unknown as { server: Promise<string> }).server;
    const sock = createConnection(await path);
    await new Promise<void>((resolve) => sock.on('connect', () => resolve()));
    sock.write(`${'0'.repeat(32)}\nforged output\n`);
    const closed = await new Promise<boolean>((resolve) => {
      sock.on('close', () => resolve(true));
      setTimeout(() => resolve(false), 3000);
    });
    expect(closed).toBe(true);
  });

  it('a socket the helper cannot reach fails the launch as an error of this host, not as a bad command', async () => {
    const spawner = new Spawner(true);
    // Where nobody listens (the spawner's own socket cannot be removed: it is abstract).
    (spawner as unknown as { server: Promise<string> }).server = Promise.resolve(`\0infir2-nobody-${process.pid}`);
    await expect(spawner.spawn('true', [], { cwd: '/tmp', env: {} })).rejects.toThrow(/could not start a trainer: the worker's output socket: .*ECONNREFUSED/);
    spawner.helper?.disconnect();
  });

  it('dies: its trainers live on, their ends are still seen (status lost, said so), and the next launch starts a new helper', async () => {
    const spawner = new Spawner(true);
    const p = await spawner.spawn('sleep', ['1.5'], { cwd: '/tmp', env: {} });
    void text(p);
    const first = spawner.helper!;
    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    expect(pidAlive(p.pid!)).toBe(true);
    const end = await p.exited;
    expect(end.message).toMatch(/exit status .* was lost: the spawn helper exited \(SIGKILL\)/);
    expect(pidAlive(p.pid!)).toBe(false);
    const q = await spawner.spawn('true', [], { cwd: '/tmp', env: {} });
    void text(q);
    expect(await q.exited).toEqual({ exitCode: 0 });
    expect(spawner.helper).not.toBe(first);
    spawner.helper?.disconnect();
  });
});
