/** The activities a pool worker registers. Built by a factory so that each worker injects its own GPU slots. */
import { notify } from './notify.js';
import { writeRunReport } from './run-report.js';
import { createRunStep, type SupervisorOptions } from './run-step.js';

export function createActivities(opts: SupervisorOptions) {
  return {
    runStep: createRunStep(opts),
    writeRunReport,
  };
}

export type Activities = ReturnType<typeof createActivities>;

/** The activities of the orchestrator queue: the run's notifications (their URLs are in its workers' environment). */
export const orchestratorActivities = { notify };
export type OrchestratorActivities = typeof orchestratorActivities;
