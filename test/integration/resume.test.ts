/**
 * `infir2 resume`, `status --json`, `list --json` and `logs` through the built CLI against a real dev server:
 * a run that fails in sft.stage2 after its retries is resumed without rerunning anything before it, the
 * dry run says what then happens, and deleted outputs are rerun, never trusted. A cancelled run is resumed the
 * same way, and is read (status, logs, the dry run) with no worker up.
 */
import { execFile } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ORIGIN_FILE, RECIPE_FILE } from '../../src/cli/recipe-changes.js';
import { loadRecipe } from '../../src/recipe/load.js';
import { inspectCheckpointDir } from '../../src/rundir/checkpoints.js';
import { fakePlan, fakeStep, journal, ROOT, setupEnv, startPlan, tmpRunDir, waitFor, type Env } from './harness.js';

const exec = promisify(execFile);
let env: Env;

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await exec(process.execPath, [join(ROOT, 'bin', 'infir2.js'), ...args], {
      env: { ...process.env, TEMPORAL_ADDRESS: env.server.address },
      timeout: 120_000,
    });
    return { code: 0, ...r };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

beforeAll(async () => {
  env = await setupEnv('resume');
  await env.startWorker();
});

afterAll(async () => {
  await env?.teardown();
});

/**
 * cpt.warmup → sft.stage1 → sft.stage2 → eval.x. sft.stage2 crashes after checkpoint 6 (progress: retried), then
 * again before its next checkpoint: with retries.crash 0 that restart loop fails the run.
 */
async function failingRun(name: string) {
  const runDir = tmpRunDir(env, name);
  const plan = fakePlan(runDir, name, [
    fakeStep({ id: 'cpt.warmup', runDir, iters: 6 }),
    fakeStep({ id: 'sft.stage1', runDir, iters: 4, dependsOn: ['cpt.warmup'] }),
    fakeStep({ id: 'sft.stage2', runDir, iters: 12, saveInterval: 3, faults: ['crash@8', 'crash@9'], retries: { crash: 0 }, dependsOn: ['sft.stage1'] }),
    fakeStep({ id: 'eval.x', runDir, files: true, dependsOn: ['sft.stage2'] }),
  ]);
  const h = await startPlan(env, plan);
  await expect(h.result()).rejects.toThrow();
  return { runDir, workflowId: h.workflowId };
}

function decisions(stdout: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of stdout.split('\n')) {
    const m = /^(\S+)\s{2,}(keep|rerun|resume from \d+)\s{2,}/.exec(line);
    if (m) out[m[1]!] = m[2]!;
  }
  return out;
}

