/** Checkpoint retention on real directories: the policy, the record, pins, and the protocol with readers. */
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RetentionSpec } from '../../../src/plan/types.js';
import { inspectCheckpointDir, iterDirName, TRACKER_FILE } from '../../../src/rundir/checkpoints.js';
import { applyRetention, CheckpointGoneError, deletions, pinCheckpoint, retentionVictims } from '../../../src/rundir/retention.js';

const spec = (s: Partial<RetentionSpec>): RetentionSpec => ({ last: null, every: null, protect: [], summary: 'test', maxKept: 0, checkpointBytes: { withOptimizer: 0, weightsOnly: 0 }, ...s });

/** A Megatron-layout root with complete checkpoints at `its` (metadata.json, tracker at the last). */
function root(its: number[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'infir2-retention-'));
  for (const it of its) {
    mkdirSync(join(dir, iterDirName(it)));
    writeFileSync(join(dir, iterDirName(it), 'model.pt'), 'x'.repeat(100));
    writeFileSync(join(dir, iterDirName(it), 'metadata.json'), '{}');
  }
  writeFileSync(join(dir, TRACKER_FILE), String(its.at(-1)));
  return dir;
}

describe('retentionVictims', () => {
  it('keeps the newest N, every Nth, the protected and the pinned; the newest always', () => {
    const all = [10, 20, 30, 40, 50, 60];
    expect(retentionVictims(all, spec({ last: 2 }))).toEqual([10, 20, 30, 40]);
    expect(retentionVictims(all, spec({ last: 2, every: 30 }))).toEqual([10, 20, 40]);
    expect(retentionVictims(all, spec({ last: 1, protect: [10] }), new Set([40]))).toEqual([20, 30, 50]);
    expect(retentionVictims(all, spec({ every: 25 }))).toEqual([10, 20, 30, 40]); // 50 (a multiple), 60 (the newest)
    expect(retentionVictims(all, spec({}))).toEqual([]); // no limit: nothing goes
    expect(retentionVictims([], spec({ last: 1 }))).toEqual([]);
  });

  it('keeps a checkpoint queued for evaluation until its evaluation has a result', () => {
    const all = [10, 20, 30, 40, 50, 60];
    const awaitEval = { every: 20, marker: '/r/results/s.eval{iteration}.arith.json' };
    expect(retentionVictims(all, spec({ last: 1, awaitEval }), new Set(), (it) => it === 20)).toEqual([10, 20, 30, 50]);
  });
});

describe('applyRetention', () => {
  it('deletes what the policy lets go, records it, and leaves the rest loadable', async () => {
    const dir = root([10, 20, 30, 40]);
    expect(await applyRetention(dir, spec({ last: 2, protect: [10], summary: 'keep last 2, boundaries 10' }), 'cpt.stable attempt 1')).toEqual([20]);
    expect(inspectCheckpointDir(dir).complete).toEqual([10, 30, 40]);
    expect(deletions(dir)).toEqual([{ iteration: 20, deletedAt: expect.any(String), policy: 'keep last 2, boundaries 10', by: 'cpt.stable attempt 1' }]);
    // Idempotent: a second pass has nothing to do.
    expect(await applyRetention(dir, spec({ last: 2, protect: [10] }), 'x')).toEqual([]);
  });

  it('finishes a deletion a crash interrupted (a directory renamed aside), and never counts it as a checkpoint', async () => {
    const dir = root([10, 20]);
    mkdirSync(join(dir, `${iterDirName(5)}.deleting-abc`));
    await applyRetention(dir, spec({ last: 1 }), 'x');
    expect(readdirSync(dir).filter((n) => n.includes('deleting'))).toEqual([]);
  });

  it('never deletes a pinned checkpoint; the reader that pinned it sees it until it lets go', async () => {
    const dir = root([10, 20, 30]);
    const release = await pinCheckpoint(dir, 10, 'a fork of cpt.stable');
    expect(await applyRetention(dir, spec({ last: 1 }), 'x')).toEqual([20]);
    expect(existsSync(join(dir, iterDirName(10), 'model.pt'))).toBe(true);
    release();
    expect(await applyRetention(dir, spec({ last: 1 }), 'x')).toEqual([10]);
  });

  it('a reader that comes after a deletion is told what deleted it; a missing root is not created', async () => {
    const dir = root([10, 20, 30]);
    await applyRetention(dir, spec({ last: 1, summary: 'keep last 1' }), 'x');
    const err = await pinCheckpoint(dir, 10, 'reader').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CheckpointGoneError);
    expect((err as Error).message).toMatch(new RegExp(`^checkpoint 10 of ${dir} was deleted by its retention policy \\(keep last 1\\) at \\d{4}-`));
    expect(readdirSync(join(dir, '.infir2-pins'))).toEqual([]); // its pin is gone with it
    const nowhere = join(dir, 'no', 'such');
    await expect(pinCheckpoint(nowhere, 1, 'reader')).rejects.toThrow(/no such directory/);
    expect(existsSync(nowhere)).toBe(false);
  });

  it('a link planted at the record\'s name is never appended through: the pass stops before deleting anything', async () => {
    const dir = root([10, 20, 30]);
    const outside = join(mkdtempSync(join(tmpdir(), 'infir2-outside-')), 'not-yours.txt');
    writeFileSync(outside, 'precious\n');
    symlinkSync(outside, join(dir, '.infir2-retention.jsonl'));
    await expect(applyRetention(dir, spec({ last: 1 }), 'x')).rejects.toThrow(/\.infir2-retention\.jsonl is a symbolic link: refused/);
    expect(readFileSync(outside, 'utf8')).toBe('precious\n');
    expect(inspectCheckpointDir(dir).complete).toEqual([10, 20, 30]); // nothing deleted unrecorded
    expect(deletions(dir)).toEqual([]); // the link is not read either
  });

  it('reads past lines of the record that are not deletions instead of failing fork or resume', async () => {
    const dir = root([10, 20, 30]);
    await applyRetention(dir, spec({ last: 2 }), 'x');
    appendFileSync(join(dir, '.infir2-retention.jsonl'), 'garbage\n{"iteration": "x"}\n');
    expect(deletions(dir).map((d) => d.iteration)).toEqual([10]);
  });

  it('pins only in a real directory of the root, never through a link', async () => {
    const dir = root([10]);
    const elsewhere = mkdtempSync(join(tmpdir(), 'infir2-elsewhere-'));
    symlinkSync(elsewhere, join(dir, '.infir2-pins'));
    await expect(pinCheckpoint(dir, 10, 'reader')).rejects.toThrow(/\.infir2-pins is not a directory/);
    expect(readdirSync(elsewhere)).toEqual([]);
  });
});
