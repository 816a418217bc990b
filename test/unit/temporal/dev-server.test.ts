/**
 * The dev server's command line (`temporal server start-dev`), and the detached spawn it is started with.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { groupAlive } from '../../../src/util/process-group.js';
import { devServerArgs, spawnDetached, stopDevServer } from '../../../src/temporal/dev-server.js';
import { temporalBin } from '../../../src/util/paths.js';

const SA_FLAGS = [
  '--search-attribute', 'RecipeName=Keyword',
  '--search-attribute', 'Stage=KeywordList',
  '--search-attribute', 'TrainPrecision=Keyword',
  '--search-attribute', 'RecipeRunId=Keyword',
];
const TAIL = ['--sqlite-pragma', 'journal_mode=WAL', '--sqlite-pragma', 'synchronous=NORMAL', '--log-level', 'warn'];

/** The value after the last occurrence of `flag`. */
const value = (argv: string[], flag: string) => (argv.includes(flag) ? argv[argv.lastIndexOf(flag) + 1] : undefined);

describe('devServerArgs', () => {
  it('defaults to 127.0.0.1:7233 with the UI on port + 1000 and the db file in the state dir', () => {
    expect(devServerArgs({ temporalBin: '/opt/temporal', stateDir: '/state' })).toEqual([
      'server', 'start-dev',
      '--db-filename', '/state/temporal.sqlite',
      '--ip', '127.0.0.1',
      '--port', '7233',
      '--ui-port', '8233',
      ...SA_FLAGS,
      ...TAIL,
    ]);
  });

  it('takes the ip and port, and derives the UI port from the port', () => {
    const argv = devServerArgs({ temporalBin: 't', stateDir: '/s', ip: '0.0.0.0', port: 17233 });
    expect(value(argv, '--ip')).toBe('0.0.0.0');
    expect(value(argv, '--port')).toBe('17233');
    expect(value(argv, '--ui-port')).toBe('18233');
  });

  it('takes an explicit UI port', () => {
    expect(value(devServerArgs({ temporalBin: 't', stateDir: '/s', port: 7300, uiPort: 9000 }), '--ui-port')).toBe('9000');
  });

  it('headless: --headless and no --ui-port', () => {
    const argv = devServerArgs({ temporalBin: 't', stateDir: '/s', port: 7300, uiPort: 9000, headless: true });
    expect(argv).toContain('--headless');
    expect(argv).not.toContain('--ui-port');
    expect(argv).toEqual(['server', 'start-dev', '--db-filename', '/s/temporal.sqlite', '--ip', '127.0.0.1', '--port', '7300', '--headless', ...SA_FLAGS, ...TAIL]);
  });

  it("points the UI at a codec server when given one (not when headless: there is no UI)", () => {
    expect(value(devServerArgs({ temporalBin: 't', stateDir: '/s', uiCodecEndpoint: 'http://127.0.0.1:8234' }), '--ui-codec-endpoint')).toBe('http://127.0.0.1:8234');
    expect(devServerArgs({ temporalBin: 't', stateDir: '/s' })).not.toContain('--ui-codec-endpoint');
    expect(devServerArgs({ temporalBin: 't', stateDir: '/s', headless: true, uiCodecEndpoint: 'http://x' })).not.toContain('--ui-codec-endpoint');
  });

  it('passes one --search-attribute per key', () => {
    const argv = devServerArgs({ temporalBin: 't', stateDir: '/s' });
    expect(argv.filter((a) => a === '--search-attribute')).toHaveLength(4);
  });

  it('keeps a state dir with spaces as one argument (no shell)', () => {
    expect(value(devServerArgs({ temporalBin: 't', stateDir: '/my state/dir' }), '--db-filename')).toBe('/my state/dir/temporal.sqlite');
  });

  // The pinned CLI is there after `make setup`; this checks the flags against its own help.
  it.skipIf(!existsSync(temporalBin()))('uses only flags the pinned Temporal CLI knows', () => {
    const help = execFileSync(temporalBin(), ['server', 'start-dev', '--help'], { encoding: 'utf8' });
    const global = execFileSync(temporalBin(), ['options'], { encoding: 'utf8' });
    const argv = devServerArgs({ temporalBin: temporalBin(), stateDir: '/s', headless: true });
    const withUi = devServerArgs({ temporalBin: 't', stateDir: '/s', uiCodecEndpoint: 'http://127.0.0.1:8234' });
    const flags = [...new Set([...argv, ...withUi].filter((a) => a.startsWith('--')))];
    for (const f of flags) expect(`${help}\n${global}`, f).toMatch(new RegExp(`${f}\\b`));
    expect(help).toMatch(/KeywordList/);
  });
});

describe('spawnDetached / stopDevServer', () => {
  let dir: string | null = null;
  const pids: number[] = [];
  afterEach(() => {
    for (const pid of pids.splice(0)) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = null;
  });

  it('appends stdout and stderr to the log file', async () => {
    dir = mkdtempSync(join(tmpdir(), 'infir2-dev-'));
    const log = join(dir, 'server.log');
    const child = spawnDetached('/bin/sh', ['-c', 'echo out; echo err >&2'], log);
    pids.push(child.pid!);
    await new Promise((r) => child.once('exit', r));
    spawnDetached('/bin/sh', ['-c', 'echo second'], log).once('exit', () => undefined);
    const deadline = Date.now() + 5_000;
    while (!readFileSync(log, 'utf8').includes('second') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(readFileSync(log, 'utf8').split('\n').filter(Boolean).sort()).toEqual(['err', 'out', 'second']);
  });

  it('starts the daemon as the leader of its own group, which stopDevServer ends', async () => {
    dir = mkdtempSync(join(tmpdir(), 'infir2-dev-'));
    const child = spawnDetached('/bin/sleep', ['30'], join(dir, 'log'));
    pids.push(child.pid!);
    expect(groupAlive(child.pid!)).toBe(true);
    await stopDevServer(child.pid!, 2_000);
    expect(groupAlive(child.pid!)).toBe(false);
    await expect(stopDevServer(child.pid!, 2_000)).resolves.toBeUndefined(); // already stopped: no-op
  });
});
