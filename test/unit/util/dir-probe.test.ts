/**
 * The run directory is checked before a run starts, in bounded time, and made without Node's recursive mkdir
 * (which never returns under /proc). A start that fails leaves nothing behind.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeDirs, dirProblem, undoMakeDirs } from '../../../src/util/dir-probe.js';

let tmp: string;
beforeEach(() => {
  tmp = mkdtempSync(join(tmpdir(), 'infir2-probe-'));
});
afterEach(() => rmSync(tmp, { recursive: true, force: true }));

/** A small read-only tmpfs, where this process may mount one (root); null (and the test says why) elsewhere. */
function readOnlyMount(): string | null {
  const dir = join(tmp, 'ro');
  mkdirSync(dir);
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', dir], { stdio: 'ignore' });
    return dir;
  } catch {
    return null;
  }
}

describe('dirProblem', () => {
  it('a writable directory, existing or not yet: no problem, and nothing left by the probe', () => {
    expect(dirProblem(join(tmp, 'a', 'b', 'runs'))).toBeNull();
    expect(dirProblem(tmp)).toBeNull();
    expect(existsSync(join(tmp, 'a'))).toBe(false);
  });

  it('under /proc: named, at once (Node\'s recursive mkdir would spin there forever)', () => {
    const t0 = Date.now();
    expect(dirProblem('/proc/x/runs')).toBe('/proc is on the proc pseudo file system, which cannot hold a run');
    expect(dirProblem('/sys/kernel/x')).toMatch(/sysfs pseudo file system/);
    expect(Date.now() - t0).toBeLessThan(1_000);
  });

  it('a file in the way', () => {
    writeFileSync(join(tmp, 'f'), 'x');
    expect(dirProblem(join(tmp, 'f', 'runs'))).toBe(`${join(tmp, 'f')} is not a directory`);
  });

  it('a read-only mount, even for root', (ctx) => {
    const ro = readOnlyMount();
    if (!ro) return ctx.skip('cannot mount a tmpfs here (needs root): the read-only case is not checked');
    try {
      expect(dirProblem(join(ro, 'runs'))).toBe(`${ro} is not writable: read-only file system`);
    } finally {
      execFileSync('umount', [ro]);
    }
  });
});

describe('makeDirs / undoMakeDirs', () => {
  it('makes every missing level and, undone, removes exactly those', () => {
    mkdirSync(join(tmp, 'keep'));
    const created = makeDirs(join(tmp, 'keep', 'x', 'y'));
    expect(created).toEqual([join(tmp, 'keep', 'x'), join(tmp, 'keep', 'x', 'y')]);
    writeFileSync(join(tmp, 'keep', 'x', 'y', 'plan.json'), '{}');
    undoMakeDirs([join(tmp, 'keep', 'x', 'y', 'plan.json')], created);
    expect(existsSync(join(tmp, 'keep', 'x'))).toBe(false);
    expect(existsSync(join(tmp, 'keep'))).toBe(true);
  });

  it('leaves a directory that holds someone else\'s files', () => {
    const created = makeDirs(join(tmp, 'x'));
    writeFileSync(join(tmp, 'x', 'theirs'), '1');
    undoMakeDirs([], created);
    expect(existsSync(join(tmp, 'x', 'theirs'))).toBe(true);
  });
});
