/**
 * The end of a run writes its report (activities/run-report.ts) on a worker of the pool that ran its last step:
 * that worker mounts the run directory. A report that cannot be written is logged and the run's outcome stands.
 */
import { log, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { RunStatus } from '../plan/contracts.js';
import type { Plan } from '../plan/types.js';

/** The task queue of the pool that ran the run's last step that ran (the first step's, if none did). */
export function reportQueue(plan: Plan, status: RunStatus): string {
  const ran = status.steps.filter((s) => s.attempts > 0 || s.status === 'kept').map((s) => s.id);
  const step = plan.steps.find((s) => s.id === ran.at(-1)) ?? plan.steps[0]!;
  return plan.pools[step.pool]?.taskQueue ?? step.pool;
}

/** The report's page, or null when it could not be written (the reason is in the workflow's log). */
export async function writeReportOf(plan: Plan, status: RunStatus): Promise<string | null> {
  const { writeRunReport } = proxyActivities<Activities>({
    taskQueue: reportQueue(plan, status),
    // Rendering a long run's report takes seconds; the run's end waits at most 2 minutes for a pool worker.
    scheduleToCloseTimeout: '2m',
    startToCloseTimeout: '1m',
    retry: { initialInterval: '2s', maximumAttempts: 3 },
  });
  try {
    return (await writeRunReport({ runDir: plan.runDir, status })).page;
  } catch (err) {
    log.warn('the run report was not written', { error: err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err) });
    return null;
  }
}
