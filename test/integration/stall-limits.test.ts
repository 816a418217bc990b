/**
 * The adaptive stall limits on a real worker, with the limits a recipe gets when it sets no `stallTimeout` (those
 * the 7B recipe compiles to): a hung trainer of 1 s iterations is stopped within 30 s, while a 90 s silent
 * checkpoint load, a save silent for 20 iterations' time and RL rollouts of 5–60 s are left alone; a trainer
 * that hangs inside its third save, after two quick ones, is stopped at the training limit, not after the 30-minute
 * save allowance. The five run at once, as five steps of one run.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunStatus } from '../../src/plan/contracts.js';
import { compilePlan } from '../../src/plan/compile.js';
import type { StallSpec } from '../../src/plan/types.js';
import { loadRecipe } from '../../src/recipe/load.js';
import { fakePlan, fakeStep, journal, processesMentioning, recomputed, ROOT, setupEnv, startPlan, tmpRunDir, waitFor, type Env } from './harness.js';

let env: Env;

beforeAll(async () => {
  env = await setupEnv('stall');
  await env.startWorker();
});

afterAll(async () => {
  await env?.teardown();
});

/** The default limits of a CPT and an RL step, as the shipped 7B recipe compiles them. */
async function defaults(): Promise<{ train: StallSpec; rl: StallSpec }> {
  const plan = compilePlan((await loadRecipe(join(ROOT, 'recipes', 'qwen2.5-7b-fp8.yaml'))).recipe, { runId: 'x' });
  const of = (id: string) => plan.steps.find((s) => s.id === id)!.stall!;
  return { train: of('cpt.stable'), rl: of('rl.stage1') };
}

describe('adaptive stall limits, defaults', () => {
  it('stops a hang within 30 s; leaves a 90 s load, a 20 s save and 5–60 s rollouts alone', async () => {
    const { train, rl } = await defaults();
    expect(train).toMatchObject({ startupSec: 1800, factor: 10, floorSec: 20, basis: 'p95', saveSec: 1800, saveFactor: 4, capSec: 7200 });
    expect(rl).toMatchObject({ factor: 3, floorSec: 600, basis: 'max' });
    const runDir = tmpRunDir(env, 'adaptive');
    const step = (o: Omit<Parameters<typeof fakeStep>[0], 'runDir'>, spec: StallSpec) =>
      fakeStep({ ...o, runDir, stall: { ...spec, saveEvery: o.saveInterval ?? 3, evalEvery: null }, stallTimeoutSec: spec.capSec });
    const plan = fakePlan(runDir, 'adaptive', [
      // 1 s iterations, silent from iteration 20 on (alive): a hang.
      step({ id: 'cpt.hang', iters: 30, saveInterval: 10, sleep: 1, faults: ['hang@20'] }, train),
      // A crash after checkpoint 6; the retry's load of it is silent for 90 s, then it trains on.
      step({ id: 'cpt.load', iters: 12, saveInterval: 3, sleep: 1, faults: ['crash@8'], extraArgs: ['--load-sleep', '90'] }, train),
      // Every save silent for 20 s, 20 iterations' time: at a multiple of the interval (6) and at the end (10).
      step({ id: 'cpt.save', iters: 10, saveInterval: 6, sleep: 1, extraArgs: ['--save-sleep', '20'] }, train),
      // Quick saves at 5 and 10, then stuck inside the save of 15 ("saving checkpoint" printed, then silence).
      step({ id: 'cpt.savehang', iters: 20, saveInterval: 5, sleep: 1, faults: ['hangsave@15'] }, train),
      // Rollouts of 5 to 60 s.
      step({ id: 'rl.rollouts', iters: 4, saveInterval: 2, extraArgs: ['--sleep-cycle', '5,60,10,25'] }, rl),
    ]);
    const h = await startPlan(env, plan);

    await waitFor('cpt.hang at iteration 19', () => journal(runDir, 'cpt.hang').some((e) => e.iteration === 19), 60_000);
    const lastIterationAt = Date.now();
    const log = () => readFileSync(join(runDir, 'logs', 'cpt.hang.log'), 'utf8');
    await waitFor('the hang to be declared', () => /\] stall: /.test(log()), 120_000);
    const detectedS = (Date.now() - lastIterationAt) / 1000;
    console.log(`[stall] a hang of 1 s iterations was stopped ${detectedS.toFixed(1)} s after its last iteration`);
    expect(detectedS).toBeLessThanOrEqual(30);
    expect(log()).toMatch(/stall: no progress for 2\ds \(training limit 20s\)/);

    // The save allowance learned from the quick saves: the training limit (20 s), not saveTimeout (30 min).
    const saveLog = () => readFileSync(join(runDir, 'logs', 'cpt.savehang.log'), 'utf8');
    await waitFor('the hang inside a save to be declared', () => /\] stall: /.test(saveLog()), 120_000);
    expect(saveLog()).toMatch(/stall: no progress for 2\ds \(saving limit 20s\)/);

    const res = (await h.result()) as { status: RunStatus };
    expect(res.status.status).toBe('completed');
    const byId = Object.fromEntries(res.status.steps.map((s) => [s.id, s]));
    // The hang: one hang failure, resumed from checkpoint 10, nothing before it trained twice.
    expect(byId['cpt.hang']!.failures).toEqual({ hang: 1 });
    expect(recomputed(runDir, 'cpt.hang', 10)).toEqual([]);
    // The others: only the crash that was asked for, no hang.
    expect(byId['cpt.savehang']!.failures).toEqual({ hang: 1 });
    expect(recomputed(runDir, 'cpt.savehang', 10)).toEqual([]);
    expect(byId['cpt.load']!.failures).toEqual({ crash: 1 });
    expect(readFileSync(join(runDir, 'logs', 'cpt.load.log'), 'utf8')).toMatch(/loading distributed checkpoint from .* at iteration 6/);
    expect(byId['cpt.save']!.failures).toEqual({});
    expect(byId['rl.rollouts']!.failures).toEqual({});
    for (const id of ['cpt.save', 'rl.rollouts']) expect(new Set(journal(runDir, id).map((e) => e.pid)).size, id).toBe(1);
    expect(processesMentioning(runDir)).toEqual([]);
  }, 300_000);
});
