/**
 * Which interpreter runs the launcher (activities/trainer-process.ts `launcherPython`): the one `python3` on the
 * worker's PATH really is, asked once, so that a version manager's shim (pyenv's is a shell script that runs
 * `pyenv exec`) is not paid on every step's launch.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';

const REAL = '/usr/bin/python3';
const saved = { PATH: process.env.PATH, INFIR2_LAUNCHER_PYTHON: process.env.INFIR2_LAUNCHER_PYTHON };
const dirs: string[] = [];

/** A directory first on PATH whose `python3` is a shell script running `body`. */
function shim(body: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'infir2-shim-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'python3'), `#!/bin/sh\n${body}\n`);
  chmodSync(join(dir, 'python3'), 0o755);
  process.env.PATH = `${dir}:${saved.PATH}`;
  delete process.env.INFIR2_LAUNCHER_PYTHON;
  return join(dir, 'python3');
}

/** A fresh module: the answer is kept for the worker's life. */
async function launcherPython(): Promise<string> {
  vi.resetModules();
  return (await import('../../../src/activities/trainer-process.js')).launcherPython();
}

afterEach(() => {
  process.env.PATH = saved.PATH;
  if (saved.INFIR2_LAUNCHER_PYTHON === undefined) delete process.env.INFIR2_LAUNCHER_PYTHON;
  else process.env.INFIR2_LAUNCHER_PYTHON = saved.INFIR2_LAUNCHER_PYTHON;
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('the launcher interpreter', () => {
  it('is the interpreter a shim on PATH runs, not the shim', async () => {
    const script = shim(`exec ${REAL} "$@"`);
    const py = await launcherPython();
    expect(py).not.toBe(script);
    expect(py).toBe(REAL);
  });

  it('is INFIR2_LAUNCHER_PYTHON where it is set, unasked', async () => {
    shim('exit 1');
    process.env.INFIR2_LAUNCHER_PYTHON = '/opt/py/bin/python3';
    expect(await launcherPython()).toBe('/opt/py/bin/python3');
  });

  it('is plain python3 where the question fails (the launch then says what is wrong with it)', async () => {
    shim('echo "pyenv: python3: command not found" >&2; exit 127');
    expect(await launcherPython()).toBe('python3');
    shim('echo not-a-path');
    expect(await launcherPython()).toBe('python3');
  });
});
