/**
 * What each event says: its stable id, a line for people and its fields. Pure (workflow-safe), tested with
 * tables. `run` names the run's workflow execution, so that a resumed run (a new execution, whose attempts count
 * from 1 again) never reuses an id of the run it resumes.
 */
import type { FailureClass } from '../plan/types.js';
import type { RunEvent } from './notify.js';

export interface RunRef {
  recipe: string;
  runId: string;
  /** The run's workflow id and its execution's run id. */
  workflowId: string;
  execution: string;
}

const base = (r: RunRef) => ({ recipe: r.recipe, runId: r.runId, workflowId: r.workflowId });
const runName = (r: RunRef) => `${r.recipe} run ${r.runId}`;

export function runEnded(r: RunRef, status: 'completed' | 'failed' | 'cancelled', detail: string | null): RunEvent {
  const mark = { completed: '✅', failed: '❌', cancelled: '⏹' }[status];
  return {
    id: `${r.workflowId}/${r.execution}/run.${status}`,
    event: `run.${status}`,
    text: `${mark} infir2: ${runName(r)} ${status}${detail ? `: ${detail}` : ''}`,
    fields: { ...base(r), status, message: detail },
  };
}

export interface StepFailure {
  step: string;
  attempt: number;
  cls: FailureClass;
  message: string;
  /** Whether the step is tried again. */
  retried: boolean;
  /** Failures of this class in a row without a new checkpoint, this one included, and the class's budget. */
  streak: number;
  budget: number;
}

/**
 * The events of one failed attempt, in order: a hang detected, the retry, and the budget nearly spent (this retry
 * used the last one of its class: one more failure without a new checkpoint fails the step).
 */
export function stepFailed(r: RunRef, f: StepFailure): RunEvent[] {
  const fields = { ...base(r), step: f.step, attempt: f.attempt, class: f.cls, message: f.message, streak: f.streak, budget: f.budget };
  const id = (event: string) => `${r.workflowId}/${r.execution}/${f.step}/a${f.attempt}/${event}`;
  const where = `${runName(r)}, ${f.step} attempt ${f.attempt}`;
  const out: RunEvent[] = [];
  if (f.cls === 'hang') {
    out.push({ id: id('step.hang'), event: 'step.hang', text: `⚠ infir2: hang in ${where}${f.retried ? '; retrying' : '; the step fails'}: ${f.message}`, fields });
  }
  if (!f.retried) return out;
  out.push({ id: id('step.retried'), event: 'step.retried', text: `↻ infir2: ${where} failed (${f.cls}); retrying: ${f.message}`, fields });
  if (f.streak > 0 && f.streak === f.budget) {
    out.push({
      id: id('step.budget'),
      event: 'step.budget',
      text: `⚠ infir2: ${where}: ${f.streak} ${f.cls} failure${f.streak > 1 ? 's' : ''} in a row without a new checkpoint, the last retry retries.${f.cls} (${f.budget}) allows; one more fails the step`,
      fields,
    });
  }
  return out;
}
