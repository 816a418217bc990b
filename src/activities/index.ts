/** The activities a pool worker registers. Built by a factory so that each worker injects its own GPU slots. */
import { notify } from './notify.js';
import { warmReportRenderer, writeRunReport } from './run-report.js';
import { createRunStep, type SupervisorOptions } from './run-step.js';
import type { RunStepInput } from './attempt.js';

export function createActivities(opts: SupervisorOptions) {
  const supervise = createRunStep(opts);
  return {
    runStep(input: RunStepInput) {
      // The run this step belongs to will want its report at its end: have a renderer ready by then.
      warmReportRenderer();
      return supervise(input);
    },
    writeRunReport,
  };
}

export type Activities = ReturnType<typeof createActivities>;

/** The activities of the orchestrator queue: the run's notifications (their URLs are in its workers' environment). */
export const orchestratorActivities = { notify };
export type OrchestratorActivities = typeof orchestratorActivities;
