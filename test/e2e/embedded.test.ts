/**
 * The embedded default through the built CLI, as a user types it: `up`, `status`, `cancel`, `down`, and the
 * exit codes of README.md#the-verbs (3 when Temporal is unreachable, 2 for bad usage).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { groupAlive } from '../../src/util/process-group.js';
import { freePort, ROOT } from '../integration/harness.js';

const run = promisify(execFile);
const CLI = join(ROOT, 'bin', 'infir2.js');

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

async function infir2(args: string[], env: Record<string, string> = {}): Promise<Result> {
  try {
    const r = await run(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, timeout: 120_000 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('exit codes without a server', () => {
  it('says Temporal is unreachable (exit 3) with the hint to run `infir2 up`', async () => {
    const port = await freePort();
    const r = await infir2(['status', 'some-run'], { TEMPORAL_ADDRESS: `127.0.0.1:${port}` });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/^error: cannot reach Temporal at 127\.0\.0\.1:\d+.*infir2 up.*TEMPORAL_ADDRESS/m);
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
  });

  it('says so (exit 3, one line) when TEMPORAL_ADDRESS names a host that does not resolve, for a verb and a worker', async () => {
    for (const args of [['list'], ['worker', '--pool', 'x']]) {
      const r = await infir2(args, { TEMPORAL_ADDRESS: 'no-such-host.invalid:7233' });
      expect(r.code).toBe(3);
      expect(r.stderr).toMatch(/^error: cannot reach Temporal at no-such-host\.invalid:7233 \(.*\); start the embedded server with `infir2 up` or set TEMPORAL_ADDRESS\n$/);
    }
  });

  it('rejects unknown verbs and flags with exit 2', async () => {
    expect((await infir2(['frobnicate'])).code).toBe(2);
    const r = await infir2(['status', 'x', '--bogus']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("error: status: unknown option '--bogus'");
    expect((await infir2(['run'])).stderr).toContain('error: run: missing <recipe>');
  });

  it('checks number flags before doing anything', async () => {
    const port = await infir2(['up', '--port', '99999', '--headless'], { INFIR2_HOME: mkdtempSync(join(tmpdir(), 'infir2-home-')) });
    expect(port).toMatchObject({ code: 2, stderr: "error: --port: expected a whole number from 1 to 65535, got '99999'\n" });
    expect((await infir2(['list', '--limit', '0'])).stderr).toBe("error: --limit: expected a whole number ≥ 1, got '0'\n");
    expect((await infir2(['list', '--limit', '-1'])).stderr).toContain("error: list: --limit: its value starts with '-'; write --limit=VALUE");
  });
});

describe('infir2 up / down', () => {
  let home: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), 'infir2-home-'));
    const port = await freePort();
    env = { INFIR2_HOME: home, TEMPORAL_ADDRESS: `127.0.0.1:${port}` };
    // No --port: `up` starts where TEMPORAL_ADDRESS, which every other verb reads, points.
    const up = await infir2(['up', '--headless'], env);
    expect(up.stderr).toBe('');
    expect(up.code).toBe(0);
    expect(up.stdout).toContain(`Temporal: 127.0.0.1:${port}`);
  });

  afterAll(async () => {
    await infir2(['down'], env);
  });

  it('is idempotent: a second `up` leaves the running server and worker alone', async () => {
    const r = await infir2(['up'], env);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/already running/);
  });

  it('refuses a TEMPORAL_ADDRESS that is not where its running server is (exit 2), naming both', async () => {
    const r = await infir2(['up'], { ...env, TEMPORAL_ADDRESS: '127.0.0.1:1' });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `error: the embedded server already runs at ${env.TEMPORAL_ADDRESS} (state in ${home}), but TEMPORAL_ADDRESS=127.0.0.1:1: the other verbs would not find it; set TEMPORAL_ADDRESS=${env.TEMPORAL_ADDRESS}, or \`infir2 down\` first\n`,
    );
  });

  it('answers status for an unknown run with exit 2 and a one-line error', async () => {
    const r = await infir2(['status', 'no-such-run'], env);
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toBe("error: no run 'no-such-run' (give the id `infir2 run` printed; `infir2 list` shows them)");
  });

  it('refuses a port another server holds, before starting anything (exit 2)', async () => {
    const other = mkdtempSync(join(tmpdir(), 'infir2-home-'));
    const port = env.TEMPORAL_ADDRESS!.split(':')[1]!;
    const r = await infir2(['up', '--port', port, '--headless'], { INFIR2_HOME: other });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`error: --port: ${port} is already in use (another Temporal server? stop it, or choose another --port)\n`);
    expect(existsSync(join(other, 'embedded.json'))).toBe(false);
  });

  it('names a namespace the server does not have (exit 2)', async () => {
    const r = await infir2(['list'], { ...env, TEMPORAL_NAMESPACE: 'nope' });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`error: TEMPORAL_NAMESPACE: no namespace 'nope' on ${env.TEMPORAL_ADDRESS} (the embedded server has 'default')\n`);
  });

  it('`down` stops the server and the worker', async () => {
    const state = JSON.parse(readFileSync(join(home, 'embedded.json'), 'utf8')) as { serverPid: number; workerPid: number };
    expect(groupAlive(state.serverPid)).toBe(true);
    expect(groupAlive(state.workerPid)).toBe(true);
    const r = await infir2(['down'], env);
    expect(r.code).toBe(0);
    expect(groupAlive(state.serverPid)).toBe(false);
    expect(groupAlive(state.workerPid)).toBe(false);
  });
});
