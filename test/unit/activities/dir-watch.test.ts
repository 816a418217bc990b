/**
 * What a running attempt depends on, by identity: a path removed or replaced is named; one that holds is not.
 * And the run directory's record: there, gone, or another run's.
 */
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DirWatch } from '../../../src/activities/dir-watch.js';
import { runDirVerdict } from '../../../src/rundir/run-identity.js';

describe('DirWatch', () => {
  it('is quiet while the paths hold, and names a removed directory', () => {
    const d = mkdtempSync(join(tmpdir(), 'infir2-watch-'));
    mkdirSync(join(d, 'ckpt'));
    writeFileSync(join(d, 'ckpt', 'f'), 'x');
    const w = new DirWatch([{ what: 'the run directory', path: d }, { what: "the step's checkpoint directory", path: join(d, 'ckpt') }]);
    writeFileSync(join(d, 'ckpt', 'g'), 'written inside: not a change of identity');
    expect(w.check()).toBeNull();
    rmSync(join(d, 'ckpt'), { recursive: true });
    expect(w.check()).toBe(`the step's checkpoint directory ${join(d, 'ckpt')} was removed while the trainer ran`);
  });

  it('names a directory replaced by another of the same name', () => {
    const d = mkdtempSync(join(tmpdir(), 'infir2-watch-'));
    mkdirSync(join(d, 'step'));
    const w = new DirWatch([{ what: "the step's directory", path: join(d, 'step') }]);
    renameSync(join(d, 'step'), join(d, 'old'));
    mkdirSync(join(d, 'step'));
    expect(w.check()).toMatch(/^the step's directory .*step was replaced while the trainer ran/);
  });

  it('names a lock file another attempt wrote over (a rename gives it a new inode)', () => {
    const d = mkdtempSync(join(tmpdir(), 'infir2-watch-'));
    writeFileSync(join(d, '.infir2.lock'), 'mine');
    const w = new DirWatch([{ what: "the step's lock", path: join(d, '.infir2.lock') }]);
    writeFileSync(join(d, 'tmp'), 'theirs');
    renameSync(join(d, 'tmp'), join(d, '.infir2.lock'));
    expect(w.check()).toMatch(/^the step's lock .* was replaced/);
  });

  it('does not watch a path that was not there at launch', () => {
    const w = new DirWatch([{ what: 'x', path: '/nonexistent/infir2' }]);
    expect(w.check()).toBeNull();
  });
});

describe('runDirVerdict', () => {
  const dir = () => mkdtempSync(join(tmpdir(), 'infir2-runid-'));

  it('accepts the directory of its own run', () => {
    const d = dir();
    writeFileSync(join(d, 'plan.json'), JSON.stringify({ recipe: 'tiny', runId: 'r1', steps: [] }));
    expect(runDirVerdict(d, 'tiny', 'r1')).toBeNull();
  });

  it('calls a removed directory a storage fault (retried: a remount may bring it back)', () => {
    const v = runDirVerdict('/nonexistent/run', 'tiny', 'r1');
    expect(v).toEqual({ cls: 'storage', reason: "the run directory /nonexistent/run no longer holds this run's files (plan.json is gone): it was removed or its file system is not mounted; restore it, or start the run again" });
  });

  it("refuses another run's files as a configuration error", () => {
    const d = dir();
    writeFileSync(join(d, 'plan.json'), JSON.stringify({ recipe: 'tiny', runId: 'other' }));
    expect(runDirVerdict(d, 'tiny', 'r1')).toEqual({ cls: 'config', reason: `the run directory ${d} holds another run's files (plan.json is run 'other' of recipe 'tiny')` });
  });

  it('calls an unparsable record damaged', () => {
    const d = dir();
    writeFileSync(join(d, 'plan.json'), '{"recipe": "ti');
    expect(runDirVerdict(d, 'tiny', 'r1')?.reason).toMatch(/plan\.json is not readable JSON/);
  });
});
