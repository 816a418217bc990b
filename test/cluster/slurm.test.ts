/**
 * The local trainer's pretraining through a real Slurm (munged, slurmctld, two slurmd: test/cluster/slurm.ts)
 * and a real worker against a real dev server: `srun … --kill-on-bad-exit=1 torchrun --nnodes=2 … --rdzv_backend
 * c10d`, the argv the 7B plan renders on a slurm pool, one torchrun and one rank per node. A rank SIGKILLed (a
 * crash, resumed with both ranks from the newest complete checkpoint), `infir2 cancel` (no rank, no srun, no job
 * left), the submit host lost (worker and srun SIGKILLed: Slurm ends the step, the next attempt resumes it), a rank
 * taken by Slurm's cgroup OOM handler (classified oom). `status` names the Slurm job and its nodes.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunStatus, StepState } from '../../src/plan/contracts.js';
import { compilePlan } from '../../src/plan/compile.js';
import type { Plan } from '../../src/plan/types.js';
import { loadRecipe } from '../../src/recipe/load.js';
import { statusQuery } from '../../src/workflows/definitions.js';
import { freePort, processesMentioning, ROOT, setupEnv, startPlan, tmpRunDir, waitFor, type Env } from '../integration/harness.js';
import { slurmInstalled, startSlurm, type SlurmCluster } from './slurm.js';

let env: Env;
let slurm: SlurmCluster;

beforeAll(async () => {
  if (!slurmInstalled()) throw new Error('Slurm and munge are not installed: run make setup-cluster (as root)');
  slurm = await startSlurm(mkdtempSync(join(tmpdir(), 'infir2-slurm-')));
  console.log(`[slurm] munged, slurmctld and 2 slurmd up, both nodes idle, in ${slurm.startSec.toFixed(2)} s`);
  env = await setupEnv('slurm');
  await env.startWorker([], ['local'], slurm.env);
});

afterAll(async () => {
  await env?.teardown();
  await slurm?.stop();
});

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const childEnv = { ...process.env, TEMPORAL_ADDRESS: env.server.address, INFIR2_HOME: join(env.dir, 'cli-home') };
  return new Promise((resolve) => {
    execFile(process.execPath, [join(ROOT, 'bin', 'infir2.js'), ...args], { env: childEnv, encoding: 'utf8', timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

/**
 * The tiny recipe's CPT on a slurm pool of two CPU nodes, one rank each, and only its CPT steps: stable 0→50,
 * decay 50→60, a checkpoint every 5 iterations, progress every iteration.
 */
