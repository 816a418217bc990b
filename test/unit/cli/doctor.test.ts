/**
 * `infir2 doctor` on this machine: the tiny recipe's steps pass here (exit 0), a pin this node does not meet fails
 * (exit 2, the row names it), bad usage is one line (exit 2), and without a recipe it shows what `--python` has.
 */
import { describe, expect, it } from 'vitest';
import { runInProcess } from './run-cli.js';

describe('infir2 doctor', () => {
  it("passes the tiny recipe's steps on this machine: one table for their shared environment, then each step's disk and inputs", async () => {
    const r = await runInProcess(['doctor', 'tiny']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^infir2 doctor: recipe 'tiny', from /);
    expect(r.stdout).toMatch(/\ncpt\.warmup, cpt\.stable, cpt\.decay, .*: \S+\/\.venv\/bin\/python on /);
    expect(r.stdout).toMatch(/\ntorch +pass +torch 1\.13\.0a0 +>=1\.13\.0a0\n/);
    expect(r.stdout).toMatch(/\ncpt\.warmup disk +pass +.* free on /);
    // Inputs an earlier step of the run makes are not there yet: they are left out, not failed.
    expect(r.stdout).not.toMatch(/refLoad/);
    expect(r.stdout).toMatch(/\n0 failed, 0 warnings, \d+ passed\n$/);
  }, 60_000);

  it('exits 2 when a check fails, naming what was found and what was expected', async () => {
    const r = await runInProcess(['doctor', 'tiny', '--pool', 'local', '--set', 'software.versions.torch=">=2.4"']);
    expect(r.code).toBe(2);
    expect(r.stdout).toMatch(/\ntorch +FAIL +torch 1\.13\.0a0 +>=2\.4 \(software\.versions\.torch\)\n/);
    expect(r.stdout).toMatch(/\n1 failed, /);
  }, 60_000);

  it('refuses an unknown pool, and --pool or --set without a recipe, in one line', async () => {
    const pool = await runInProcess(['doctor', 'tiny', '--pool', 'gpu']);
    expect(pool).toMatchObject({ code: 2, stdout: '', stderr: "error: doctor: --pool: no pool 'gpu' in recipe 'tiny' (its pools: local)\n" });
    const bare = await runInProcess(['doctor', '--pool', 'gpu']);
    expect(bare.code).toBe(2);
    expect(bare.stderr.split('\n')[0]).toBe('error: doctor: --pool and --set need a <recipe>');
  }, 60_000);

  it("without a recipe: every package the interpreter has, no pins, its GPUs if any, and the known-bad table's sources when one is found", async () => {
    const r = await runInProcess(['doctor', '--python', '/usr/bin/python3']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/\npython +pass +Python 3\.\d+\.\d+ \(\/usr\/bin\/python3\)/);
    expect(r.stdout).toMatch(/\ntorch +pass +torch \S+ +-\n/);
    expect(r.stdout).toMatch(/\ngpu +pass +(no NVIDIA GPU \(.*\)|\d+× .*) +-\n/);
  }, 60_000);
});
