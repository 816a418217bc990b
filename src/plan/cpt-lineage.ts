/**
 * The three CPT phases as one WSD lineage (docs/architecture.md#stage-ids, FIXES cpt-*). Every phase runs the same schedule
 * (`--train-iters` = the total) and stops on its boundary checkpoint; the next phase loads exactly that
 * checkpoint with its optimizer and scheduler state. warmup and stable share one checkpoint root; decay saves
 * to its own, so several decays (forks) can start from one stable run.
 */
import type { CptPhase } from '../backends/types.js';
import { cptBoundaries } from '../recipe/derived.js';
import type { CptConfig } from '../recipe/schema.js';

export interface Fork {
  /** Checkpoint root of the run whose stable phase the decay starts from. */
  sourceCheckpointDir: string;
  /** A complete stable-phase iteration in that root. */
  iteration: number;
}

export interface LineageDirs {
  /** `<run>/cpt/checkpoints`: warmup and stable. */
  cptRoot: string;
  /** `<run>/cpt.decay/checkpoints`. */
  decayRoot: string;
  /** The base model's torch_dist root, when there is one. */
  base?: string | undefined;
}

export function cptLineage(cpt: CptConfig, dirs: LineageDirs, fork?: Fork): CptPhase[] {
  const b = cptBoundaries(cpt);
  const resumeFrom = (load: string) => ({ load, ckptStep: '{iteration}' as const, exitOnMissing: true });
  const phases: CptPhase[] = [];
  if (!fork) {
    if (b.warmupEnd > 0) {
      phases.push({
        id: 'cpt.warmup',
        name: 'warmup',
        saveDir: dirs.cptRoot,
        trainIters: b.end,
        warmupIters: cpt.warmupIters,
        start: 0,
        end: b.warmupEnd,
        exitInterval: b.warmupEnd,
        overrideScheduler: false,
        // The base is read only while the run's root has no tracker (FIXES cpt-bootstrap).
        first: { load: dirs.cptRoot, ...(dirs.base ? { pretrained: dirs.base } : {}) },
        resume: resumeFrom(dirs.cptRoot),
      });
    }
    phases.push({
      id: 'cpt.stable',
      name: 'stable',
      saveDir: dirs.cptRoot,
      trainIters: b.end,
      warmupIters: cpt.warmupIters,
      start: b.warmupEnd,
      end: b.stableEnd,
      // The first multiple of stableEnd after any iteration below it is stableEnd itself.
      exitInterval: b.stableEnd,
      overrideScheduler: false,
      first:
        b.warmupEnd > 0
          ? { load: dirs.cptRoot, ckptStep: b.warmupEnd, exitOnMissing: true }
          : { load: dirs.cptRoot, ...(dirs.base ? { pretrained: dirs.base } : {}) },
      resume: resumeFrom(dirs.cptRoot),
    });
  }
  // A fork decays right away from its iteration N: --train-iters N + decay (docs/infir2-recipe.md §3.3, "to decay immediately").
  const from = fork ? { dir: fork.sourceCheckpointDir, iteration: fork.iteration } : { dir: dirs.cptRoot, iteration: b.stableEnd };
  const end = fork ? fork.iteration + cpt.decayIters : b.end;
  phases.push({
    id: 'cpt.decay',
    name: 'decay',
    saveDir: dirs.decayRoot,
    trainIters: end,
    // As InfiR2's decay script (WARMUP_STEPS=0); the WSD decay does not depend on it.
    warmupIters: 0,
    start: from.iteration,
    end,
    overrideScheduler: true,
    first: { load: from.dir, ckptStep: from.iteration, exitOnMissing: true },
    resume: resumeFrom(dirs.decayRoot),
  });
  return phases;
}
