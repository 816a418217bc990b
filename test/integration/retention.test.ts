/**
 * Checkpoint retention on a real worker against a real dev server: a step that keeps its last 2 checkpoints and
 * its boundaries ends with only those on disk, survives a crash (the resume loads its newest complete checkpoint,
 * which retention never deletes), and leaves alone a checkpoint a reader has pinned while it reads; a step whose
 * first attempt would load a checkpoint retention deleted fails at once, naming the deletion.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PlanStep, RetentionSpec } from '../../src/plan/types.js';
import { inspectCheckpointDir, iterDirName } from '../../src/rundir/checkpoints.js';
import { deletions, pinCheckpoint } from '../../src/rundir/retention.js';
import { statusQuery } from '../../src/workflows/definitions.js';
import { fakePlan, fakeStep, journal, onlyStepOf, processesMentioning, recomputed, setupEnv, startPlan, tmpRunDir, waitFor, type Env } from './harness.js';

let env: Env;

beforeAll(async () => {
  env = await setupEnv('retention');
  await env.startWorker();
});

afterAll(async () => {
  await env?.teardown();
});

const policy: RetentionSpec = { last: 2, every: null, protect: [15, 30], summary: 'keep last 2, boundaries 15, 30', maxKept: 5, checkpointBytes: { withOptimizer: 0, weightsOnly: 0 } };
const withRetention = (s: PlanStep, retention: RetentionSpec, reads?: PlanStep['reads']): PlanStep => ({
  ...s,
  checkpoint: { ...s.checkpoint!, retention },
  ...(reads ? { reads } : {}),
});

describe('checkpoint retention', () => {
  it('keeps the last 2 and the boundaries, resumes after a crash, and never deletes a checkpoint a reader holds', async () => {
    const runDir = tmpRunDir(env, 'kept');
    const step = withRetention(fakeStep({ id: 'cpt.stable', runDir, iters: 30, saveInterval: 3, sleep: 0.15, faults: ['crash@20'] }), policy);
    const root = step.checkpoint!.dir;
    const h = await startPlan(env, fakePlan(runDir, 'kept', [step]));
    // A reader (as a fork's first load) holds checkpoint 9 from the moment it is saved.
    await waitFor('checkpoint 9', () => inspectCheckpointDir(root).complete.includes(9), 60_000);
    const release = await pinCheckpoint(root, 9, 'a reader in the test');
    // While it trains, retention follows the saves: never more than the newest 2, the boundaries and the pinned.
    await waitFor('iteration 17', () => journal(runDir, 'cpt.stable').some((e) => e.iteration >= 17), 60_000);
    const during = inspectCheckpointDir(root).complete;
    expect(during.filter((it) => ![9, 15].includes(it)).length, `complete while training: ${during.join(', ')}`).toBeLessThanOrEqual(2);

    const st = await onlyStepOf(h);
    expect(st.status).toBe('completed');
    expect(st.failures).toEqual({ crash: 1 });
    // The crash at 20 resumed from 18, the newest complete checkpoint, which retention had kept; nothing before it ran twice.
    expect(st.result?.resumedFrom).toBe(18);
    expect(recomputed(runDir, 'cpt.stable', 18)).toEqual([]);
    // On disk: the last 2, the boundaries, and the pinned one, whole.
    expect(inspectCheckpointDir(root).complete).toEqual([9, 15, 27, 30]);
    expect(existsSync(join(root, iterDirName(9), 'metadata.json'))).toBe(true);
    const gone = deletions(root).map((d) => d.iteration);
    expect(gone).toEqual([3, 6, 12, 18, 21, 24]);
    expect(deletions(root)[0]).toMatchObject({ policy: 'keep last 2, boundaries 15, 30', by: expect.stringMatching(/^cpt\.stable attempt \d$/) });
    expect(readFileSync(join(runDir, 'logs', 'cpt.stable.log'), 'utf8')).toMatch(/retention \(keep last 2, boundaries 15, 30\): deleted checkpoint/);

    // Let go, and the next pass takes it.
    release();
    const again = withRetention(fakeStep({ id: 'cpt.stable', runDir, iters: 30, saveInterval: 3 }), policy);
    const h2 = await startPlan(env, { ...fakePlan(runDir, 'kept-again', [again]), runDir });
    expect((await onlyStepOf(h2)).status).toBe('completed');
    expect(inspectCheckpointDir(root).complete).toEqual([15, 27, 30]);
    expect(processesMentioning(runDir)).toEqual([]);
  }, 120_000);

  it("a first attempt that would load a checkpoint retention deleted fails at once as config, naming the deletion", async () => {
    const runDir = tmpRunDir(env, 'reader');
    const source = withRetention(fakeStep({ id: 'cpt.stable', runDir, iters: 12, saveInterval: 3 }), { ...policy, protect: [12], summary: 'keep last 2, boundaries 12' });
    const h = await startPlan(env, fakePlan(runDir, 'reader', [source]));
    expect((await onlyStepOf(h)).status).toBe('completed');
    const root = source.checkpoint!.dir;
    expect(inspectCheckpointDir(root).complete).toEqual([9, 12]);
    // A decay forked from checkpoint 3, which is gone.
    const decay = withRetention(fakeStep({ id: 'cpt.decay', runDir, iters: 6, saveInterval: 3 }), { ...policy, protect: [6] }, [{ dir: root, iteration: 3 }]);
    const h2 = await startPlan(env, fakePlan(runDir, 'reader-fork', [decay]));
    const res = await h2.result().then(
      () => null,
      (e: unknown) => e,
    );
    expect(res).not.toBeNull();
    const st = (await h2.query(statusQuery)).steps[0]!;
    expect(st.failures).toEqual({ config: 1 });
    expect(st.lastFailure?.message).toMatch(new RegExp(`checkpoint 3 of ${root} was deleted by its retention policy \\(keep last 2, boundaries 12\\) at \\d{4}-`));
    expect(journal(runDir, 'cpt.decay')).toEqual([]);
  }, 60_000);
});
