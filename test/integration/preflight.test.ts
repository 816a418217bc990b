/**
 * The preflight through a real worker against a real Temporal dev server: plans compiled from the tiny recipe
 * (with the Megatron backend where Megatron is the point), each step probed in its own interpreter and
 * environment before its trainer starts. A node that cannot run the step fails it in seconds as a `config`
 * failure, with one line per problem, and no retry: NumPy ≥ 2 beside a Megatron checkout that calls np.product
 * (the NumPy 2 stand-in: test/fixtures/numpy2-standin), a missing package (a real virtualenv without torch), a
 * wrong pinned version, an unreadable input (a worker without the capabilities that let root read anything). A full
 * disk (a filled tmpfs, as storage.test.ts makes one) is named as fast, but as a storage fault: the step waits
 * until space is freed, then trains. This project's own CPU environment passes, and a
 * warning travels to `status`, the step's result and the report.
 */
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WorkflowFailedError } from '@temporalio/client';
import { loadPlan } from '../../src/cli/recipe-input.js';
import type { RunStatus } from '../../src/plan/contracts.js';
import type { Plan } from '../../src/plan/types.js';
import { poolTaskQueue } from '../../src/temporal/constants.js';
import { bareVenv, megatronCheckout, NUMPY2_STANDIN } from '../fixtures/preflight-trees.js';
import { fill, mountTmpfs, NO_MOUNT, umount } from './full-disk.js';
import { onlyStepOf, POOL, ROOT, setupEnv, spawnWorker, startPlan, tmpRunDir, waitFor, type Env } from './harness.js';
import { statusQuery } from '../../src/workflows/definitions.js';

const exec = promisify(execFile);
let env: Env;

beforeAll(async () => {
  env = await setupEnv('preflight');
  // Stand-in GPU ids: the Megatron step asks for one GPU (this machine has none; its gpu check is skipped).
  await env.startWorker(['--gpus', '0']);
}, 120_000);

afterAll(async () => {
  await env?.teardown();
});

/** The tiny recipe's first step alone, compiled for the test pool, with `sets` on top. */
async function tinyPlan(name: string, sets: string[], opts: { python?: string; pool?: string } = {}): Promise<Plan> {
  const runDir = tmpRunDir(env, name);
  const plan = await loadPlan('tiny', {
    runId: name,
    onWarning: () => undefined,
    sets: [`runDir=${runDir}`, `pools.local.taskQueue=${poolTaskQueue(opts.pool ?? POOL)}`, ...sets],
    ...(opts.python ? { python: opts.python } : {}),
  });
  return { ...plan, steps: plan.steps.filter((s) => s.id === 'cpt.warmup') };
}

/** Start the plan, wait for it to end; its final status and how long the failure took to come. */
async function ends(plan: Plan): Promise<{ status: RunStatus; seconds: number; failure: string }> {
  const t0 = Date.now();
  const h = await startPlan(env, plan);
  const err = (await h.result().then(() => null, (e: unknown) => e)) as WorkflowFailedError | null;
  const seconds = (Date.now() - t0) / 1000;
  if (!err) return { status: ((await h.result()) as { status: RunStatus }).status, seconds, failure: '' };
  const status = (err.cause as { details?: unknown[] } | undefined)?.details?.[0] as RunStatus;
  return { status, seconds, failure: String(err.cause?.message) };
}

const stepLog = (plan: Plan) => readFileSync(join(plan.runDir, 'logs', 'cpt.warmup.log'), 'utf8');

