/**
 * runStep in-process: the supervisor's phases around the fault-injecting fake trainer, under Temporal's
 * MockActivityEnvironment (no server, no worker). A crash fails the attempt typed `crash` and the next attempt
 * resumes from the newest complete checkpoint; a hang is stopped by the stall watchdog; a cancel stops the trainer.
 */
import { MockActivityEnvironment } from '@temporalio/testing';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GpuSlots } from '../../../src/activities/gpu-slots.js';
import { failure, openAttempt } from '../../../src/activities/attempt.js';
import { createRunStep } from '../../../src/activities/run-step.js';
import { refineVerdict } from '../../../src/activities/failure-evidence.js';
import { logFile } from '../../../src/activities/step-files.js';
import { groupAlive } from '../../../src/util/process-group.js';
import type { PlanStep } from '../../../src/plan/types.js';
import { fakeStep } from '../../integration/harness.js';

let runDir: string;
beforeEach(() => {
  runDir = mkdtempSync(join(tmpdir(), 'infir2-mockact-'));
  // What `infir2 run` records before a run starts: every attempt checks that the directory still holds its run.
  writeFileSync(join(runDir, 'plan.json'), JSON.stringify({ recipe: 'r', runId: 'r1' }));
});
afterEach(() => rmSync(runDir, { recursive: true, force: true }));

const runStep = createRunStep({ gpus: new GpuSlots([]), killGraceMs: 2_000, keepAliveMs: 200 });

function attempt(step: PlanStep, n: number, env = new MockActivityEnvironment()) {
  return env.run(runStep, { recipe: 'r', runId: 'r1', runDir, step, attempt: n });
}