async function slurmPlan(name: string, sets: string[] = []): Promise<Plan> {
  const runDir = tmpRunDir(env, name);
  const { recipe } = await loadRecipe('tiny', {
    cwd: ROOT,
    sets: [
      `runDir=${runDir}`,
      'pools.local.launcher=slurm',
      'pools.local.nodes=2',
      `pools.local.rdzvEndpoint=127.0.0.1:${await freePort()}`,
      // torch 1.13's torchrun on Python ≥ 3.11 needs explicit values for these (docs/cluster.md).
      'software.torchrunArgs=[--redirects=2,--tee=2]',
      'cpt.nodes=2',
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

/** The attempts of a step as its log tells them: the launch note and the iterations each printed. */
function attemptsOf(runDir: string, stepId: string): { note: string; iterations: number[] }[] {
  const file = join(runDir, 'logs', `${stepId}.log`);
  if (!existsSync(file)) return [];
  const out: { note: string; iterations: number[] }[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const note = /^\[infir2 \S+\] (attempt \d+ .*)$/.exec(line);
    if (note && /^attempt \d+ (starting fresh|resuming from iteration)/.test(note[1]!)) out.push({ note: note[1]!, iterations: [] });
    const it = /\] iteration\s+(\d+)\//.exec(line);
    if (it && out.length) out.at(-1)!.iterations.push(Number(it[1]));
  }
  return out;
}

const lastIteration = (runDir: string, stepId: string) => attemptsOf(runDir, stepId).at(-1)?.iterations.at(-1) ?? 0;

/** The trainer process of `rank` (torchrun sets RANK; under Slurm it need not equal SLURM_PROCID). */
function rankPid(runDir: string, rank: number): number | undefined {
  return processesMentioning(runDir).find((pid) => {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      // A rank runs the trainer itself; torchrun's own command line names main.py too, after torchrun.
      const program = cmd.split('\0').slice(0, 2);
      return program[1]?.endsWith(join('trainer', 'main.py')) && environ.includes(`RANK=${rank}`) && environ.some((e) => e.startsWith('SLURM_JOB_ID='));
    } catch {
      return false;
    }
  });
}

/** Nothing of the run is left: no rank, no torchrun, no srun, and no job or job step in Slurm. */
async function nothingLeft(runDir: string): Promise<void> {
  await waitFor('no rank, torchrun or srun left, and no Slurm job', () => processesMentioning(runDir).length === 0 && slurm.jobs().length === 0 && slurm.steps().length === 0, 30_000);
}

async function stepsOf(h: { result(): Promise<unknown> }): Promise<Record<string, StepState>> {
  const res = (await h.result()) as { status: RunStatus };
  expect(res.status.status).toBe('completed');
  return Object.fromEntries(res.status.steps.map((s) => [s.id, s]));
}

describe('the local trainer under srun + torchrun on a real Slurm', () => {
  it('runs a tiny CPT on two nodes with the argv of the 7B plan, and status names the Slurm job', async () => {
    const plan = await slurmPlan('plain');
    const stable = plan.steps.find((s) => s.id === 'cpt.stable')!;
    const { recipe: seven } = await loadRecipe(join(ROOT, 'recipes', 'qwen2.5-7b-fp8.yaml'), {
      sets: ['pools.megatron.launcher=slurm', 'pools.megatron.nodes=2', 'pools.megatron.rdzvEndpoint=head:29400', 'cpt.nodes=2'],
    });
    const sevenArgv = compilePlan(seven, { runId: 'x' }).steps.find((s) => s.id === 'cpt.stable')!.command.argv;
    // The launcher's flags, in order, up to the program torchrun starts (names only: the values are the pool's).
    // (infir2's launcher, srun's task on each node, stands between srun and torchrun)
    const shape = (argv: string[]) => argv.slice(0, argv.findIndex((a, i) => i > 0 && !a.startsWith('--') && !/torchrun$|^python3$|^-[IS]$|infir2_launch\.py$/.test(a))).map((a) => a.split('=')[0]!.replace(/^\/.*\//, ''));
    expect(shape(sevenArgv)).toEqual(['srun', '--job-name', '--nodes', '--ntasks-per-node', '--gpus-per-node', '--kill-on-bad-exit', 'python3', '-I', '-S', 'infir2_launch.py', '--', 'torchrun', '--nnodes', '--nproc_per_node', '--rdzv_endpoint', '--rdzv_backend']);
    // A CPU pool asks Slurm for no GPUs; torch 1.13 needs its two flags; --no_python names the interpreter.
    expect(shape(stable.command.argv)).toEqual(['srun', '--job-name', '--nodes', '--ntasks-per-node', '--kill-on-bad-exit', 'python3', '-I', '-S', 'infir2_launch.py', '--', 'torchrun', '--nnodes', '--nproc_per_node', '--rdzv_endpoint', '--rdzv_backend', '--redirects', '--tee', '--no_python']);
    expect(stable.command.argv).toContain('--nnodes=2');

    const h = await startPlan(env, plan);
    // While it trains, status names its Slurm job and both nodes.
    await waitFor('cpt.stable past iteration 3', () => lastIteration(plan.runDir, 'cpt.stable') >= 3, 120_000);
    // `status` reads a running step's live progress from its own workflow (the run hears of transitions only).
    const job = await waitFor('status to name the Slurm job', async () => {
      const r = await cli(['status', h.workflowId, '--json']);
      const s = (JSON.parse(r.stdout) as RunStatus).steps.find((x) => x.id === 'cpt.stable');
      return s?.progress?.job?.nodes ? s.progress.job : null;
    }, 30_000);
    expect(job.nodes).toBe('n[1-2]');
    const text = await cli(['status', h.workflowId]);
    expect(text.stdout).toMatch(new RegExp(`cpt\\.stable .*slurm job ${job.id} on n\\[1-2\\]`));
    expect(slurm.jobs().some((row) => row.startsWith(`${job.id}|infir2-plain-cpt-stable-a1-`))).toBe(true);

    const steps = await stepsOf(h);
    for (const s of Object.values(steps)) expect(s.failures).toEqual({});
    expect(attemptsOf(plan.runDir, 'cpt.stable')[0]!.iterations).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    const log = readFileSync(join(plan.runDir, 'logs', 'cpt.stable.log'), 'utf8');
    expect(log).toMatch(/data parallel: 2 ranks \(gloo\)/);
    expect(log).toMatch(new RegExp(`\\] slurm job ${job.id} on n\\[1-2\\]`));
    await nothingLeft(plan.runDir);
  }, 300_000);

  it('a rank SIGKILLed ends the job step as a crash, resumed with both ranks from the newest checkpoint', async () => {
    const plan = await slurmPlan('rank-kill');
    const h = await startPlan(env, plan);
    await waitFor('cpt.stable past iteration 12', () => lastIteration(plan.runDir, 'cpt.stable') >= 12, 180_000);
    const victim = rankPid(plan.runDir, 1)!;
    expect(victim).toBeGreaterThan(0);
    const killedAt = Date.now();
    process.kill(victim, 'SIGKILL');
    await waitFor('the resumed attempt to print an iteration', () => (attemptsOf(plan.runDir, 'cpt.stable')[1]?.iterations.length ?? 0) > 0, 180_000);
    console.log(`[slurm] rank 1 SIGKILLed → resumed step's first iteration ${((Date.now() - killedAt) / 1000).toFixed(1)} s later`);

    const steps = await stepsOf(h);
    expect(steps['cpt.stable']!.failures).toEqual({ crash: 1 });
    const [first, second] = attemptsOf(plan.runDir, 'cpt.stable');
    const from = Number(/resuming from iteration (\d+)/.exec(second!.note)?.[1]);
    expect(from).toBe(Math.floor(first!.iterations.at(-1)! / 5) * 5);
    expect(second!.iterations[0]).toBe(from + 1);
    expect(second!.iterations.at(-1)).toBe(50);
    const log = readFileSync(join(plan.runDir, 'logs', 'cpt.stable.log'), 'utf8');
    // srun's own account of it, and the new job of the second attempt.
    expect(log).toMatch(/srun: error: n\d: task \d: Exited with exit code/);
    // Each attempt's job, placed on both nodes (the second may first be noted pending while the first one's ends).
    expect(new Set(log.match(/\] slurm job \d+ on n\[1-2\]/g))).toHaveProperty('size', 2);
    await nothingLeft(plan.runDir);
  }, 300_000);

  it('infir2 cancel during a Slurm step leaves no rank, no srun and no job step', async () => {
    const plan = await slurmPlan('cancel');
    const h = await startPlan(env, plan);
    await waitFor('cpt.stable past iteration 3', () => lastIteration(plan.runDir, 'cpt.stable') >= 3, 180_000);
    expect(slurm.steps().length).toBeGreaterThan(0);
    const r = await cli(['cancel', h.workflowId]);
    expect(r.code, r.stderr).toBe(0);
    const cancelledAt = Date.now();
    await nothingLeft(plan.runDir);
    console.log(`[slurm] cancel: no rank, srun or job step left ${((Date.now() - cancelledAt) / 1000).toFixed(1)} s after infir2 cancel returned`);
    expect((await h.describe()).status.name).toBe('CANCELLED');
  }, 300_000);

  it('the submit host lost, worker and srun SIGKILLed: Slurm ends the job step, the next attempt resumes it', async () => {
    const plan = await slurmPlan('host-lost', ['cpt.iterations=120']);
    // The shared worker steps aside, so that the step lands on the one that will be lost.
    await env.stopWorker(env.workers[0]!);
    const victim = await env.startWorker([], ['local'], slurm.env);
    const h = await startPlan(env, plan);
    await waitFor('cpt.stable past iteration 12', () => lastIteration(plan.runDir, 'cpt.stable') >= 12, 180_000);
    const srun = processesMentioning(plan.runDir).find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0]!.endsWith('srun'))!;
    expect(srun).toBeGreaterThan(0);
    const ranks = [rankPid(plan.runDir, 0)!, rankPid(plan.runDir, 1)!];
    // The whole submit host goes: the worker and srun, SIGKILLed (srun forwards nothing).
    process.kill(victim.pid!, 'SIGKILL');
    process.kill(srun, 'SIGKILL');
    const lostAt = Date.now();
    // Slurm cancels a job step whose srun is gone: the ranks do not train on unsupervised.
    await waitFor('the ranks to end with their srun', () => ranks.every((pid) => !existsSync(`/proc/${pid}`)) && slurm.steps().length === 0, 30_000);
    console.log(`[slurm] srun SIGKILLed → Slurm ended its job step's ranks ${((Date.now() - lostAt) / 1000).toFixed(1)} s later`);
    await env.startWorker([], ['local'], slurm.env);

    const steps = await stepsOf(h);
    console.log(`[slurm] worker and srun SIGKILLed → run completed ${((Date.now() - lostAt) / 1000).toFixed(1)} s later`);
    expect(steps['cpt.stable']!.failures).toEqual({ preempted: 1 });
    // The attempt that took the directory over ran the lost attempt's stop command all the same.
    const log = readFileSync(join(plan.runDir, 'logs', 'cpt.stable.log'), 'utf8');
    expect(log).toMatch(/stopping the work of .* attempt 1: scancel --name=infir2-host-lost-cpt-stable-a1-/);
    const attempts = attemptsOf(plan.runDir, 'cpt.stable');
    const from = Number(/resuming from iteration (\d+)/.exec(attempts.at(-1)!.note)?.[1]);
    expect(from).toBe(Math.floor(attempts[0]!.iterations.at(-1)! / 5) * 5);
    expect(attempts.at(-1)!.iterations.at(-1)).toBe(110);
    await nothingLeft(plan.runDir);
  }, 300_000);

  it("a rank taken by Slurm's cgroup OOM handler is classified oom", async () => {
    // 1 GiB per node for torchrun and a rank that builds a 134M-parameter model with its Adam state (~1.6 GB).
    const plan = await slurmPlan('oom', ['software.srunArgs=[--mem=1G]', 'model.arch.hiddenSize=2048', 'model.arch.ffnHiddenSize=8192', 'model.arch.numAttentionHeads=16', 'model.arch.numQueryGroups=4', 'cpt.retries.oom=0']);
    const h = await startPlan(env, plan);
    await expect(h.result()).rejects.toThrow();
    const s = (await h.query(statusQuery)).steps.find((x) => x.id === 'cpt.stable')!;
    expect(s.failures).toEqual({ oom: 1 });
    expect(s.lastFailure?.message).toMatch(/oom[_-]kill event|Out Of Memory/i);
    await nothingLeft(plan.runDir);
  }, 300_000);
});