/** A config failure of the preflight, at once: one attempt, no trainer launched, the lines in the log. */
function expectPreflightFailure(plan: Plan, r: { status: RunStatus; seconds: number; failure: string }, label: string): string[] {
  const step = r.status.steps[0]!;
  expect(r.status.status).toBe('failed');
  expect(step).toMatchObject({ status: 'failed', attempts: 1, failures: { config: 1 }, lastFailure: { class: 'config' } });
  expect(step.lastFailure!.message).toMatch(/^cpt\.warmup: config: preflight: /);
  const log = stepLog(plan);
  expect(log).not.toMatch(/attempt \d+ (starting fresh|resuming)/);
  const lines = [...log.matchAll(/\] preflight fail: (.*)$/gm)].map((m) => m[1]!);
  console.log(`[preflight] ${label}: failed ${r.seconds.toFixed(1)} s after the start, attempts ${step.attempts}:\n  ${lines.join('\n  ')}`);
  return lines;
}

describe('the preflight on a real worker', () => {
  it('fails NumPy ≥ 2 beside a Megatron checkout that calls np.product, naming both, in seconds, never retried', async () => {
    const meg = megatronCheckout(join(env.dir, 'Megatron-LM'));
    const plan = await tinyPlan('numpy2', [
      'cpt.backend=megatron',
      'pools.local.gpusPerNode=1',
      `software.megatron=${meg.dir}`,
      `model.tokenizer=${ROOT}/trainer`,
      `cpt.env={PYTHONPATH: "${meg.dir}:${NUMPY2_STANDIN}"}`,
      'software.skipChecks=[{check: gpu, why: "this test machine has no GPU; the worker\'s --gpus is a stand-in"}, {check: transformerEngine, why: "the stand-in checkout runs nothing"}]',
    ]);
    const r = await ends(plan);
    const lines = expectPreflightFailure(plan, r, 'NumPy 2 + Megatron core_v0.14.0');
    const np = lines.find((l) => l.startsWith('numpy2-megatron-np-product:'))!;
    expect(np).toContain(`numpy 2.1.3 with Megatron core 0.14.0 (${meg.commit.slice(0, 7)}, core_v0.14.0)`);
    expect(np).toContain('megatron/core/dist_checkpointing/validation.py:512 calls np.product');
    expect(r.status.steps[0]!.lastFailure!.message).toContain('numpy2-megatron-np-product: numpy 2.1.3 with Megatron core 0.14.0');
    // The skipped checks are in the step's table with their reasons, not among the failures.
    const table = JSON.parse(readFileSync(join(plan.runDir, 'preflight', 'cpt.warmup.json'), 'utf8')) as { rows: { check: string; verdict: string; expected: string }[] };
    expect(table.rows.find((x) => x.check === 'gpu')).toMatchObject({ verdict: 'skip', expected: expect.stringContaining('no GPU') });
    expect(r.seconds).toBeLessThan(30);
  }, 120_000);

  it('fails a package the step needs that its interpreter lacks', async () => {
    const python = bareVenv(join(env.dir, 'venv-without-torch'));
    const plan = await tinyPlan('missing', [], { python });
    const lines = expectPreflightFailure(plan, await ends(plan), 'a venv without torch');
    expect(lines).toEqual([`torch: torch not found by ${python}; expected >=1.13.0a0 (software.versions.torch)`]);
  }, 120_000);

  it('fails a pinned version the node does not have', async () => {
    const plan = await tinyPlan('pin', ['software.versions.torch=">=2.4"']);
    const lines = expectPreflightFailure(plan, await ends(plan), 'torch pinned >=2.4');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^torch: torch 1\.13\.0a0; expected >=2\.4 \(software\.versions\.torch\)$/);
  }, 120_000);

  it('names a full disk under the checkpoint root at once, then waits (storage) until space is freed, and trains', async (ctx) => {
    const plan = await tinyPlan('full', []);
    const root = join(plan.runDir, 'cpt');
    if (!mountTmpfs(root, '4m')) return ctx.skip(NO_MOUNT);
    try {
      const filler = fill(root);
      const t0 = Date.now();
      const h = await startPlan(env, plan);
      const line = () => /\] preflight fail: (disk: .*)$/m.exec(existsSync(join(plan.runDir, 'logs', 'cpt.warmup.log')) ? stepLog(plan) : '')?.[1];
      await waitFor('the preflight to name the full disk', () => line(), 60_000);
      console.log(`[preflight] a full disk: named ${((Date.now() - t0) / 1000).toFixed(1)} s after the start: ${line()}`);
      expect(line()).toMatch(new RegExp(`^disk: 0 kB free on ${root}; expected ≥ 1 MB: one checkpoint with optimizer state \\(the plan's estimate\\)$`));
      const waiting = await waitFor('status: waiting on the disk', async () => {
        const st = (await h.query(statusQuery)).steps[0]!;
        return st.waiting ? st : null;
      });
      expect(waiting).toMatchObject({ status: 'running', lastFailure: { class: 'storage' } });
      expect(waiting.waiting!.reason).toMatch(/^preflight: disk: 0 kB free on /);
      expect(stepLog(plan)).not.toMatch(/attempt \d+ (starting fresh|resuming)/);
      rmSync(filler);
      const st = await onlyStepOf(h);
      expect(st).toMatchObject({ status: 'completed', failures: { storage: expect.any(Number) } });
      expect(st.failures.config).toBeUndefined();
    } finally {
      umount(root);
    }
  }, 180_000);

  it("fails an input the trainer's user cannot read", async () => {
    const data = join(env.dir, 'cpt-unreadable.jsonl');
    writeFileSync(data, readFileSync(join(ROOT, 'trainer', 'data', 'cpt.jsonl')));
    chmodSync(data, 0o000);
    // As root the permission bits stop nobody: this pool's worker (and so its trainers) runs without the
    // capabilities that override them, as a training job's unprivileged user would.
    const wrap = process.getuid?.() === 0 ? ['setpriv', '--bounding-set', '-dac_override,-dac_read_search', '--inh-caps', '-dac_override,-dac_read_search', '--'] : [];
    await spawnWorker(['noread'], ['--no-workflows'], { ...process.env, TEMPORAL_ADDRESS: env.server.address, INFIR2_HOST_DIR: join(env.dir, 'host') }, (w) => env.workers.push(w), { wrap });
    const plan = await tinyPlan('noread', [`cpt.data=${data}`], { pool: 'noread' });
    const lines = expectPreflightFailure(plan, await ends(plan), 'an unreadable data file');
    expect(lines).toEqual([`paths: data cannot be read: ${data}: Permission denied; expected ${data} readable by the trainer's user`]);
  }, 120_000);

  it("passes this project's CPU environment; a warning shows in status, the result and the report", async () => {
    // A commit pin that torch (Debian's, no git commit) cannot be held to: a warning, not a failure.
    const plan = await tinyPlan('passes', ['software.versions.torch=">=1.13.0a0, @abcdef1"']);
    const r = await ends(plan);
    expect(r.status.status).toBe('completed');
    expect(stepLog(plan)).toMatch(/attempt 1 preflight: \d+ passed, 1 warnings, 0 failures in [\d.]+ s \(.*\.venv\/bin\/python on /);
    const warning = 'torch: torch 1.13.0a0; expected >=1.13.0a0, @abcdef1 (software.versions.torch): @abcdef1 cannot be told here';
    expect(r.status.steps[0]!.result!.preflight).toEqual([warning]);
    const cli = async (args: string[]) => (await exec(process.execPath, [join(ROOT, 'bin', 'infir2.js'), ...args], { env: { ...process.env, TEMPORAL_ADDRESS: env.server.address } })).stdout;
    expect(await cli(['status', `${plan.recipe}-${plan.runId}`])).toContain(warning.slice(0, 60));
    await cli(['report', plan.runDir, '--no-png']);
    const page = readFileSync(join(plan.runDir, 'report', 'index.html'), 'utf8');
    expect(page).toContain('Preflight warnings:');
    expect(page).toContain('cpt.warmup: torch: torch 1.13.0a0');
    expect(existsSync(join(plan.runDir, 'preflight', 'cpt.warmup.json'))).toBe(true);
  }, 180_000);
});
