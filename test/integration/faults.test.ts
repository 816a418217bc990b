/**
 * Durable runs against a real Temporal dev server and real worker processes: every fault the issue names,
 * injected into the fake trainer, and what the run does about it.
 */
import { WorkflowFailedError } from '@temporalio/client';
import { spawn } from 'node:child_process';
import { Worker } from '@temporalio/worker';
import { existsSync, mkdirSync, readdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCK_FILE, LOCK_LEASE_MS } from '../../src/activities/lock.js';
import { resolveRun, runStatus } from '../../src/temporal/runs.js';
import type { RunStatus } from '../../src/plan/contracts.js';
import { statusQuery } from '../../src/workflows/definitions.js';
import { fakePlan, fakeStep, journal, memoryCgroup, onlyStepOf, processesMentioning, recomputed, ROOT, setupEnv, startPlan, tmpRunDir, waitFor, type Env } from './harness.js';

let env: Env;

beforeAll(async () => {
  env = await setupEnv('faults');
  await env.startWorker();
});

afterAll(async () => {
  await env?.teardown();
});


describe('a durable recipe run', () => {
  it('runs a DAG of steps to completion and hands results on', async () => {
    const runDir = tmpRunDir(env, 'happy');
    const plan = fakePlan(runDir, 'happy', [
      fakeStep({ id: 'cpt.warmup', runDir, iters: 6 }),
      fakeStep({ id: 'sft.stage1', runDir, iters: 4, dependsOn: ['cpt.warmup'] }),
      fakeStep({ id: 'eval.a', runDir, files: true, dependsOn: ['sft.stage1'] }),
      fakeStep({ id: 'eval.b', runDir, files: true, dependsOn: ['sft.stage1'] }),
    ]);
    const h = await startPlan(env, plan);
    const res = (await h.result()) as { status: RunStatus; results: Record<string, { iteration: number; metrics: Record<string, number> }> };
    expect(res.status.status).toBe('completed');
    expect(res.status.steps.map((s) => s.status)).toEqual(['completed', 'completed', 'completed', 'completed']);
    expect(res.results['cpt.warmup']?.iteration).toBe(6);
    expect(res.results['eval.a']?.metrics.accuracy).toBe(0.5);
    expect(existsSync(join(runDir, 'logs', 'cpt.warmup.log'))).toBe(true);
    expect(existsSync(join(runDir, 'results', 'eval.b.json'))).toBe(true);
  });

  it('resumes a crashed trainer from its last complete checkpoint without recomputing before it', async () => {
    const runDir = tmpRunDir(env, 'crash');
    // Stands in for `ray job stop`: a crashed attempt's outside work is stopped, a successful one's is not.
    const stops = join(runDir, 'stops.txt');
    const onStop = ['sh', '-c', `echo "stop job-a{attempt}" >> ${stops}`];
    const plan = fakePlan(runDir, 'crash', [fakeStep({ id: 'cpt.stable', runDir, iters: 12, saveInterval: 4, faults: ['crash@7'], onStop })]);
    const h = await startPlan(env, plan);
    const st = await onlyStepOf(h);
    expect(st.status).toBe('completed');
    expect(st.attempts).toBe(2);
    expect(st.failures.crash).toBe(1);
    expect(st.result?.resumedFrom).toBe(4);
    // Iterations up to the checkpoint (4) ran once; only 5 and 6, after it, ran again.
    expect(recomputed(runDir, 'cpt.stable', 4)).toEqual([]);
    expect(journal(runDir, 'cpt.stable').at(-1)?.iteration).toBe(12);
    expect(readFileSync(stops, 'utf8')).toBe('stop job-a1\n');
  });

  it('a stop command slower than the heartbeat timeout (scancel until the job is gone): the attempt stays a crash, not a lost worker', async () => {
    const runDir = tmpRunDir(env, 'slowstop');
    // 8 s of stopping after the trainer exits, with a 5 s heartbeat timeout: the attempt must go on heartbeating, or
    // the server takes it for a dead worker (preempted) and schedules the next one while it is still stopping.
    const plan = fakePlan(runDir, 'slowstop', [fakeStep({ id: 'cpt.stable', runDir, iters: 12, saveInterval: 4, faults: ['crash@7'], onStop: ['sleep', '8'] })]);
    const st = await onlyStepOf(await startPlan(env, plan));
    expect(st.status).toBe('completed');
    expect(st.failures).toEqual({ crash: 1 });
    expect(readFileSync(join(runDir, 'logs', 'cpt.stable.log'), 'utf8')).toMatch(/stop command sleep 8: exit 0/);
  });

  it('detects a hung trainer within the stall timeout + 5 s, kills it and resumes', async () => {
    const runDir = tmpRunDir(env, 'hang');
    const stall = 4;
    const plan = fakePlan(runDir, 'hang', [fakeStep({ id: 'cpt.warmup', runDir, iters: 10, saveInterval: 3, faults: ['hang@5'], stallTimeoutSec: stall })]);
    const h = await startPlan(env, plan);
    // The trainer stops progressing once iteration 4 is logged.
    await waitFor('iteration 4', () => journal(runDir, 'cpt.warmup').some((e) => e.iteration === 4));
    const hungAt = Date.now();
    const hungPid = journal(runDir, 'cpt.warmup')[0]!.pid;
    await waitFor('the hung trainer to be killed', () => processesMentioning(runDir).every((p) => p !== hungPid), (stall + 10) * 1000);
    const detectedSec = (Date.now() - hungAt) / 1000;
    expect(detectedSec).toBeLessThanOrEqual(stall + 5);
    const st = await onlyStepOf(h);
    expect(st.status).toBe('completed');
    expect(st.failures.hang).toBe(1);
    expect(st.result?.resumedFrom).toBe(3);
    expect(recomputed(runDir, 'cpt.warmup', 3)).toEqual([]);
  });

  it('skips a partial newest checkpoint and resumes from the previous complete one', async () => {
    const runDir = tmpRunDir(env, 'partial');
    const plan = fakePlan(runDir, 'partial', [fakeStep({ id: 'cpt.decay', runDir, iters: 9, saveInterval: 3, faults: ['partial@6'] })]);
    const h = await startPlan(env, plan);
    const st = await onlyStepOf(h);
    expect(st.status).toBe('completed');
    expect(st.failures.preempted).toBe(1); // killed by SIGKILL mid-save
    expect(st.result?.resumedFrom).toBe(3);
    const ckpts = readdirSync(join(runDir, 'cpt.decay', 'checkpoints'));
    // Moved aside for the retry, then removed once a complete checkpoint 6 superseded it (it only held space).
    const log = readFileSync(join(runDir, 'logs', 'cpt.decay.log'), 'utf8');
    expect(log).toMatch(/moved a partial checkpoint aside: .*iter_0000006\.partial-\d+/);
    expect(log).toMatch(/removed a partial save a newer complete checkpoint supersedes: .*iter_0000006\.partial-\d+/);
    expect(ckpts.filter((n) => n.includes('.partial-'))).toEqual([]);
    expect(ckpts).toContain('iter_0000009');
  });

  it('resumes a trainer SIGKILLed from outside (an operator, a scheduler) as preempted, from its last complete checkpoint', async () => {
    const runDir = tmpRunDir(env, 'killed');
    const plan = fakePlan(runDir, 'killed', [fakeStep({ id: 'sft.stage1', runDir, iters: 20, saveInterval: 5, sleep: 0.1 })]);
    const h = await startPlan(env, plan);
    await waitFor('iteration 8', () => journal(runDir, 'sft.stage1').some((e) => e.iteration >= 8));
    const victim = journal(runDir, 'sft.stage1')[0]!.pid;
    process.kill(victim, 'SIGKILL');
    const st = await onlyStepOf(h);
    expect(st.status).toBe('completed');
    expect(st.attempts).toBe(2);
    expect(st.failures.preempted).toBe(1);
    expect(st.result?.resumedFrom).toBe(5);
    expect(recomputed(runDir, 'sft.stage1', 5)).toEqual([]);
    expect(journal(runDir, 'sft.stage1').filter((e) => e.pid !== victim)[0]?.iteration).toBe(6);
    expect(processesMentioning(runDir)).toEqual([]);
  });

  it('classifies a trainer taken by the kernel OOM killer (silent SIGKILL) as oom, and resumes it', async (ctx) => {
    const cgroup = memoryCgroup(128 << 20);
    if (!cgroup) return ctx.skip(); // not root, or no cgroup v1 memory controller to limit
    const runDir = tmpRunDir(env, 'oomkill');
    const plan = fakePlan(runDir, 'oomkill', [
      fakeStep({ id: 'sft.stage2', runDir, iters: 9, saveInterval: 3, faults: ['oomkill@5'], env: { FAKE_OOM_CGROUP: cgroup.dir } }),
    ]);
    try {
      const st = await onlyStepOf(await startPlan(env, plan));
      expect(st.status).toBe('completed');
      expect(st.failures.oom).toBe(1);
      expect(st.result?.resumedFrom).toBe(3);
      expect(readFileSync(join(runDir, 'logs', 'sft.stage2.log'), 'utf8')).toMatch(/attempt 1 failed: oom: killed by the kernel's OOM killer \(1 OOM kill in \S+ during the attempt\)/);
    } finally {
      await waitFor('the cgroup to empty', () => readFileSync(join(cgroup.dir, 'cgroup.procs'), 'utf8').trim() === '');
      cgroup.remove();
    }
  });

  it('fails a bad configuration at once, naming the step and the cause', async () => {
    const runDir = tmpRunDir(env, 'badcfg');
    const plan = fakePlan(runDir, 'badcfg', [
      fakeStep({ id: 'cpt.warmup', runDir, iters: 3 }),
      fakeStep({ id: 'sft.stage1', runDir, iters: 3, faults: ['badarg'], dependsOn: ['cpt.warmup'] }),
      fakeStep({ id: 'eval.x', runDir, files: true, dependsOn: ['sft.stage1'] }),
    ]);
    const h = await startPlan(env, plan);
    const err = await h.result().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const msg = String((err as WorkflowFailedError).cause?.message);
    expect(msg).toContain('sft.stage1');
    expect(msg).toContain('config');
    const status = await h.query(statusQuery);
    const sft = status.steps.find((s) => s.id === 'sft.stage1')!;
    expect(sft.attempts).toBe(1);
    expect(sft.lastFailure?.class).toBe('config');
    expect(status.steps.find((s) => s.id === 'eval.x')?.status).toBe('skipped');
    expect(status.status).toBe('failed');
  });

  it('fails a step at once as config when its worker has fewer GPUs than it needs', async () => {
    const runDir = tmpRunDir(env, 'nogpu');
    const plan = fakePlan(runDir, 'nogpu', [{ ...fakeStep({ id: 'cpt.warmup', runDir, iters: 3 }), gpus: 2 }]);
    const h = await startPlan(env, plan);
    const err = await h.result().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const st = (await h.query(statusQuery)).steps[0]!;
    expect(st.attempts).toBe(1);
    expect(st.lastFailure?.class).toBe('config');
    expect(st.lastFailure?.message).toContain('the step needs 2 GPUs per node but this worker has 0');
  });

  it('waits for the lock of a trainer on another host until its lease runs out, then takes over', async () => {
    const runDir = tmpRunDir(env, 'foreignlock');
    const step = fakeStep({ id: 'cpt.stable', runDir, iters: 4, saveInterval: 2 });
    const dir = step.checkpoint!.dir;
    mkdirSync(dir, { recursive: true });
    // The lock of an attempt on a node that died: its lease has 4 s left when the step starts.
    const lock = join(dir, LOCK_FILE);
    writeFileSync(lock, JSON.stringify({ host: 'gpu-node-17', workerPid: 1, pgid: 4242, startTicks: 1, owner: 'old attempt', since: '', token: 'x', stop: null }));
    const aged = new Date(Date.now() - LOCK_LEASE_MS + 4_000);
    utimesSync(lock, aged, aged);
    const t0 = Date.now();
    const h = await startPlan(env, fakePlan(runDir, 'foreignlock', [step]));
    const st = await onlyStepOf(h);
    expect(st.status).toBe('completed');
    expect(st.attempts).toBe(1); // no retry budget spent on waiting
    expect(Date.now() - t0).toBeGreaterThanOrEqual(3_000);
    const log = readFileSync(join(runDir, 'logs', 'cpt.stable.log'), 'utf8');
    expect(log).toContain(`waiting for the lock: ${dir} is locked by old attempt on gpu-node-17`);
    expect(log).toContain('taking over a stale lock of old attempt on gpu-node-17');
  });

  it('stops retrying a failure class once its budget is spent', async () => {
    const runDir = tmpRunDir(env, 'oom');
    const plan = fakePlan(runDir, 'oom', [fakeStep({ id: 'rl.stage1', runDir, iters: 6, faults: ['oom@2'], retries: { oom: 0 } })]);
    const h = await startPlan(env, plan);
    const err = await h.result().catch((e: unknown) => e);
    expect(String((err as WorkflowFailedError).cause?.message)).toMatch(/rl\.stage1.*oom/);
  });

  it('cancels a run: within 10 s no process of it remains and it shows cancelled', async () => {
    const runDir = tmpRunDir(env, 'cancel');
    const plan = fakePlan(runDir, 'cancel', [fakeStep({ id: 'cpt.warmup', runDir, iters: 1000, sleep: 0.1, faults: ['child'] })]);
    const h = await startPlan(env, plan);
    await waitFor('training to start', () => journal(runDir, 'cpt.warmup').length >= 3);
    expect(processesMentioning(runDir).length).toBeGreaterThan(0);
    const t0 = Date.now();
    await h.cancel();
    await waitFor('no process of the run', () => processesMentioning(runDir).length === 0, 10_000);
    const desc = await waitFor('cancelled status', async () => {
      const d = await h.describe();
      return d.status.name === 'CANCELLED' ? d : null;
    }, 10_000);
    expect(desc.status.name).toBe('CANCELLED');
    expect(Date.now() - t0).toBeLessThan(10_000);
  });
});

describe('infrastructure faults', () => {
  it('survives a worker SIGKILLed mid-step: the zombie trainer and its outside work are stopped, the run completes', async () => {
    const runDir = tmpRunDir(env, 'workerkill');
    // A second worker that will be killed; stop the shared one so the step lands on it.
    const shared = env.workers[0]!;
    await env.stopWorker(shared);
    const victim = await env.startWorker();
    // Stands in for `ray job stop <submission id of the attempt>`: the work a dead worker left outside its
    // process group must be stopped by the attempt that takes over.
    const stops = join(runDir, 'stops.txt');
    const onStop = ['sh', '-c', `echo "stop job-a{attempt}" >> ${stops}`];
    // 20 s of training: the trainer the dead worker leaves trains on behind its launcher (it is the takeover that
    // stops it, after it saves), so it must still be training when the heartbeat timeout hands the step over.
    const plan = fakePlan(runDir, 'workerkill', [fakeStep({ id: 'cpt.stable', runDir, iters: 200, saveInterval: 5, sleep: 0.1, onStop })]);
    const h = await startPlan(env, plan);
    await waitFor('iteration 12', () => journal(runDir, 'cpt.stable').some((e) => e.iteration >= 12));
    const firstPid = journal(runDir, 'cpt.stable')[0]!.pid;
    process.kill(victim.pid!, 'SIGKILL');
    const killedAt = Date.now();
    await env.startWorker();
    const st = await onlyStepOf(h);
    expect(st.status).toBe('completed');
    expect(st.failures.preempted).toBe(1);
    // Two trainers never wrote together: once the second attempt's pid appears, the first never does again.
    const pids = journal(runDir, 'cpt.stable').map((e) => e.pid);
    const switchAt = pids.findIndex((p) => p !== firstPid);
    expect(switchAt).toBeGreaterThan(0);
    expect(pids.slice(switchAt).includes(firstPid)).toBe(false);
    expect(readFileSync(stops, 'utf8')).toBe('stop job-a1\n'); // once, for the dead attempt only
    expect(processesMentioning(runDir)).toEqual([]);
    // Recovery, from the kill to the new trainer's first iteration: heartbeat timeout (5 s) + the orphan's stop (it
    // saves) + retry delay + restart, well under a minute here.
    const resumedAt = journal(runDir, 'cpt.stable')[switchAt]!.t * 1000;
    expect((resumedAt - killedAt) / 1000).toBeLessThan(60);
  });

  it('survives a dev server restart mid-run (same SQLite file)', async () => {
    const runDir = tmpRunDir(env, 'serverrestart');
    const plan = fakePlan(runDir, 'serverrestart', [
      fakeStep({ id: 'cpt.warmup', runDir, iters: 30, saveInterval: 5, sleep: 0.1 }),
      fakeStep({ id: 'sft.stage1', runDir, iters: 5, dependsOn: ['cpt.warmup'] }),
    ]);
    const h = await startPlan(env, plan);
    await waitFor('iteration 8', () => journal(runDir, 'cpt.warmup').some((e) => e.iteration >= 8));
    // `logs --follow` rides the restart out as `run`'s own follow does (it used to exit 1 at the first refusal).
    const follow = spawn(process.execPath, [join(ROOT, 'bin', 'infir2.js'), 'logs', h.workflowId, '--stage', 'cpt.warmup', '--follow'], {
      env: { ...process.env, TEMPORAL_ADDRESS: env.server.address },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let followed = '';
    follow.stdout!.on('data', (d) => (followed += d));
    follow.stderr!.on('data', (d) => (followed += d));
    const followExit = new Promise<number | null>((r) => follow.once('exit', (code) => r(code)));
    await waitFor('logs --follow to stream', () => /iteration\s+8\//.test(followed));
    await env.restartServer();
    const res = (await h.result()) as { status: RunStatus };
    expect(res.status.status).toBe('completed');
    expect(res.status.steps.every((s) => s.status === 'completed')).toBe(true);
    expect(processesMentioning(runDir)).toEqual([]);
    expect(await followExit).toBe(0);
    expect(followed).toMatch(/iteration\s+30\//);
  });

  it('lets a training step checkpoint and exit when its worker shuts down, then resumes it elsewhere', async () => {
    const runDir = tmpRunDir(env, 'shutdown');
    const plan = fakePlan(runDir, 'shutdown', [fakeStep({ id: 'cpt.stable', runDir, iters: 60, saveInterval: 50, sleep: 0.1 })]);
    const current = env.workers.filter((w) => w.exitCode === null && w.signalCode === null);
    const h = await startPlan(env, plan);
    await waitFor('iteration 12', () => journal(runDir, 'cpt.stable').some((e) => e.iteration >= 12));
    // SIGTERM every live worker (a node being drained), then bring up a fresh one.
    await Promise.all(current.map((w) => env.stopWorker(w)));
    const log = readFileSync(join(runDir, 'logs', 'cpt.stable.log'), 'utf8');
    expect(log).toContain("stopping the attempt's processes: shutdown: SIGTERM to the ranks' main processes");
    expect(log).toMatch(/exiting program after receiving SIGTERM/);
    // It saved where it stopped, far from its save interval of 50.
    const saved = Number(/successfully saved checkpoint from iteration\s+(\d+)/.exec(log)?.[1]);
    expect(saved).toBeGreaterThanOrEqual(12);
    expect(saved).toBeLessThan(50);
    await env.startWorker();
    const st = await onlyStepOf(h);
    expect(st.status).toBe('completed');
    expect(st.failures.preempted).toBe(1);
    expect(st.result?.resumedFrom).toBe(saved);
  });

  it('reads the status of a finished, failed or cancelled run with no worker up (from what it recorded, not a query)', async () => {
    const runDir = tmpRunDir(env, 'noworker');
    const ok = await startPlan(env, fakePlan(runDir, 'noworker-ok', [fakeStep({ id: 'cpt.warmup', runDir, iters: 2 })]));
    await ok.result();
    const bad = await startPlan(env, fakePlan(runDir, 'noworker-bad', [fakeStep({ id: 'sft.stage1', runDir, iters: 2, faults: ['badarg'] })]));
    await bad.result().catch(() => undefined);
    const goneDir = tmpRunDir(env, 'noworker-gone');
    const gone = await startPlan(env, fakePlan(goneDir, 'noworker-gone', [
      fakeStep({ id: 'cpt.warmup', runDir: goneDir, iters: 2 }),
      fakeStep({ id: 'cpt.stable', runDir: goneDir, iters: 1000, sleep: 0.1, dependsOn: ['cpt.warmup'] }),
      fakeStep({ id: 'sft.stage1', runDir: goneDir, iters: 2, dependsOn: ['cpt.stable'] }),
    ]));
    await waitFor('cpt.stable to train', () => journal(goneDir, 'cpt.stable').length >= 2);
    await gone.cancel();
    await gone.result().catch(() => undefined);
    const live = env.workers.filter((w) => w.exitCode === null && w.signalCode === null);
    await Promise.all(live.map((w) => env.stopWorker(w)));
    try {
      const t0 = Date.now();
      const done = await runStatus(env.client, await resolveRun(env.client, 'fake-noworker-ok'));
      expect(done.status).toBe('completed');
      expect(done.steps.map((st) => [st.id, st.status, st.result?.iteration])).toEqual([['cpt.warmup', 'completed', 2]]);
      const failed = await runStatus(env.client, await resolveRun(env.client, 'fake-noworker-bad'));
      expect(failed.status).toBe('failed');
      expect(failed.steps[0]).toMatchObject({ id: 'sft.stage1', status: 'failed', lastFailure: { class: 'config' } });
      const cancelled = await runStatus(env.client, await resolveRun(env.client, 'fake-noworker-gone'));
      expect(cancelled.status).toBe('cancelled');
      expect(cancelled.steps.map((st) => [st.id, st.status])).toEqual([
        ['cpt.warmup', 'completed'],
        ['cpt.stable', 'cancelled'],
        ['sft.stage1', 'skipped'],
      ]);
      expect(Date.now() - t0).toBeLessThan(5_000);
    } finally {
      await env.startWorker();
    }
  });

  it('replays every history recorded here with the current workflow code (no nondeterminism)', async () => {
    const histories = env.client.workflow.list({ query: "WorkflowType = 'recipeRun' OR WorkflowType = 'stageRun'" }).intoHistories();
    let count = 0;
    for await (const r of Worker.runReplayHistories({ workflowsPath: join(ROOT, 'src', 'workflows', 'index.ts') }, histories)) {
      count += 1;
      expect(r.error, `${r.workflowId}: ${String(r.error)}`).toBeUndefined();
    }
    expect(count).toBeGreaterThan(10);
  });
});
