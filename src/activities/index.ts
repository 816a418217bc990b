/** The activities a pool worker registers. Built by a factory so that each worker injects its own GPU slots. */
import { createRunStep, type SupervisorOptions } from './run-step.js';

export function createActivities(opts: SupervisorOptions) {
  return {
    runStep: createRunStep(opts),
  };
}

export type Activities = ReturnType<typeof createActivities>;
