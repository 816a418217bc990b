/**
 * The local reference trainer data-parallel under a real torchrun (two ranks, gloo, on CPU), started by a real
 * worker against a real dev server: a tiny CPT as `torchrun --nnodes=1 --nproc_per_node=2 --rdzv_endpoint=…
 * --rdzv_backend=c10d`, the argv shape the 7B plan renders; one rank SIGKILLed (torchrun ends the job: a crash,
 * resumed with both ranks from the newest complete checkpoint); one rank stopped while the other waits in the
 * all-reduce (a hang, caught long before gloo's 30-minute timeout); a rendezvous that never completes (a hang
 * at the startup limit); a cancel. After each, no rank and no torchrun is left.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunStatus, StepState } from '../../src/plan/contracts.js';
import { compilePlan } from '../../src/plan/compile.js';
import type { Plan } from '../../src/plan/types.js';
import { loadRecipe } from '../../src/recipe/load.js';
import { statusQuery } from '../../src/workflows/definitions.js';
import { freePort, processesMentioning, ROOT, setupEnv, startPlan, tmpRunDir, waitFor, type Env } from './harness.js';
import { attemptsOf, lastIteration } from './megatron-standin.js';

let env: Env;

beforeAll(async () => {
  env = await setupEnv('torchrun');
  await env.startWorker([], ['local']);
});

afterAll(async () => {
  await env?.teardown();
});

/** torch 1.13's torchrun on Python ≥ 3.11 fails to parse its own default `--redirects`/`--tee` (docs/cluster.md). */
const TORCHRUN_ARGS = '[--redirects=2,--tee=2]';

/**
 * The tiny recipe's CPT on a torchrun pool of two CPU ranks, and only its CPT steps: stable 0→50 and decay
 * 50→60, a checkpoint every 5 iterations, progress every iteration, 8-row micro-batches (one per rank).
 */
async function torchrunPlan(name: string, sets: string[] = []): Promise<Plan> {
  const runDir = tmpRunDir(env, name);
  const port = await freePort();
  const torchrun = existsSync(join(ROOT, '.venv', 'bin', 'torchrun')) ? join(ROOT, '.venv', 'bin', 'torchrun') : 'torchrun';
  const { recipe } = await loadRecipe('tiny', {
    cwd: ROOT,
    sets: [
      `runDir=${runDir}`,
      'pools.local.launcher=torchrun',
      'pools.local.ranksPerNode=2',
      `pools.local.rdzvEndpoint=127.0.0.1:${port}`,
      `software.torchrun=${torchrun}`,
      `software.torchrunArgs=${TORCHRUN_ARGS}`,
      'cpt.iterations=60',
      'cpt.warmupIters=0',
      'cpt.decayIters=10',
      'cpt.saveInterval=5',
      'cpt.logInterval=1',
      'cpt.evalInterval=1000',
      'cpt.microBatchSize=8',
      ...sets,
    ],
  });
  const plan = compilePlan(recipe, { runId: name, projectRoot: ROOT });
  return { ...plan, runDir: join(runDir, name), steps: plan.steps.filter((s) => s.kind === 'cpt') };
}

/** The pid of the trainer process of `rank` among the run's processes (torchrun sets RANK in its children). */
function rankPid(runDir: string, rank: number): number | undefined {
  return processesMentioning(runDir).find((pid) => {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      // A rank runs the trainer itself; torchrun's own command line names main.py too, after torchrun.
      const program = cmd.split('\0').slice(0, 2);
      return program[1]?.endsWith(join('trainer', 'main.py')) && environ.includes(`RANK=${rank}`);
    } catch {
      return false;
    }
  });
}

/** Every process that names the run: the ranks and torchrun itself. */
const leftOver = (runDir: string) => processesMentioning(runDir);

async function finalSteps(h: { result(): Promise<unknown> }): Promise<Record<string, StepState>> {
  const res = (await h.result()) as { status: RunStatus };
  expect(res.status.status).toBe('completed');
  return Object.fromEntries(res.status.steps.map((s) => [s.id, s]));
}

