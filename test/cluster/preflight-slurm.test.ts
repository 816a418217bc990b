/**
 * The preflight on every node of a multi-node step, through the step's own srun (`--ntasks-per-node=1`), on a
 * real Slurm (test/cluster/slurm.ts: two slurmd on this host) and a real worker: both nodes answer, and a pin
 * neither node meets fails the step once, as `config`, before any rank starts or the step's own job exists.
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WorkflowFailedError } from '@temporalio/client';
import type { RunStatus } from '../../src/plan/contracts.js';
import { compilePlan } from '../../src/plan/compile.js';
import type { Plan } from '../../src/plan/types.js';
import { loadRecipe } from '../../src/recipe/load.js';
import { freePort, ROOT, setupEnv, startPlan, tmpRunDir, type Env } from '../integration/harness.js';
import { slurmInstalled, startSlurm, type SlurmCluster } from './slurm.js';

let env: Env;
let slurm: SlurmCluster;

beforeAll(async () => {
  if (!slurmInstalled()) throw new Error('Slurm and munge are not installed: run make setup-cluster (as root)');
  slurm = await startSlurm(mkdtempSync(join(tmpdir(), 'infir2-slurm-pf-')));
  env = await setupEnv('slurm-preflight');
  await env.startWorker([], ['local'], slurm.env);
});

afterAll(async () => {
  await env?.teardown();
  await slurm?.stop();
});

/** The tiny recipe's first CPT phase on a slurm pool of two CPU nodes (as slurm.test.ts runs it). */
async function slurmPlan(name: string, sets: string[]): Promise<Plan> {
  const runDir = tmpRunDir(env, name);
  const { recipe } = await loadRecipe('tiny', {
    cwd: ROOT,
    sets: [`runDir=${runDir}`, 'pools.local.launcher=slurm', 'pools.local.nodes=2', `pools.local.rdzvEndpoint=127.0.0.1:${await freePort()}`, 'software.torchrunArgs=[--redirects=2,--tee=2]', 'cpt.nodes=2', 'cpt.microBatchSize=8', ...sets],
  });
  const plan = compilePlan(recipe, { runId: name, projectRoot: ROOT });
  return { ...plan, runDir: join(runDir, name), steps: plan.steps.filter((s) => s.id === 'cpt.warmup') };
}

describe('the preflight of a two-node srun step', () => {
  it('asks both nodes, and fails a pin neither meets once, as config, before any rank starts', async () => {
    const plan = await slurmPlan('pin', ['software.versions.torch=">=2.4"']);
    expect(plan.steps[0]!.preflight!.launch).toEqual(expect.arrayContaining(['--nodes=2', '--ntasks-per-node=1', '--label']));
    const t0 = Date.now();
    const h = await startPlan(env, plan);
    const err = (await h.result().then(() => null, (e: unknown) => e)) as WorkflowFailedError;
    const status = (err.cause as { details?: unknown[] }).details![0] as RunStatus;
    console.log(`[preflight] a pin neither Slurm node meets: failed ${((Date.now() - t0) / 1000).toFixed(1)} s after the start`);
    expect(status.steps[0]).toMatchObject({ status: 'failed', attempts: 1, failures: { config: 1 } });
    // One line for both nodes: they agree.
    expect(status.steps[0]!.lastFailure!.message).toMatch(/^cpt\.warmup: config: preflight: torch: torch 1\.13\.0a0; expected >=2\.4 \(software\.versions\.torch\)$/);
    const table = JSON.parse(readFileSync(join(plan.runDir, 'preflight', 'cpt.warmup.json'), 'utf8')) as { hosts: string[] };
    expect(table.hosts).toHaveLength(2);
    const log = readFileSync(join(plan.runDir, 'logs', 'cpt.warmup.log'), 'utf8');
    expect(log).not.toMatch(/starting fresh/);
    expect(existsSync(join(plan.runDir, 'cpt', 'checkpoints'))).toBe(false);
  });
});