describe('infir2 resume', () => {
  it('keeps finished steps, continues the failed one from its checkpoint, and does what the dry run said', async () => {
    const { runDir, workflowId } = await failingRun('resume-a');
    const status = JSON.parse((await cli(['status', workflowId, '--json'])).stdout) as { status: string; steps: { id: string; status: string; attempts: number }[] };
    expect(status.status).toBe('failed');
    expect(status.steps.map((s) => s.status)).toEqual(['completed', 'completed', 'failed', 'skipped']);
    expect(status.steps[2]!.attempts).toBe(2);

    const dry = await cli(['resume', workflowId, '--dry-run']);
    expect(dry.code).toBe(0);
    const said = decisions(dry.stdout);
    expect(said).toEqual({ 'cpt.warmup': 'keep', 'sft.stage1': 'keep', 'sft.stage2': 'resume from 6', 'eval.x': 'rerun' });

    const before = { cpt: journal(runDir, 'cpt.warmup').length, sft1: journal(runDir, 'sft.stage1').length };
    const stage2Pids = new Set(journal(runDir, 'sft.stage2').map((e) => e.pid));
    const r = await cli(['resume', workflowId]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);

    // What the dry run said is what happened: no CPT or sft.stage1 process ran again...
    expect(journal(runDir, 'cpt.warmup').length).toBe(before.cpt);
    expect(journal(runDir, 'sft.stage1').length).toBe(before.sft1);
    // ...and sft.stage2's new process started at iteration 7, right after checkpoint 6.
    const fresh = journal(runDir, 'sft.stage2').filter((e) => !stage2Pids.has(e.pid));
    expect(fresh[0]?.iteration).toBe(7);
    expect(fresh.at(-1)?.iteration).toBe(12);
    const after = JSON.parse((await cli(['status', workflowId, '--json'])).stdout) as { status: string; steps: { id: string; status: string }[] };
    expect(after.status).toBe('completed');
    expect(after.steps.map((s) => s.status)).toEqual(['kept', 'kept', 'completed', 'completed']);

    const logs = await cli(['logs', workflowId, '--stage', 'sft.stage2']);
    expect(logs.stdout).toContain('resuming from iteration 6');
    const list = JSON.parse((await cli(['list', '--json'])).stdout) as { workflowId: string; status: string }[];
    expect(list.find((x) => x.workflowId === workflowId)?.status).toBe('completed');
  });

  it('reruns a finished step whose outputs were deleted, and everything after it; names what changed in its recipe file', async () => {
    const { runDir, workflowId } = await failingRun('resume-b');
    // What `infir2 run <file> --set …` records beside the plan (this run was started with a hand-built plan).
    const file = join(env.dir, 'resume-b.yaml');
    writeFileSync(file, 'name: fake\npreset: tiny\ncpt:\n  iterations: 600\n');
    writeFileSync(join(runDir, RECIPE_FILE), JSON.stringify((await loadRecipe(file, { sets: ['cpt.seed=7'] })).recipe));
    writeFileSync(join(runDir, ORIGIN_FILE), JSON.stringify({ source: file, sets: ['cpt.seed=7'], cwd: ROOT }));
    writeFileSync(file, 'name: fake\npreset: tiny\ncpt:\n  iterations: 800\n');
    rmSync(join(runDir, 'sft.stage1', 'checkpoints', 'iter_0000004'), { recursive: true });
    const dry = await cli(['resume', workflowId, '--dry-run']);
    expect(decisions(dry.stdout)).toEqual({ 'cpt.warmup': 'keep', 'sft.stage1': 'rerun', 'sft.stage2': 'rerun', 'eval.x': 'rerun' });
    expect(dry.stdout).toContain('its outputs were deleted');
    const note = `note: ${file} changed since this run started; resuming with the recorded recipe (changed: cpt.iterations 600→800).`;
    expect(dry.stdout).toContain(note);
    const cptRuns = journal(runDir, 'cpt.warmup').length;
    const r = await cli(['resume', workflowId]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(note);
    expect(journal(runDir, 'cpt.warmup').length).toBe(cptRuns);
    // sft.stage1 ran again from scratch: its last process computed iterations 1..4.
    const sft1 = journal(runDir, 'sft.stage1');
    const lastPid = sft1.at(-1)!.pid;
    expect(sft1.filter((e) => e.pid === lastPid).map((e) => e.iteration)).toEqual([1, 2, 3, 4]);
  });

  it('refuses to resume a running run, and a completed one without --from', async () => {
    const runDir = tmpRunDir(env, 'resume-c');
    const h = await startPlan(env, fakePlan(runDir, 'resume-c', [fakeStep({ id: 'cpt.warmup', runDir, iters: 200, sleep: 0.1 })]));
    await waitFor('training', () => journal(runDir, 'cpt.warmup').length > 0);
    const r = await cli(['resume', h.workflowId]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('is still running');
    await h.cancel();
  });

  it('resumes a cancelled run where it stopped; status, logs and the dry run need no worker', async () => {
    const runDir = tmpRunDir(env, 'resume-d');
    const plan = fakePlan(runDir, 'resume-d', [
      fakeStep({ id: 'cpt.warmup', runDir, iters: 4 }),
      fakeStep({ id: 'cpt.stable', runDir, iters: 60, saveInterval: 5, sleep: 0.1, dependsOn: ['cpt.warmup'] }),
      fakeStep({ id: 'sft.stage1', runDir, iters: 2, dependsOn: ['cpt.stable'] }),
    ]);
    const { workflowId } = await startPlan(env, plan);
    await waitFor('cpt.stable past iteration 12', () => journal(runDir, 'cpt.stable').some((e) => e.iteration >= 12));
    const c = await cli(['cancel', workflowId]);
    expect(c.code).toBe(0);
    expect(c.stdout).toContain(`${workflowId}: cancelled; no training process of it is left`);

    const live = env.workers.filter((w) => w.exitCode === null && w.signalCode === null);
    await Promise.all(live.map((w) => env.stopWorker(w)));
    let resumeAt: number;
    try {
      const st = await cli(['status', workflowId, '--json']);
      expect(st.stderr).toBe('');
      const status = JSON.parse(st.stdout) as { status: string; steps: { id: string; status: string }[] };
      expect(status.status).toBe('cancelled');
      expect(status.steps.map((s) => s.status)).toEqual(['completed', 'cancelled', 'skipped']);
      // The trainer saved on SIGTERM after the workflow heard its last progress: status shows the disk's newest.
      const onDisk = inspectCheckpointDir(join(runDir, 'cpt.stable', 'checkpoints')).latestComplete;
      expect((status.steps[1] as { progress?: { lastCheckpoint: number | null } }).progress?.lastCheckpoint).toBe(onDisk);
      const logs = await cli(['logs', workflowId, '--stage', 'cpt.stable']);
      expect(logs.code).toBe(0);
      expect(logs.stdout).toMatch(/iteration\s+12\//);
      const dry = await cli(['resume', workflowId, '--dry-run']);
      expect(dry.stderr).toBe('');
      const said = decisions(dry.stdout);
      expect(said['cpt.warmup']).toBe('keep');
      expect(said['sft.stage1']).toBe('rerun');
      // The trainer saved on the cancel's SIGTERM (or at its last interval): never earlier than iteration 10.
      resumeAt = Number(/^resume from (\d+)$/.exec(said['cpt.stable'] ?? '')?.[1]);
      expect(resumeAt).toBeGreaterThanOrEqual(10);
      expect(resumeAt).toBe(onDisk);
    } finally {
      await env.startWorker();
    }

    const stablePids = new Set(journal(runDir, 'cpt.stable').map((e) => e.pid));
    const warmupRuns = journal(runDir, 'cpt.warmup').length;
    const r = await cli(['resume', workflowId]);
    expect(r.code).toBe(0);
    expect(journal(runDir, 'cpt.warmup').length).toBe(warmupRuns);
    const fresh = journal(runDir, 'cpt.stable').filter((e) => !stablePids.has(e.pid));
    expect(fresh[0]?.iteration).toBe(resumeAt + 1);
    expect(fresh.at(-1)?.iteration).toBe(60);
    const after = JSON.parse((await cli(['status', workflowId, '--json'])).stdout) as { status: string; steps: { status: string }[] };
    expect(after.status).toBe('completed');
    expect(after.steps.map((s) => s.status)).toEqual(['kept', 'completed', 'completed']);
  });
});

describe('run refuses what cannot start, and leaves nothing behind', () => {
  it('a run directory under /proc: exit 2 at once, naming it (it used to spin forever)', async () => {
    const t0 = Date.now();
    const r = await cli(['run', 'tiny', '--set', 'runDir=/proc/x', '--detach', '--run-id', 'proc-dir']);
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toBe('error: runDir /proc/x/proc-dir: /proc is on the proc pseudo file system, which cannot hold a run');
    expect(Date.now() - t0).toBeLessThan(5_000);
  });

  it('a plan over the payload limit: exit 2 naming the sizes; no run directory; the run id stays usable', async () => {
    // Under the loader's 1 MB limit, but the CPT env is copied into each of its three phases: a 2.7 MB plan.
    const runDir = tmpRunDir(env, 'big-plan');
    const file = join(env.dir, 'big.yaml');
    writeFileSync(file, `preset: tiny\nname: big\nrunDir: ${runDir}\ncpt:\n  env:\n    BIG: ${'x'.repeat(900_000)}\n`);
    const r = await cli(['run', file, '--detach', '--run-id', 'big-plan']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error: the compiled plan is 2\.\d MiB, over Temporal's 2 MiB payload limit/);
    expect(existsSync(runDir)).toBe(false);
  });
});
