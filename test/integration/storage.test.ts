/**
 * Storage faults on real file systems, through the built worker and the CLI against a real dev server (issue 19):
 * a disk that fills up under a running step, a checkpoint root remounted read-only mid-run, a damaged newest
 * checkpoint, and a run whose worker is gone. Each ends with the worker alive, no process left, the previous
 * complete checkpoint intact, and the run completing once the fault is removed, without a person touching a
 * file of the run. The mounts need root (a small tmpfs, a read-only bind mount); elsewhere those tests are
 * skipped and say why.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkflowFailedError } from '@temporalio/client';
import type { ApplicationFailure } from '@temporalio/common';
import type { RunStatus } from '../../src/plan/contracts.js';
import { stepWorkflowId } from '../../src/temporal/constants.js';
import { inspectCheckpointDir } from '../../src/rundir/checkpoints.js';
import { fill, mountTmpfs, NO_MOUNT, umount } from './full-disk.js';
import { fakePlan, fakeStep, journal, processesMentioning, ROOT, setupEnv, sleep, startPlan, tmpRunDir, waitFor, type Env } from './harness.js';

const exec = promisify(execFile);
let env: Env;

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await exec(process.execPath, [join(ROOT, 'bin', 'infir2.js'), ...args], { env: { ...process.env, TEMPORAL_ADDRESS: env.server.address }, timeout: 120_000 });
    return { code: 0, ...r };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

async function status(workflowId: string): Promise<RunStatus> {
  const r = await cli(['status', workflowId, '--json']);
  expect(r.stderr).toBe('');
  return JSON.parse(r.stdout) as RunStatus;
}

beforeAll(async () => {
  env = await setupEnv('storage');
  await env.startWorker();
});

afterAll(async () => {
  await env?.teardown();
});

describe('storage faults', () => {
  it('a disk that fills up mid-run: the step waits, says so with the room left, and finishes once space is freed', async (ctx) => {
    const mnt = join(env.dir, 'full');
    if (!mountTmpfs(mnt, '4m')) return ctx.skip(NO_MOUNT);
    try {
      const runDir = join(mnt, 'run');
      // 12 s of training: the disk must fill before the last save even when a loaded machine delays the polling.
      const plan = fakePlan(runDir, 'disk-full', [fakeStep({ id: 'cpt.stable', runDir, iters: 60, saveInterval: 5, sleep: 0.2 })]);
      const h = await startPlan(env, plan);
      const ckpt = plan.steps[0]!.checkpoint!.dir;
      await waitFor('a checkpoint past 10', () => (inspectCheckpointDir(ckpt).latestComplete ?? 0) >= 10);
      const filler = fill(mnt);
      const waiting = await waitFor('status: waiting on a full disk', async () => {
        const st = await status(h.workflowId);
        return st.steps[0]!.waiting ? st : null;
      });
      expect(waiting.steps[0]!.status).toBe('running');
      expect(waiting.steps[0]!.lastFailure?.class).toBe('storage');
      expect(waiting.steps[0]!.waiting!.reason).toMatch(new RegExp(`^disk full on ${runDir}.* \\(\\d+ kB free\\)`));
      // The pauses double from 1 s here: the table is read until it catches one.
      await waitFor('the table: waiting', async () => {
        const t = (await cli(['status', h.workflowId])).stdout;
        return /cpt\.stable\s+waiting\s.*waiting \d+s: disk full on /.test(t);
      });
      const kept = inspectCheckpointDir(ckpt).latestComplete!;
      expect(env.workers.every((w) => w.exitCode === null)).toBe(true); // the worker lived through it
      rmSync(filler);
      await h.result();
      const after = inspectCheckpointDir(ckpt);
      expect(after.latestComplete).toBe(60);
      expect(after.complete).toContain(kept);
      // nothing up to the newest complete checkpoint at the fault was computed again
      const runs = journal(runDir, 'cpt.stable');
      const lastPid = runs.at(-1)!.pid;
      expect(runs.filter((e) => e.pid === lastPid)[0]!.iteration).toBeGreaterThan(kept);
      expect(readdirSync(ckpt).filter((n) => /\.tmp|\.partial-/.test(n))).toEqual([]);
      expect(processesMentioning(runDir)).toEqual([]);
    } finally {
      umount(mnt);
    }
  });

  it('a checkpoint root remounted read-only mid-run: storage, waited out, then finished', async (ctx) => {
    const mnt = join(env.dir, 'rofs');
    if (!mountTmpfs(mnt, '16m')) return ctx.skip(NO_MOUNT);
    const runDir = join(mnt, 'run');
    // 10 s of training: the read-only view must come before the last save even when a loaded machine delays this
    // test's polling by seconds (at 2 s, the trainer could finish first and nothing would fail).
    const plan = fakePlan(runDir, 'read-only', [fakeStep({ id: 'cpt.stable', runDir, iters: 40, saveInterval: 5, sleep: 0.25 })]);
    const ckpt = plan.steps[0]!.checkpoint!.dir;
    let ro = false;
    try {
      const h = await startPlan(env, plan);
      await waitFor('a checkpoint past 5', () => (inspectCheckpointDir(ckpt).latestComplete ?? 0) >= 5);
      // A read-only view of the root over itself: writers that are open keep writing, anything new is refused
      // (Linux will not remount a file system read-only while files on it are open for writing).
      execFileSync('mount', ['--bind', '-o', 'ro', ckpt, ckpt], { stdio: 'ignore' });
      ro = true;
      const st = await waitFor('status: waiting on a read-only file system', async () => {
        const s = await status(h.workflowId);
        return s.steps[0]!.waiting ? s : null;
      });
      expect(st.steps[0]!.waiting!.reason).toMatch(new RegExp(`^read-only file system at ${ckpt}`));
      const kept = inspectCheckpointDir(ckpt).latestComplete!;
      expect(env.workers.every((w) => w.exitCode === null)).toBe(true);
      umount(ckpt);
      ro = false;
      await h.result();
      expect(inspectCheckpointDir(ckpt).latestComplete).toBe(40);
      const runs = journal(runDir, 'cpt.stable');
      expect(runs.filter((e) => e.pid === runs.at(-1)!.pid)[0]!.iteration).toBe(kept + 1);
      expect(processesMentioning(runDir)).toEqual([]);
    } finally {
      if (ro) umount(ckpt);
      umount(mnt);
    }
  });

  it('a damaged newest checkpoint is marked bad and the step falls back to the previous one', async () => {
    const runDir = tmpRunDir(env, 'damaged');
    // crash@14 leaves checkpoints 5 and 10; the damage goes into 10 before the retry loads it.
    const plan = fakePlan(runDir, 'damaged', [fakeStep({ id: 'cpt.stable', runDir, iters: 20, saveInterval: 5, sleep: 0.05, faults: ['crash@14'], retries: { crash: 3 } })]);
    const ckpt = plan.steps[0]!.checkpoint!.dir;
    mkdirSync(join(runDir, 'cpt.stable'), { recursive: true });
    const h = await startPlan(env, plan, { retryDelaySec: 4 });
    await waitFor('the crash at 14', () => journal(runDir, 'cpt.stable').some((e) => e.iteration === 13) && readFileSync(join(runDir, 'logs', 'cpt.stable.log'), 'utf8').includes('attempt 1 failed'));
    writeFileSync(join(ckpt, 'iter_0000010', 'common.pt'), '\x00 flipped bytes');
    const res = (await h.result()) as { status: RunStatus };
    const step = res.status.steps[0]!;
    expect(step.status).toBe('completed');
    expect(step.result!.resumedFrom).toBe(5);
    const bad = readdirSync(ckpt).filter((n) => n.startsWith('iter_0000010.bad-'));
    expect(bad).toHaveLength(1);
    expect(readFileSync(join(ckpt, bad[0]!, 'INFIR2_BAD_CHECKPOINT.txt'), 'utf8')).toMatch(/^cpt\.stable: 2 attempts in a row failed before their first iteration/);
    expect(inspectCheckpointDir(ckpt).complete).toEqual([5, 10, 15, 20]); // 10 saved again, from 5
    const log = readFileSync(join(runDir, 'logs', 'cpt.stable.log'), 'utf8');
    expect(log).toMatch(/checkpoint 10 is damaged .* the next attempt resumes from iteration 5 \(5 iterations to redo\)/);
    expect(processesMentioning(runDir)).toEqual([]);
  });

  it('the run directory removed mid-step: the attempt fails as storage naming it, nothing recreates it, the run never completes', async () => {
    const runDir = tmpRunDir(env, 'vanished');
    const plan = fakePlan(runDir, 'vanished', [fakeStep({ id: 'cpt.stable', runDir, iters: 400, saveInterval: 5, sleep: 0.05, retries: { storage: 2 } })]);
    const h = await startPlan(env, plan);
    await waitFor('iteration 12', () => journal(runDir, 'cpt.stable').some((e) => e.iteration >= 12));
    rmSync(runDir, { recursive: true, force: true });
    const err = await h.result().then(
      () => null,
      (e: unknown) => e as WorkflowFailedError,
    );
    expect(err, 'the run reported success on a removed directory').not.toBeNull();
    const st = (err!.cause as ApplicationFailure).details![0] as RunStatus;
    const step = st.steps[0]!;
    expect(st.status).toBe('failed');
    expect(step.status).toBe('failed');
    // The first failure came after a new checkpoint (10, or a later one saved before the watch stopped the trainer):
    // progress, not counted against the budget; the three after it made none, a restart loop past retries.storage 2.
    expect(step.failures).toMatchObject({ storage: 4 });
    expect(step.failuresWithoutProgress).toEqual({ storage: 3 });
    expect(st.message).toMatch(/\(restart loop: 3 consecutive storage failures without progress past checkpoint \d+; retries\.storage is 2\)$/);
    expect(step.lastFailure!.message).toMatch(/no longer holds this run's files \(plan\.json is gone\): it was removed or its file system is not mounted/);
    // The first attempt was stopped by the watch (the trainer itself may have recreated its save directory)...
    const history = JSON.stringify(await env.client.workflow.getHandle(stepWorkflowId(h.workflowId, 'cpt.stable')).fetchHistory());
    expect(history).toMatch(/cpt\.stable: storage: (the run directory|the step's directory|the step's checkpoint directory|the step's lock) \S+ was (removed|replaced) while the trainer ran/);
    // ...and no later attempt recreated the run directory empty to train into.
    expect(existsSync(join(runDir, 'plan.json'))).toBe(false);
    expect(existsSync(join(runDir, 'logs'))).toBe(false);
    expect(processesMentioning(runDir)).toEqual([]);
    // Resuming it is refused at once, not after another round of storage pauses.
    const r = await cli(['resume', h.workflowId]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`error: cannot resume ${h.workflowId}: the run directory ${runDir} no longer holds this run's files (plan.json is gone): it was removed or its file system is not mounted; restore it, or start the run again\n`);
  });

  it('status and logs of a running run whose worker is gone: exit 0, from the records, naming the missing worker', async () => {
    const runDir = tmpRunDir(env, 'no-worker');
    const plan = fakePlan(runDir, 'no-worker', [
      fakeStep({ id: 'cpt.warmup', runDir, iters: 3 }),
      fakeStep({ id: 'cpt.stable', runDir, iters: 200, saveInterval: 5, sleep: 0.05, dependsOn: ['cpt.warmup'] }),
    ]);
    const h = await startPlan(env, plan);
    // Past 120 (6 s): the SDK sends heartbeats at most every 4 s here, so the server holds one from mid-run.
    await waitFor('cpt.stable past 120', () => journal(runDir, 'cpt.stable').some((e) => e.iteration >= 120));
    // The worker dies hard (its host went away): nothing it could say on the way out.
    for (const w of env.workers.filter((x) => x.exitCode === null && x.signalCode === null)) process.kill(w.pid!, 'SIGKILL');
    try {
      const t0 = Date.now();
      const st = await cli(['status', h.workflowId, '--json']);
      expect(st.code).toBe(0);
      const s = JSON.parse(st.stdout) as RunStatus;
      expect(s.status).toBe('running');
      expect(s.message).toMatch(/no worker (is polling|answered)/);
      expect(s.steps.map((x) => x.status)).toEqual(['completed', 'running']);
      expect(s.steps[1]!.progress!.iteration).toBeGreaterThanOrEqual(8);
      expect(s.steps[1]!.progress!.lastCheckpoint).toBeGreaterThanOrEqual(5);
      expect(Date.now() - t0).toBeLessThan(30_000);
      const table = await cli(['status', h.workflowId]);
      expect(table.code).toBe(0);
      expect(table.stdout.split('\n')[0]).toMatch(/: running — no worker/);
      const logs = await cli(['logs', h.workflowId, '--stage', 'cpt.stable']);
      expect(logs.code).toBe(0);
      expect(logs.stdout).toMatch(/iteration\s+8\//);
    } finally {
      await env.startWorker();
    }
    await h.result();
    await sleep(500);
    expect(processesMentioning(runDir)).toEqual([]);
  });
});
