/**
 * INFIR2_HOME and INFIR2_HOST_DIR pointing where infir2 cannot write: every verb refuses at once, one line per
 * variable, exit 2 (they used to spin in Node's recursive mkdir under /proc, or fail deep inside `up`).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkEnvDirs } from '../../../src/cli/env-dirs.js';
import { runInProcess } from './run-cli.js';

let tmp: string;
const saved = { home: process.env.INFIR2_HOME, host: process.env.INFIR2_HOST_DIR };
beforeEach(() => {
  tmp = mkdtempSync(join(tmpdir(), 'infir2-env-dirs-'));
});
afterEach(() => {
  for (const [k, v] of [['INFIR2_HOME', saved.home], ['INFIR2_HOST_DIR', saved.host]] as const) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  rmSync(tmp, { recursive: true, force: true });
});

describe('the directories named by the environment', () => {
  it('unset, or a directory that can be made: no problem, and nothing made by the check', () => {
    expect(() => checkEnvDirs({})).not.toThrow();
    expect(() => checkEnvDirs({ INFIR2_HOME: join(tmp, 'a', 'b'), INFIR2_HOST_DIR: tmp })).not.toThrow();
  });

  it('every verb exits 2 with a line per variable, before doing anything, in bounded time', async () => {
    writeFileSync(join(tmp, 'file'), 'x');
    process.env.INFIR2_HOME = '/proc/x/state';
    process.env.INFIR2_HOST_DIR = join(tmp, 'file', 'host');
    const t0 = Date.now();
    const r = await runInProcess(['up']);
    expect(Date.now() - t0).toBeLessThan(2_000);
    expect([r.code, r.stdout]).toEqual([2, '']);
    expect(r.stderr.split('\n').filter(Boolean)).toEqual([
      "error: INFIR2_HOME: /proc is on the proc pseudo file system, which cannot hold the embedded default's state: expected a writable directory",
      `error: INFIR2_HOST_DIR: ${join(tmp, 'file')} is not a directory: expected a writable directory`,
    ]);
    const s = await runInProcess(['status', 'some-run']);
    expect(s.code).toBe(2);
  });
});
