/** The activities a pool worker registers. Built by a factory so that each worker injects its own GPU slots. */
import { inspectCheckpointDir, type CheckpointInspection } from './checkpoints.js';
import { createRunStep, type SupervisorOptions } from './run-step.js';

export function createActivities(opts: SupervisorOptions) {
  return {
    runStep: createRunStep(opts),
    /** The latest complete iteration of a checkpoint root (a partial newest save is skipped). */
    async inspectCheckpoints(dir: string): Promise<CheckpointInspection> {
      return inspectCheckpointDir(dir);
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
