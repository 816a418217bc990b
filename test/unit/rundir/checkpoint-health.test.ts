import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BAD_REASON_FILE, badCheckpoints, clearLoadFailures, markBad, prunePartials, recordLoadFailure } from '../../../src/rundir/checkpoint-health.js';
import { inspectCheckpointDir, iterDirName, TRACKER_FILE } from '../../../src/rundir/checkpoints.js';
import { decideResume } from '../../../src/rundir/resume.js';
import { fakePlan, fakeStep, ROOT } from '../../integration/harness.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'infir2-health-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function save(it: number, bytes = 10): void {
  mkdirSync(join(dir, iterDirName(it)), { recursive: true });
  writeFileSync(join(dir, iterDirName(it), 'model.pt'), 'm'.repeat(bytes));
  writeFileSync(join(dir, iterDirName(it), 'metadata.json'), '{}');
  writeFileSync(join(dir, TRACKER_FILE), String(it));
}

describe('checkpoint health', () => {
  it('marks the newest checkpoint bad: moved aside with its reason, the tracker back to the previous one', () => {
    save(20);
    save(40);
    const r = markBad(dir, 40, 'cpt: corrupt checkpoint: model.pt does not match metadata.json', '111');
    expect(r).toEqual({ movedTo: join(dir, 'iter_0000040.bad-111'), fallback: 20 });
    expect(readFileSync(join(r.movedTo, BAD_REASON_FILE), 'utf8')).toMatch(/^cpt: corrupt checkpoint: model.pt does not match metadata.json\nmarked bad at /);
    expect(readFileSync(join(r.movedTo, 'model.pt'), 'utf8')).toBe('m'.repeat(10)); // never deleted
    expect(readFileSync(join(dir, TRACKER_FILE), 'utf8')).toBe('20');
    expect(inspectCheckpointDir(dir).latestComplete).toBe(20);
    expect(badCheckpoints(dir)).toEqual([{ iteration: 40, path: r.movedTo, reason: 'cpt: corrupt checkpoint: model.pt does not match metadata.json' }]);
    expect(readdirSync(dir).filter((n) => n.includes('.tmp'))).toEqual([]);
  });

  it('a link the trainer left at the reason file\'s name is replaced, not written through', () => {
    save(10);
    save(20);
    const victim = join(dir, '..', `victim-${process.pid}`);
    writeFileSync(victim, 'precious\n');
    symlinkSync(victim, join(dir, iterDirName(20), BAD_REASON_FILE));
    const { movedTo } = markBad(dir, 20, 'loss is NaN', '1');
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
    expect(readFileSync(join(movedTo, BAD_REASON_FILE), 'utf8')).toMatch(/^loss is NaN\n/);
    rmSync(victim);
  });

  it('a tracker that is a FIFO is no tracker (read without blocking the worker)', () => {
    save(10);
    rmSync(join(dir, TRACKER_FILE));
    execFileSync('mkfifo', [join(dir, TRACKER_FILE)]);
    // In a child with a deadline: a read that blocks would block this test's thread for good, not fail it.
    const code = `import { inspectCheckpointDir } from './src/rundir/checkpoints.ts'; console.log(JSON.stringify(inspectCheckpointDir(${JSON.stringify(dir)})));`;
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { cwd: ROOT, timeout: 20_000, encoding: 'utf8' });
    expect(JSON.parse(out).latestComplete).toBeNull();
  });

  it('with no older checkpoint the tracker goes aside too: the next attempt starts fresh', () => {
    save(10);
    expect(markBad(dir, 10, 'bad', '5').fallback).toBeNull();
    expect(existsSync(join(dir, TRACKER_FILE))).toBe(false);
    expect(existsSync(join(dir, `${TRACKER_FILE}.bad-5`))).toBe(true);
    expect(inspectCheckpointDir(dir).latestComplete).toBeNull();
  });

  it('counts failures before the first iteration per loaded checkpoint, in a row', () => {
    expect(recordLoadFailure(dir, 40)).toBe(1);
    expect(recordLoadFailure(dir, 40)).toBe(2);
    expect(recordLoadFailure(dir, 20)).toBe(1); // another checkpoint starts the count again
    clearLoadFailures(dir);
    expect(recordLoadFailure(dir, 20)).toBe(1);
  });

  it('removes moved-aside partial saves once a complete checkpoint reaches them, and counts the rest', async () => {
    save(20);
    mkdirSync(join(dir, 'iter_0000030.partial-1'));
    writeFileSync(join(dir, 'iter_0000030.partial-1', 'x'), 'p'.repeat(1000));
    mkdirSync(join(dir, 'iter_0000050.partial-2'));
    writeFileSync(join(dir, 'iter_0000050.partial-2', 'x'), 'p'.repeat(500));
    expect(await prunePartials(dir)).toEqual({ removed: [], kept: [join(dir, 'iter_0000030.partial-1'), join(dir, 'iter_0000050.partial-2')].sort(), keptBytes: 1500 });
    save(30);
    const p = await prunePartials(dir);
    expect(p.removed).toEqual([join(dir, 'iter_0000030.partial-1')]);
    expect(p.keptBytes).toBe(500);
    expect(existsSync(join(dir, 'iter_0000030.partial-1'))).toBe(false);
    expect(existsSync(join(dir, iterDirName(30)))).toBe(true);
  });
});

describe('resume --dry-run after a checkpoint was marked bad', () => {
  it('resumes from the fallback and says which checkpoint was skipped, and why', async () => {
    const runDir = dir;
    const step = fakeStep({ id: 'cpt.stable', runDir, iters: 100 });
    const ckpt = step.checkpoint!.dir;
    mkdirSync(ckpt, { recursive: true });
    const at = (it: number) => {
      mkdirSync(join(ckpt, iterDirName(it)), { recursive: true });
      writeFileSync(join(ckpt, iterDirName(it), 'metadata.json'), '{}');
      writeFileSync(join(ckpt, TRACKER_FILE), String(it));
    };
    at(20);
    at(40);
    markBad(ckpt, 40, 'cpt.stable: corrupt checkpoint: model.pt does not match metadata.json (damaged file)', '7');
    const plan = fakePlan(runDir, 'r', [step]);
    const status = { recipe: 'fake', runId: 'r', runDir, status: 'failed' as const, message: null, steps: [{ id: 'cpt.stable', status: 'failed' as const, attempts: 3, failures: {}, lastFailure: null, progress: null, startedAt: null, endedAt: null, result: null }] };
    expect(await decideResume(plan, status)).toEqual([
      {
        stepId: 'cpt.stable',
        action: 'resume',
        iteration: 20,
        reason: 'failed; newest complete checkpoint 20; checkpoint 40 marked bad (cpt.stable: corrupt checkpoint: model.pt does not match metadata.json (damaged file))',
      },
    ]);
  });
});
