/**
 * Evaluation while training, on a shared CPU (run: `npx tsx bench/eval-overlap.ts`, or `make bench`): does the
 * trainer keep its pace while checkpoints are evaluated beside it? The tiny recipe's CPT trains alone and again
 * while the plan's own evaluation commands of one checkpoint (its HF export and the `arith` benchmark, as
 * `evalEvery` compiles them: at nice 19 on one thread) run back to back beside it. It prints the trainer's time per
 * iteration (its own `elapsed time per iteration` lines) both ways, their ratio (the goal: within 10 %), how many
 * evaluations completed meanwhile, and how long one takes alone and under training.
 *
 * Knobs: OVERLAP_ITERS (300 CPT iterations per run), OVERLAP_ROUNDS (2).
 */
import { execa } from 'execa';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compilePlan } from '../src/plan/compile.js';
import type { PlanStep } from '../src/plan/types.js';
import { loadRecipe } from '../src/recipe/load.js';
import { fillIteration } from '../src/workflows/checkpoint-eval.js';

const ITERS = Number(process.env.OVERLAP_ITERS ?? 300);
const EVAL_AT = 50;
const ROUNDS = Number(process.env.OVERLAP_ROUNDS ?? 2);

async function cptStep(runDir: string): Promise<PlanStep> {
  const { recipe } = await loadRecipe('tiny', {
    sets: [`runDir=${runDir}`, 'cpt.warmupIters=0', `cpt.iterations=${ITERS + 10}`, 'cpt.decayIters=10', `cpt.saveInterval=${EVAL_AT}`, 'cpt.logInterval=1', `cpt.evalEvery=${EVAL_AT}`],
  });
  return compilePlan(recipe, { runId: 'bench', projectRoot: process.cwd() }).steps.find((s) => s.id === 'cpt.stable')!;
}

/** Train the step to its end; the trainer's own time per iteration, ms, past the first 5 (start-up). */
async function train(step: PlanStep): Promise<number[]> {
  mkdirSync(step.command.cwd, { recursive: true });
  const [file, ...args] = step.command.argv;
  const r = await execa(file!, args, { cwd: step.command.cwd, env: step.command.env, all: true, reject: false });
  if (r.exitCode !== 0) throw new Error(`trainer exited ${r.exitCode}: ${String(r.all).slice(-2000)}`);
  return [...String(r.all).matchAll(/elapsed time per iteration \(ms\): ([\d.]+)/g)].map((m) => Number(m[1])).slice(5);
}

/** One evaluation of checkpoint EVAL_AT of `step`'s root: the plan's export and benchmark commands, in order; seconds. */
async function evaluate(step: PlanStep, signal?: AbortSignal): Promise<number | null> {
  const t0 = Date.now();
  for (const template of step.checkpointEval!.steps) {
    const s = fillIteration(template, EVAL_AT);
    mkdirSync(s.command.cwd, { recursive: true });
    const [file, ...args] = s.command.argv;
    const r = await execa(file!, args, { cwd: s.command.cwd, env: s.command.env, all: true, reject: false, cancelSignal: signal });
    if (signal?.aborted) return null;
    if (r.exitCode !== 0) throw new Error(`${s.id} exited ${r.exitCode}: ${String(r.all).slice(-2000)}`);
  }
  return (Date.now() - t0) / 1000;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Train `step` with the evaluations of checkpoint EVAL_AT of `evalOf` running back to back beside it. */
async function trainBeside(step: PlanStep, evalOf: PlanStep): Promise<{ ms: number[]; evals: number[] }> {
  const stop = new AbortController();
  const evals: number[] = [];
  const evaluating = (async () => {
    while (!stop.signal.aborted) {
      const s = await evaluate(evalOf, stop.signal).catch((err: unknown) => (stop.signal.aborted ? null : Promise.reject(err)));
      if (s !== null) evals.push(s);
    }
  })();
  const ms = await train(step);
  stop.abort();
  await evaluating;
  return { ms, evals };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'infir2-eval-overlap-'));
  // A first run warms the file cache and the interpreter; then alone and beside alternate, ROUNDS times each,
  // so that a drift of the machine over the bench falls on both sides alike.
  const first = await cptStep(join(dir, 'warm'));
  await train(first);
  const evalAloneS = (await evaluate(first))!;
  const alone: number[] = [];
  const beside: number[] = [];
  const evalTimes: number[] = [];
  const pairs: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const a = await train(await cptStep(join(dir, `alone${r}`)));
    const b = await trainBeside(await cptStep(join(dir, `beside${r}`)), first);
    alone.push(...a);
    beside.push(...b.ms);
    evalTimes.push(...b.evals);
    pairs.push(median(b.ms) / median(a) - 1);
  }

  const ratio = median(beside) / median(alone);
  console.log(`[eval-overlap] tiny CPT, ${ITERS} iterations per run, ${ROUNDS} rounds of (alone, beside), one trainer process; evaluations of checkpoint ${EVAL_AT} back to back beside it (nice 19, one thread)`);
  console.log(`  time per iteration alone:               median ${median(alone).toFixed(1)} ms, mean ${mean(alone).toFixed(1)} ms`);
  console.log(`  time per iteration beside evaluations:  median ${median(beside).toFixed(1)} ms, mean ${mean(beside).toFixed(1)} ms`);
  console.log(`  slowdown (medians): ${((ratio - 1) * 100).toFixed(1)} % (goal: within 10 %); per round: ${pairs.map((p) => `${(p * 100).toFixed(1)} %`).join(', ')}`);
  console.log(`  one evaluation (export + arith) alone: ${evalAloneS.toFixed(1)} s; beside the trainer: ${evalTimes.length ? `${mean(evalTimes).toFixed(1)} s (${evalTimes.length} completed)` : 'none completed'}`);
}

await main();