describe('the local trainer under torchrun', () => {
  it('runs a tiny CPT on two ranks with the argv shape of the 7B plan', async () => {
    const plan = await torchrunPlan('plain');
    const stable = plan.steps.find((s) => s.id === 'cpt.stable')!;
    const seven = compilePlan((await loadRecipe(join(ROOT, 'recipes', 'qwen2.5-7b-fp8.yaml'))).recipe, { runId: 'x' }).steps.find((s) => s.id === 'cpt.stable')!;
    // The same launcher flags in the same order; the local plan adds the 1.13 workaround and names its interpreter.
    const flags = (argv: string[]) => argv.slice(1, argv.findIndex((a, i) => i > 0 && !a.startsWith('--'))).map((a) => a.split('=')[0]);
    expect(flags(seven.command.argv)).toEqual(['--nnodes', '--nproc_per_node', '--rdzv_endpoint', '--rdzv_backend']);
    expect(flags(stable.command.argv)).toEqual(['--nnodes', '--nproc_per_node', '--rdzv_endpoint', '--rdzv_backend', '--redirects', '--tee', '--no_python']);
    expect(stable.command.argv.slice(1, 3)).toEqual(['--nnodes=1', '--nproc_per_node=2']);

    const steps = await finalSteps(await startPlan(env, plan));
    expect(Object.keys(steps)).toEqual(['cpt.stable', 'cpt.decay']);
    for (const s of Object.values(steps)) expect(s.failures).toEqual({});
    const log = readFileSync(join(plan.runDir, 'logs', 'cpt.stable.log'), 'utf8');
    // Rank 0 alone prints: one line per iteration, and the world it trained in.
    expect(log).toMatch(/data parallel: 2 ranks \(gloo\)/);
    expect(attemptsOf(plan.runDir, 'cpt.stable')[0]!.iterations).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect(existsSync(join(plan.runDir, 'cpt', 'checkpoints', 'iter_0000050', 'metadata.json'))).toBe(true);
    expect(leftOver(plan.runDir)).toEqual([]);
  }, 240_000);

  it('a rank SIGKILLed ends the job as a crash; a rank stopped in the all-reduce is a hang; each resumes with both ranks', async () => {
    const plan = await torchrunPlan('faults', ['cpt.iterations=90', 'cpt.decayIters=10']);
    const runDir = plan.runDir;
    const h = await startPlan(env, plan);

    await waitFor('cpt.stable past iteration 12', () => lastIteration(runDir, 'cpt.stable') >= 12, 120_000);
    const victim = rankPid(runDir, 1)!;
    expect(victim).toBeGreaterThan(0);
    const killedAt = Date.now();
    process.kill(victim, 'SIGKILL');
    await waitFor('attempt 2 to print an iteration', () => (attemptsOf(runDir, 'cpt.stable')[1]?.iterations.length ?? 0) > 0, 120_000);
    const deathToIteration = (Date.now() - killedAt) / 1000;
    console.log(`[torchrun] rank 1 SIGKILLed → resumed step's first iteration ${deathToIteration.toFixed(1)} s later`);

    await waitFor('attempt 2 past 3 more iterations', () => (attemptsOf(runDir, 'cpt.stable')[1]?.iterations.length ?? 0) > 3, 120_000);
    const stopped = rankPid(runDir, 1)!;
    const progressStoppedAt = Date.now();
    process.kill(stopped, 'SIGSTOP');
    await waitFor('the hang to be declared', () => /\] stall: /.test(readFileSync(join(runDir, 'logs', 'cpt.stable.log'), 'utf8')), 120_000);
    const hangS = (Date.now() - progressStoppedAt) / 1000;
    console.log(`[torchrun] rank 1 stopped → hang declared ${hangS.toFixed(1)} s later (gloo's own timeout: 1800 s)`);
    expect(hangS).toBeLessThan(60);

    const steps = await finalSteps(h);
    expect(steps['cpt.stable']!.failures).toEqual({ crash: 1, hang: 1 });
    const attempts = attemptsOf(runDir, 'cpt.stable');
    expect(attempts).toHaveLength(3);
    // Each retry resumed from the newest checkpoint saved before its failure and recomputed nothing before it. That is
    // the last multiple of 5 the attempt reached, unless the failure cut its save: a rank stopped as rank 0 logged
    // iteration 15 left that save unfinished (on a loaded machine), and the retry rightly went on from 10.
    for (const [i, a] of attempts.entries()) {
      if (i === 0) continue;
      const from = Number(/resuming from iteration (\d+)/.exec(a.note)?.[1]);
      const died = attempts[i - 1]!.iterations.at(-1)!;
      const saved = Math.max(...attempts.slice(0, i).flatMap((x) => x.saved));
      expect(saved, `${a.note}: the newest save before it`).toBeGreaterThanOrEqual(Math.floor(died / 5) * 5 - 5);
      expect(from, a.note).toBe(saved);
      expect(a.iterations[0]).toBe(from + 1);
    }
    expect(attempts[2]!.iterations.at(-1)).toBe(80);
    expect(readFileSync(join(runDir, 'logs', 'cpt.stable.log'), 'utf8')).toMatch(/data parallel: 2 ranks/);
    expect(leftOver(runDir)).toEqual([]);
    // The stopped rank is gone too: a SIGKILL reaches a stopped process.
    expect(existsSync(`/proc/${stopped}`)).toBe(false);
  }, 480_000);

  it('a rendezvous that never completes is a hang at the startup limit, and leaves no torchrun', async () => {
    // A second node that never comes: torchrun would wait its 600 s join timeout.
    const plan = await torchrunPlan('rendezvous', [`software.torchrunArgs=[--redirects=2,--tee=2,--nnodes=2]`, 'cpt.startupTimeout=15s', 'cpt.retries.hang=0']);
    const startedAt = Date.now();
    const h = await startPlan(env, plan);
    await expect(h.result()).rejects.toThrow();
    const s = (await h.query(statusQuery)).steps.find((x) => x.id === 'cpt.stable')!;
    const tookS = (Date.now() - startedAt) / 1000;
    console.log(`[torchrun] a rendezvous that never completes failed its step as a hang after ${tookS.toFixed(1)} s (startup limit 15 s)`);
    expect(s.failures).toEqual({ hang: 1 });
    expect(tookS).toBeLessThan(60);
    expect(readFileSync(join(plan.runDir, 'logs', 'cpt.stable.log'), 'utf8')).toMatch(/stall: no progress for 1\ds \(startup limit 15s\)/);
    await waitFor('no process left', () => leftOver(plan.runDir).length === 0, 20_000);
  }, 180_000);

  it('a cancel reaches every rank and torchrun', async () => {
    const plan = await torchrunPlan('cancel');
    const h = await startPlan(env, plan);
    await waitFor('cpt.stable past iteration 3', () => lastIteration(plan.runDir, 'cpt.stable') >= 3, 120_000);
    expect(rankPid(plan.runDir, 0)).toBeGreaterThan(0);
    expect(rankPid(plan.runDir, 1)).toBeGreaterThan(0);
    const t0 = Date.now();
    await h.cancel();
    await expect(h.result()).rejects.toThrow();
    await waitFor('no rank and no torchrun left', () => leftOver(plan.runDir).length === 0, 30_000);
    // The reference trainer saves on SIGTERM where it stands: the stop table's row for it (docs/operations.md).
    const last = lastIteration(plan.runDir, 'cpt.stable');
    const saved = Number(readFileSync(join(plan.runDir, 'cpt', 'checkpoints', 'latest_checkpointed_iteration.txt'), 'utf8'));
    expect(saved).toBe(last);
    console.log(`[stop table] local trainer, torchrun 1.13: cancel: iterations lost ${last - saved}, stop → exit ${((Date.now() - t0) / 1000).toFixed(1)} s, processes left ${leftOver(plan.runDir).length}`);
  }, 180_000);
});