const journal = (step: PlanStep) =>
  readFileSync(join(step.command.cwd, 'journal.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { iteration: number });

describe('runStep under MockActivityEnvironment', () => {
  it('a crash fails the attempt as crash; the next resumes from the last complete checkpoint', async () => {
    const step = fakeStep({ id: 'cpt', runDir, iters: 8, saveInterval: 3, sleep: 0.01, faults: ['crash@5'] });
    const beats: unknown[] = [];
    const env = new MockActivityEnvironment();
    env.on('heartbeat', (d: unknown) => beats.push(d));
    const err = await attempt(step, 1, env).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect((err as ApplicationFailure).type).toBe('crash');
    expect(beats.length).toBeGreaterThan(0);

    const res = await attempt(step, 2);
    expect(res).toMatchObject({ stepId: 'cpt', iteration: 8, attempts: 2, resumedFrom: 3 });
    const log = readFileSync(logFile(runDir, 'cpt'), 'utf8');
    expect(log).toContain('attempt 2 resuming from iteration 3');
    // nothing up to the resumed checkpoint was computed twice
    const second = journal(step).slice(journal(step).findIndex((j, i, all) => i > 0 && j.iteration <= all[i - 1]!.iteration));
    expect(second.every((j) => j.iteration > 3)).toBe(true);
  });

  it('a checkpoint that breaks every load is marked bad after two attempts in a row, and the step falls back', async () => {
    // Megatron's way: no hash check, just a traceback while loading. The fake trainer reads common.pt as JSON.
    const step = fakeStep({ id: 'bad', runDir, iters: 8, saveInterval: 3, sleep: 0.01, faults: ['crash@7'] });
    expect(((await attempt(step, 1).catch((e: unknown) => e)) as ApplicationFailure).type).toBe('crash');
    const ckpt = step.checkpoint!.dir;
    writeFileSync(join(ckpt, 'iter_0000006', 'common.pt'), '\x00garbage');
    const second = (await attempt(step, 2).catch((e: unknown) => e)) as ApplicationFailure;
    expect(second.type).toBe('crash'); // one failure to load may be anything: retried on the same checkpoint
    expect(second.message).not.toContain('damaged');
    const third = (await attempt(step, 3).catch((e: unknown) => e)) as ApplicationFailure;
    expect(third.type).toBe('crash');
    expect(third.message).toMatch(/^bad: crash: checkpoint 6 is damaged \(2 attempts in a row failed before their first iteration after loading it\): moved aside to .*iter_0000006\.bad-\d+; the next attempt resumes from iteration 3 \(3 iterations to redo\)$/);
    const [badDir] = readdirSync(ckpt).filter((n) => n.startsWith('iter_0000006.bad-'));
    expect(readFileSync(join(ckpt, badDir!, 'INFIR2_BAD_CHECKPOINT.txt'), 'utf8')).toContain('bad: 2 attempts in a row failed');
    const res = await attempt(step, 4);
    expect(res).toMatchObject({ iteration: 8, resumedFrom: 3 });
    expect(readFileSync(logFile(runDir, 'bad'), 'utf8')).toContain('marked checkpoint 6 bad');
  });

  it('damage the trainer names while loading marks the checkpoint bad at once (the reference trainer\'s hash check)', async () => {
    const step = fakeStep({ id: 'named', runDir, iters: 50 });
    const ckpt = step.checkpoint!.dir;
    for (const it of [10, 20]) {
      mkdirSync(join(ckpt, `iter_00000${it}`), { recursive: true });
      writeFileSync(join(ckpt, `iter_00000${it}`, 'metadata.json'), '{}');
    }
    writeFileSync(join(ckpt, 'latest_checkpointed_iteration.txt'), '20');
    const line = `error: corrupt checkpoint ${ckpt}/iter_0000020: model.pt does not match metadata.json (damaged file)`;
    const v = (await new MockActivityEnvironment().run(async () => {
      const a = openAttempt({ recipe: 'r', runId: 'r1', runDir, step, attempt: 2 });
      a.progress.resumedFrom = 20;
      return refineVerdict(a, { cls: 'crash', reason: `exit code 1: ${line}` }, [' loading distributed checkpoint', line]);
    })) as { cls: string; reason: string };
    expect(v.cls).toBe('crash');
    expect(v.reason).toMatch(/^checkpoint 20 is damaged \(error: corrupt checkpoint .*\): moved aside to .*iter_0000020\.bad-\d+; the next attempt resumes from iteration 10 \(10 iterations to redo\)$/);
    expect(readFileSync(join(ckpt, 'latest_checkpointed_iteration.txt'), 'utf8')).toBe('10');
  });

  it('a trainer that stops making progress is killed after the stall timeout and fails as hang', async () => {
    const step = { ...fakeStep({ id: 'h', runDir, iters: 50, sleep: 0.01, faults: ['hang@3'] }), stallTimeoutSec: 1 };
    const t0 = Date.now();
    const err = await attempt(step, 1).then(() => null, (e: unknown) => e);
    expect((err as ApplicationFailure).type).toBe('hang');
    expect(Date.now() - t0).toBeLessThan(10_000);
  });

  it('a log file that cannot be written is reported by the attempt, not thrown at the worker', async () => {
    // Before, a log stream's error (a full or read-only disk) was an unhandled 'error' event: the worker process
    // died with it, and every run it served. A directory where the log file should be fails the same way.
    const step = fakeStep({ id: 'nolog', runDir, iters: 4, sleep: 0.01 });
    mkdirSync(logFile(runDir, 'nolog'), { recursive: true });
    const seen = (await new MockActivityEnvironment().run(async () => {
      const a = openAttempt({ recipe: 'r', runId: 'r1', runDir, step, attempt: 1 });
      a.note('a line that cannot be written');
      await a.flushLog();
      return { code: (a.logError as NodeJS.ErrnoException | null)?.code, message: failure(a, 'crash', 'exit code 1').message };
    })) as { code?: string; message: string };
    expect(seen.code).toBe('EISDIR');
    expect(seen.message).toBe(`nolog: crash: exit code 1; the step's log could not be written (${logFile(runDir, 'nolog')}: EISDIR: illegal operation on a directory, open '${logFile(runDir, 'nolog')}')`);
  });

  it('a cancel stops the whole process group and reports a cancellation', async () => {
    const step = fakeStep({ id: 'c', runDir, iters: 1000, sleep: 0.05 });
    const env = new MockActivityEnvironment();
    let pid: number | null = null;
    env.on('heartbeat', (d: { pid: number | null }) => {
      pid ??= d.pid;
      if (d.pid) env.cancel();
    });
    const err = await attempt(step, 1, env).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(CancelledFailure);
    expect(pid).not.toBeNull();
    expect(groupAlive(pid!)).toBe(false);
  });
});
