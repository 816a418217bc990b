/**
 * The run's events, told to the recipe's webhooks (`notify:`), from workflow code: deterministic, no I/O. Each
 * event gets an id stable across replays and delivery retries (the run's workflow id and execution, the step,
 * the attempt, the event), and goes to every webhook that asked for it through the `notify` activity on the
 * orchestrator queue. Delivery is bounded (about a minute of retries) and never fails the run.
 */
import { log, proxyActivities } from '@temporalio/workflow';
import type { OrchestratorActivities } from '../activities/index.js';
import type { NotifyEvent, NotifySpec } from '../plan/notify-spec.js';
import { ORCHESTRATOR_TASK_QUEUE } from '../temporal/constants.js';

const { notify } = proxyActivities<OrchestratorActivities>({
  taskQueue: ORCHESTRATOR_TASK_QUEUE,
  startToCloseTimeout: '15s',
  // A receiver that is down gets about a minute; a missing or malformed URL is not retried at all.
  scheduleToCloseTimeout: '60s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '15s', nonRetryableErrorTypes: ['config'] },
});

export interface RunEvent {
  id: string;
  event: NotifyEvent;
  text: string;
  fields: Record<string, string | number | null>;
}

/** Send `e` to every webhook that asked for its kind; failures are logged, never thrown. */
export async function tell(spec: NotifySpec | undefined, e: RunEvent): Promise<void> {
  if (!spec) return;
  await Promise.all(
    spec.webhooks.map(async (w, i) => {
      if (!w.events.includes(e.event)) return;
      const at = `notify.webhooks.${i}`;
      try {
        await notify({ id: e.id, event: e.event, webhook: { url: w.url, format: w.format }, at, text: e.text, fields: e.fields });
      } catch (err) {
        log.warn(`${e.event} not delivered to ${at}`, { id: e.id, error: err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err) });
      }
    }),
  );
}
