/**
 * Where a run keeps everything: `<runDir>/<runId>/`, one directory per step (its cwd, logs and outputs), and
 * the shared CPT checkpoint root. The compiler is the only place that decides these paths.
 */
import { join, resolve } from 'node:path';

export interface RunLayout {
  /** Absolute run directory. */
  run: string;
  /** A step's working directory: `<run>/<step id>`. */
  stepDir(stepId: string): string;
  /** A step's Megatron checkpoint root: `<run>/<step id>/checkpoints`. */
  checkpoints(stepId: string): string;
  /** warmup and stable save here: `<run>/cpt/checkpoints`. */
  cptRoot: string;
}

export function runLayout(runDir: string, runId: string): RunLayout {
  const run = resolve(runDir, runId);
  return {
    run,
    stepDir: (id) => join(run, id),
    checkpoints: (id) => join(run, id, 'checkpoints'),
    cptRoot: join(run, 'cpt', 'checkpoints'),
  };
}
