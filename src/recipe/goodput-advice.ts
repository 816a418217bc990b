/**
 * Checkpoint-interval advice for a recipe's training stages: each stage's `saveInterval` against the Young–Daly
 * optimum (checkpoint-interval.ts), from the stage's `estimates` and the recipe's `goodput` failure model.
 * `infir2 plan` shows it; lint hints when an interval costs more than `HINT_LOSS` of goodput. It is computed
 * when shown, never stored in the Plan: it is advice about the recipe, not something a workflow acts on.
 */
import { adviseInterval, HINT_LOSS, type IntervalAdvice } from './checkpoint-interval.js';
import { cptBoundaries, sftSteps } from './derived.js';
import { hint, type Issue } from './issues.js';
import type { Recipe } from './schema.js';

export interface StageAdvice {
  /** The stage's recipe path: `cpt`, `sft.0`, `rl`. */
  path: string;
  /** What the stage's interval counts. */
  unit: 'iterations' | 'steps' | 'rollouts';
  gpus: number;
  saveInterval: number;
  /** Why there is no advice: no GPUs (the failure rate is per GPU-hour), or no estimates. */
  missing?: 'gpus' | 'estimates';
  advice?: IntervalAdvice;
  /** What the suggested interval must divide, in words, when it is constrained. */
  alignedWith?: string;
}

interface TrainingStage {
  path: string;
  unit: StageAdvice['unit'];
  backend: string;
  pool: string;
  nodes?: number | undefined;
  gpusPerNode?: number | undefined;
  saveInterval: number;
  estimates?: { iterationTime: number; saveTime: number } | undefined;
  span?: number | undefined;
  alignTo?: number | undefined;
  alignedWith?: string;
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/** The stages that checkpoint on an interval, with the stretches that end in a save anyway and the alignment lint asks for. */
function trainingStages(r: Recipe): TrainingStage[] {
  const out: TrainingStage[] = [];
  if (r.cpt) {
    const b = cptBoundaries(r.cpt);
    // Each phase ends in a checkpoint; cptSchedule warns unless the interval divides the warmup and stable boundaries.
    out.push({
      path: 'cpt', unit: 'iterations', ...r.cpt,
      span: Math.max(b.warmupEnd, b.stableEnd - b.warmupEnd, b.end - b.stableEnd),
      alignTo: gcd(b.warmupEnd, b.stableEnd),
      alignedWith: 'the phase boundaries',
    });
  }
  (r.sft ?? []).forEach((s, i) => out.push({ path: `sft.${i}`, unit: 'steps', ...s, span: sftSteps(s) }));
  if (r.rl) {
    const rollouts = r.rl.curriculum.map((c) => c.rollouts);
    // slime must save each curriculum stage's last rollout (lint's rlSaves): the interval divides every stage.
    const aligned = r.rl.backend === 'slime' ? { alignTo: rollouts.reduce(gcd), alignedWith: 'every curriculum stage' } : {};
    out.push({ path: 'rl', unit: 'rollouts', ...r.rl, span: Math.max(...rollouts), ...aligned });
  }
  return out;
}

/** GPUs a stage's step runs on, as the compiler counts them (the local trainer uses at most one). */
function stageGpus(r: Recipe, s: TrainingStage): number {
  const pool = r.pools[s.pool];
  if (!pool) return 0;
  const perNode = s.gpusPerNode ?? pool.gpusPerNode;
  return s.backend === 'local' ? Math.min(1, perNode) : (s.nodes ?? pool.nodes) * perNode;
}

/** Advice for every training stage of the recipe, in recipe order. */
export function checkpointAdvice(r: Recipe): StageAdvice[] {
  return trainingStages(r).map((s) => {
    const gpus = stageGpus(r, s);
    const base: StageAdvice = { path: s.path, unit: s.unit, gpus, saveInterval: s.saveInterval, ...(s.alignedWith ? { alignedWith: s.alignedWith } : {}) };
    if (gpus === 0) return { ...base, missing: 'gpus' };
    if (!s.estimates) return { ...base, missing: 'estimates' };
    const advice = adviseInterval(s.saveInterval, {
      iterationSec: s.estimates.iterationTime,
      saveSec: s.estimates.saveTime,
      restartSec: r.goodput.restartTime,
      failuresPerGpuHour: r.goodput.failureRate,
      gpus,
      ...(s.span ? { span: s.span } : {}),
      ...(s.alignTo ? { alignTo: s.alignTo } : {}),
    });
    return { ...base, advice };
  });
}

const pct = (x: number) => `${(100 * x).toFixed(1)} %`;

/** Lint: a hint for each stage whose interval loses more than HINT_LOSS of goodput against the optimum. */
export function intervalHints(r: Recipe): Issue[] {
  return checkpointAdvice(r).flatMap((s) => {
    const a = s.advice;
    if (!a || a.optimum.goodput - a.current.goodput <= HINT_LOSS || a.suggested.goodput <= a.current.goodput) return [];
    const aligned = a.suggested.iterations !== a.optimum.iterations ? `, the best that divides ${s.alignedWith}` : '';
    return [
      hint(
        `${s.path}.saveInterval`,
        `saving every ${s.saveInterval} ${s.unit} gives an estimated goodput of ${pct(a.current.goodput)} on ${s.gpus} GPUs; ` +
          `the Young–Daly optimum is ~${a.optimum.iterations} (${pct(a.optimum.goodput)}): set ${s.path}.saveInterval: ${a.suggested.iterations}${aligned} (${pct(a.suggested.goodput)})`,
      ),
    ];
  });
}
