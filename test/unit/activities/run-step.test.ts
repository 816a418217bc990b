/**
 * The pure helpers of the runStep supervisor: resume placeholders, the completion check on disk, metrics from a
 * step's JSON outputs, and the log/result paths.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { iterDirName, TRACKER_FILE, type CheckpointInspection } from '../../../src/rundir/checkpoints.js';
import { completionMet, logFile, readMetrics, resultFile } from '../../../src/activities/step-files.js';
import { fillArgv, newLaunchIds } from '../../../src/activities/trainer-process.js';
import { applyProgress } from '../../../src/activities/watchdog.js';
import type { Completion, PlanStep } from '../../../src/plan/types.js';

let tmp: string;
beforeEach(() => {
  tmp = mkdtempSync(join(tmpdir(), 'infir2-runstep-'));
});
afterEach(() => rmSync(tmp, { recursive: true, force: true }));

function step(completion: Completion, over: Partial<PlanStep> = {}): PlanStep {
  return {
    id: 'cpt.stable',
    kind: 'cpt',
    backend: 'megatron',
    pool: 'gpu',
    nodes: 1,
    gpus: 8,
    dependsOn: [],
    inputs: {},
    outputs: {},
    command: { argv: ['torchrun', 'pretrain_gpt.py'], env: {}, cwd: join(tmp, 'cwd') },
    resume: null,
    progress: { format: 'megatron', totalIterations: 100 },
    checkpoint: null,
    completion,
    stallTimeoutSec: 600,
    attemptTimeoutSec: 86400,
    retries: { crash: 3, hang: 2, oom: 1, preempted: 10, storage: 12, config: 0 },
    summary: 'test step',
    ...over,
  };
}

function saved(root: string, n: number, metadata = true): void {
  const d = join(root, iterDirName(n));
  mkdirSync(d, { recursive: true });
  if (metadata) writeFileSync(join(d, 'metadata.json'), '{}');
}

const ids = (attempt: number) => ({ attempt, launch: 'k9x' });

describe('fillArgv', () => {
  it('substitutes {iteration} and {nextIteration} everywhere, also inside arguments', () => {
    const argv = ['python', 'train.py', '--ckpt-step', '{iteration}', '--start-rollout-id', '{nextIteration}', '--tag=run-{iteration}-{iteration}', '--x={nextIteration}'];
    expect(fillArgv(argv, ids(1), 35000)).toEqual(['python', 'train.py', '--ckpt-step', '35000', '--start-rollout-id', '35001', '--tag=run-35000-35000', '--x=35001']);
  });

  it('leaves an argv without placeholders as it is, and does not change its input', () => {
    const argv = ['torchrun', '--nproc-per-node', '8', 'pretrain_gpt.py', '--load', '/ckpt', '{other}', '{ITERATION}'];
    const copy = [...argv];
    expect(fillArgv(argv, ids(1), 7)).toEqual(copy);
    expect(argv).toEqual(copy);
    const withPh = ['--ckpt-step', '{iteration}'];
    fillArgv(withPh, ids(1), 7);
    expect(withPh).toEqual(['--ckpt-step', '{iteration}']);
  });

  it('fills {attempt} and {launch} always, and leaves resume placeholders alone on a fresh start', () => {
    expect(fillArgv(['--submission-id=job-a{attempt}-{launch}', '--ckpt-step', '{iteration}'], ids(3))).toEqual(['--submission-id=job-a3-k9x', '--ckpt-step', '{iteration}']);
    expect(fillArgv(['x-{attempt}-{nextIteration}'], ids(2), 9)).toEqual(['x-2-10']);
  });

  it('gives every launch its own token, also for the same attempt number (a resumed run counts from 1 again)', async () => {
    const a = newLaunchIds(1);
    await new Promise((r) => setTimeout(r, 5));
    const b = newLaunchIds(1);
    expect(a.attempt).toBe(b.attempt);
    expect(a.launch).toMatch(/^[0-9a-z]+$/);
    expect(b.launch).not.toBe(a.launch);
    // Two steps one worker launches in the same millisecond: their processes must not share a token.
    const same = Array.from({ length: 50 }, () => newLaunchIds(1).launch);
    expect(new Set(same).size).toBe(50);
  });

  it('handles iteration 0 and large iterations', () => {
    expect(fillArgv(['{iteration}', '{nextIteration}'], ids(1), 0)).toEqual(['0', '1']);
    expect(fillArgv(['{iteration}', '{nextIteration}'], ids(1), 9999999999)).toEqual(['9999999999', '10000000000']);
  });
});

describe('applyProgress', () => {
  const fresh = (total: number | null) => ({
    iteration: null, totalIterations: total, loss: null, throughput: null, throughputUnit: null, lastCheckpoint: null, resumedFrom: null, attempt: 1, pid: 1, updatedAt: '',
  });

  it('keeps the plan\'s total: cpt.stable ends at its boundary, though Megatron prints the schedule\'s --train-iters', () => {
    const p = fresh(160);
    expect(applyProgress(p, { iteration: 90, totalIterations: 200, loss: 2.5, throughput: 812, throughputUnit: 'tok/s' }, 160)).toEqual({ advanced: true, checkpointSaved: false });
    expect(p).toMatchObject({ iteration: 90, totalIterations: 160, loss: 2.5, throughput: 812, throughputUnit: 'tok/s' });
  });

  it('takes the trainer\'s total when the plan has none (an evaluation\'s progress)', () => {
    const p = fresh(null);
    applyProgress(p, { iteration: 3, totalIterations: 30 }, null);
    expect(p.totalIterations).toBe(30);
  });

  it('counts a new iteration or a checkpoint as an advance, a repeated iteration or a loss alone not', () => {
    const p = fresh(10);
    applyProgress(p, { iteration: 4 }, 10);
    expect(applyProgress(p, { iteration: 4, loss: 1 }, 10)).toEqual({ advanced: false, checkpointSaved: false });
    expect(applyProgress(p, { checkpointSaved: 4 }, 10)).toEqual({ advanced: true, checkpointSaved: true });
    expect(p.lastCheckpoint).toBe(4);
  });
});

describe('completionMet: checkpoint', () => {
  it('is met once the newest complete iteration reaches the target', () => {
    const root = join(tmp, 'ckpt');
    const s = step({ kind: 'checkpoint', dir: root, iteration: 2000 });
    expect(completionMet(s)).toBe(false); // no directory at all
    saved(root, 1000);
    writeFileSync(join(root, TRACKER_FILE), '1000');
    expect(completionMet(s)).toBe(false);
    saved(root, 2000);
    expect(completionMet(s)).toBe(false); // saved, but the tracker has not moved: partial
    writeFileSync(join(root, TRACKER_FILE), '2000');
    expect(completionMet(s)).toBe(true);
  });

  it('is met by an iteration past the target', () => {
    const root = join(tmp, 'ckpt');
    saved(root, 2500);
    writeFileSync(join(root, TRACKER_FILE), '2500');
    expect(completionMet(step({ kind: 'checkpoint', dir: root, iteration: 2000 }))).toBe(true);
  });

  it('is not met by the final iteration without metadata.json', () => {
    const root = join(tmp, 'ckpt');
    saved(root, 1000);
    saved(root, 2000, false);
    writeFileSync(join(root, TRACKER_FILE), '2000');
    expect(completionMet(step({ kind: 'checkpoint', dir: root, iteration: 2000 }))).toBe(false);
  });

  it('is not met by a release tracker', () => {
    const root = join(tmp, 'ckpt');
    mkdirSync(join(root, 'release'), { recursive: true });
    writeFileSync(join(root, TRACKER_FILE), 'release');
    expect(completionMet(step({ kind: 'checkpoint', dir: root, iteration: 1 }))).toBe(false);
  });

  it('uses a given inspection of the same directory instead of reading the disk', () => {
    const root = join(tmp, 'ckpt'); // empty on disk
    const s = step({ kind: 'checkpoint', dir: root, iteration: 2000 });
    const insp: CheckpointInspection = { dir: root, tracker: 2000, complete: [2000], latestComplete: 2000, partial: [] };
    expect(completionMet(s, insp)).toBe(true);
    expect(completionMet(s, { ...insp, latestComplete: 1999, complete: [1999] })).toBe(false);
  });

  it('ignores an inspection of another directory and reads the disk', () => {
    const root = join(tmp, 'ckpt');
    const s = step({ kind: 'checkpoint', dir: root, iteration: 2000 });
    const other: CheckpointInspection = { dir: join(tmp, 'other'), tracker: 2000, complete: [2000], latestComplete: 2000, partial: [] };
    expect(completionMet(s, other)).toBe(false);
    saved(root, 2000);
    writeFileSync(join(root, TRACKER_FILE), '2000');
    expect(completionMet(s, { ...other, latestComplete: null, complete: [] })).toBe(true);
    expect(completionMet(s, null)).toBe(true);
  });
});

describe('completionMet: files', () => {
  it('needs every path: a non-empty file or a directory', () => {
    const report = join(tmp, 'report.json');
    const hf = join(tmp, 'hf');
    const s = step({ kind: 'files', paths: [report, hf] });
    expect(completionMet(s)).toBe(false);
    writeFileSync(report, '{"accuracy": 0.5}');
    expect(completionMet(s)).toBe(false); // hf missing
    mkdirSync(hf);
    expect(completionMet(s)).toBe(true);
  });

  it('does not count an empty file (a crash while writing it)', () => {
    const report = join(tmp, 'report.json');
    writeFileSync(report, '');
    const s = step({ kind: 'files', paths: [report] });
    expect(completionMet(s)).toBe(false);
    writeFileSync(report, '{}');
    expect(completionMet(s)).toBe(true);
  });

  it('counts an empty directory as present', () => {
    mkdirSync(join(tmp, 'out'));
    expect(completionMet(step({ kind: 'files', paths: [join(tmp, 'out')] }))).toBe(true);
  });

  it('is met by an empty list of paths (exit 0 is then enough)', () => {
    expect(completionMet(step({ kind: 'files', paths: [] }))).toBe(true);
  });
});

describe('readMetrics', () => {
  it('reads the numeric top-level fields of the JSON outputs', () => {
    const a = join(tmp, 'aime24.json');
    writeFileSync(
      a,
      JSON.stringify({ accuracy: 0.4333, n: 30, pass_at_1: 0, name: 'aime24', nested: { score: 1 }, list: [1, 2], ok: true, nothing: null, big: 1e300 }),
    );
    expect(readMetrics(step({ kind: 'files', paths: [a] }, { kind: 'eval' }))).toEqual({ accuracy: 0.4333, n: 30, pass_at_1: 0, big: 1e300 });
  });

  it('merges several JSON files, the later one winning on a shared key; non-JSON paths are not read', () => {
    const a = join(tmp, 'a.json');
    const b = join(tmp, 'b.json');
    const txt = join(tmp, 'c.txt');
    writeFileSync(a, JSON.stringify({ accuracy: 0.1, a: 1 }));
    writeFileSync(b, JSON.stringify({ accuracy: 0.2, b: 2 }));
    writeFileSync(txt, JSON.stringify({ c: 3 }));
    expect(readMetrics(step({ kind: 'files', paths: [a, b, txt] }, { kind: 'eval' }))).toEqual({ accuracy: 0.2, a: 1, b: 2 });
  });

  it('skips files that are missing, unparsable, or not objects', () => {
    const bad = join(tmp, 'bad.json');
    const nul = join(tmp, 'null.json');
    const num = join(tmp, 'num.json');
    const good = join(tmp, 'good.json');
    writeFileSync(bad, '{"accuracy": 0.');
    writeFileSync(nul, 'null');
    writeFileSync(num, '42');
    writeFileSync(good, '{"accuracy": 0.75}');
    expect(readMetrics(step({ kind: 'files', paths: [join(tmp, 'missing.json'), bad, nul, num, good] }, { kind: 'eval' }))).toEqual({ accuracy: 0.75 });
  });

  it('reads only evaluation reports: an HF config.json of a conversion is settings, not metrics', () => {
    const cfg = join(tmp, 'config.json');
    writeFileSync(cfg, JSON.stringify({ hidden_size: 64 }));
    expect(readMetrics(step({ kind: 'files', paths: [cfg] }, { kind: 'convert' }))).toEqual({});
  });

  it('reports nothing for a checkpoint step', () => {
    expect(readMetrics(step({ kind: 'checkpoint', dir: tmp, iteration: 1 }))).toEqual({});
  });
});

describe('logFile / resultFile', () => {
  it('places logs and results under the run directory by step id', () => {
    expect(logFile('/runs/r1', 'cpt.stable')).toBe('/runs/r1/logs/cpt.stable.log');
    expect(resultFile('/runs/r1', 'eval.aime24')).toBe('/runs/r1/results/eval.aime24.json');
  });
});
