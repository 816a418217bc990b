/**
 * Client-side view of runs: find a run by workflow id or run id, read its status (the workflow's query, with
 * live progress merged from the running steps' heartbeat details), start and cancel.
 */
import { WorkflowFailedError, WorkflowNotFoundError, type Client, type WorkflowExecutionDescription, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { UsageError } from '../errors.js';
import type { Progress, RunStatus, StepResult, StepState } from '../plan/contracts.js';
import type { Plan } from '../plan/types.js';
import { evalStateQuery, statusQuery } from '../workflows/definitions.js';
import { evalWorkflowId, MEMO, ORCHESTRATOR_TASK_QUEUE, stepWorkflowId } from './constants.js';
import { codecError, isCodecError } from './codec.js';
import { decodeRawPayload, decodeRequiredPayload } from './payloads.js';
import { stuckWorkflow, stuckWords } from './stuck-workflow.js';
import { noWorkerLine, orchestratorPollers, workerlessStatus } from './workerless-status.js';

/** How long a status query may take before the run is read from the server's records instead, ms. */
const QUERY_DEADLINE_MS = 8_000;
/** How long the scores of a step's evaluator may take to come; without them status shows those the run has. */
const EVAL_QUERY_DEADLINE_MS = 2_000;

export interface RunRef {
  workflowId: string;
  handle: WorkflowHandle;
  /** The description read while resolving (saves a round trip for the caller). */
  description: WorkflowExecutionDescription;
}

/** `ref` is a workflow id (`tiny-20261122-0301`) or a run id (`20261122-0301`). */
export async function resolveRun(client: Client, ref: string): Promise<RunRef> {
  const direct = client.workflow.getHandle(ref);
  try {
    const d = await direct.describe();
    if (d.type === 'recipeRun') return { workflowId: ref, handle: direct, description: d };
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
  const safe = ref.replace(/'/g, '');
  for await (const wf of client.workflow.list({ query: `RecipeRunId = '${safe}' AND WorkflowType = 'recipeRun'` })) {
    const handle = client.workflow.getHandle(wf.workflowId);
    return { workflowId: wf.workflowId, handle, description: await handle.describe() };
  }
  throw new UsageError(`no run '${ref}' (give the id \`infir2 run\` printed; \`infir2 list\` shows them)`);
}

/** Decode the first heartbeat detail of a pending activity (through the client's codecs: it may be encrypted). */
function decodeProgress(client: Client, payloads: unknown): Promise<Progress | null> {
  return decodeRawPayload<Progress>(client, (payloads as { payloads?: unknown[] } | null)?.payloads?.[0]);
}

/**
 * A closed run's final status, from what it recorded: a completed run returns it, a failed one attaches it to its
 * failure, a cancelled one writes it to its memo. No worker needs to replay the run to answer a query. null for
 * other states (running, terminated, or cancelled before the memo existed).
 */
async function closedStatus(handle: WorkflowHandle, desc: WorkflowExecutionDescription): Promise<RunStatus | null> {
  const wfStatus = desc.status.name;
  if (wfStatus === 'CANCELLED') {
    const st = desc.memo?.[MEMO.finalStatus] as RunStatus | undefined;
    return st && Array.isArray(st.steps) ? st : null;
  }
  try {
    if (wfStatus === 'COMPLETED') return ((await handle.result()) as { status?: RunStatus }).status ?? null;
    if (wfStatus === 'FAILED') await handle.result();
  } catch (err) {
    // No key or the wrong one: that is the answer, not a run without a recorded status.
    if (isCodecError(err)) throw codecError(err);
    const details = err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure ? err.cause.details : undefined;
    const st = details?.[0] as RunStatus | undefined;
    if (st && Array.isArray(st.steps)) return st;
  }
  return null;
}

/**
 * The run's status as the workflow keeps it: what a closed run recorded, else the answer to the status query
 * (which, for a closed run, a worker answers by replaying it).
 */
export async function recordedStatus(ref: RunRef, desc: WorkflowExecutionDescription = ref.description): Promise<RunStatus> {
  const closed = await closedStatus(ref.handle, desc);
  if (closed) return closed;
  const client = ref.handle.client;
  if (desc.status.name === 'RUNNING') {
    // A query waits for a worker that may never come: ask the server who polls first, and bound the query.
    const pollers = await orchestratorPollers(client, client.options.namespace);
    const fromRecords = async (why: string) => {
      const { plan, keep, carried } = await startedArgs(ref);
      return workerlessStatus(client, ref.workflowId, desc.runId, plan, keep, why, carried);
    };
    if (!pollers.live) return fromRecords(noWorkerLine(pollers));
    // A run whose workflow task keeps failing answers no query: its records say where it is, and why it stands.
    const stuck = await stuckWorkflow(client, desc);
    if (stuck) return fromRecords(stuckWords(stuck));
    try {
      return await client.connection.withDeadline(Date.now() + QUERY_DEADLINE_MS, () => ref.handle.query(statusQuery));
    } catch {
      const last = pollers.lastSeen ? ` (a worker last polled ${ORCHESTRATOR_TASK_QUEUE} at ${pollers.lastSeen.toISOString().replace(/\.\d+Z$/, 'Z')})` : '';
      return fromRecords(`no worker answered the status query within ${QUERY_DEADLINE_MS / 1000} s${last}: shown from the server's records; start one with \`infir2 up\` or \`infir2 worker\``);
    }
  }
  try {
    return await ref.handle.query(statusQuery);
  } catch (err) {
    if (isCodecError(err)) throw codecError(err);
    const hint = ' (a closed run is read by replaying it: start a worker with `infir2 up` or `infir2 worker`)';
    throw new Error(`cannot read the status of ${ref.workflowId}: ${err instanceof Error ? err.message : String(err)}${hint}`);
  }
}

/**
 * The run's start arguments: the Plan, the results it keeps from an earlier run, and (an execution that continued
 * as new) the steps' states it carried over.
 */
export async function startedArgs(ref: RunRef): Promise<{ plan: Plan; keep: Record<string, StepResult>; carried: StepState[] }> {
  const history = await ref.handle.fetchHistory();
  const [planPayload, optsPayload] = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads ?? [];
  if (!planPayload) throw new Error(`cannot read the plan of ${ref.workflowId} from its history`);
  const client = ref.handle.client;
  const plan = await decodeRequiredPayload<Plan>(client, planPayload);
  const opts = optsPayload ? await decodeRequiredPayload<{ keep?: Record<string, StepResult>; carry?: { steps?: StepState[] } } | null>(client, optsPayload) : null;
  return { plan, keep: opts?.keep ?? {}, carried: opts?.carry?.steps ?? [] };
}

/** The Plan the run was started with: the first argument in its start event. */
export async function startedPlan(ref: RunRef): Promise<Plan> {
  return (await startedArgs(ref)).plan;
}

/** `fresh`: describe again (a follower polling); otherwise the description from resolving is used. */
export async function runStatus(client: Client, ref: RunRef, fresh = true): Promise<RunStatus & { workflowStatus: string }> {
  const desc = fresh ? await ref.handle.describe() : ref.description;
  const status = await recordedStatus(ref, desc);
  // Live progress: the running steps' latest heartbeat details (the workflows record transitions only), the scores
  // of their evaluators, and a step whose workflow task keeps failing.
  await Promise.all(status.steps.filter((s) => s.status === 'running').map((s) => liveStep(client, stepWorkflowId(ref.workflowId, s.id), s)));
  const wfStatus = desc.status.name;
  if (wfStatus === 'CANCELLED' || wfStatus === 'TERMINATED') status.status = 'cancelled';
  else if (wfStatus === 'FAILED' || wfStatus === 'TIMED_OUT') status.status = 'failed';
  else if (wfStatus === 'COMPLETED') status.status = 'completed';
  return { ...status, workflowStatus: wfStatus };
}

/** What the run's record of a running step lacks, read from its workflows: progress, evaluations, trouble. */
async function liveStep(client: Client, stepWfId: string, s: StepState): Promise<void> {
  const progress = async () => {
    const child = await client.workflow.getHandle(stepWfId).describe();
    const pending = child.raw.pendingActivities?.[0];
    const p = pending ? await decodeProgress(client, pending.heartbeatDetails) : null;
    if (p) {
      s.progress = p;
      s.attempts = Math.max(s.attempts, p.attempt);
    }
    const stuck = await stuckWorkflow(client.workflow, child);
    const since = child.raw.pendingWorkflowTask?.originalScheduledTime?.seconds;
    if (stuck) s.waiting = { reason: stuckWords(stuck), since: new Date(since ? Number(since) * 1000 : Date.now()).toISOString(), until: null };
  };
  const evals = async () => {
    const handle = client.workflow.getHandle(evalWorkflowId(stepWfId));
    if ((await handle.describe()).status.name !== 'RUNNING') return;
    const e = await client.connection.withDeadline(Date.now() + EVAL_QUERY_DEADLINE_MS, () => handle.query(evalStateQuery));
    if (e.done.length >= (s.evals?.length ?? 0)) s.evals = e.done;
  };
  // Each is best effort: the child may be between attempts or closed, a step may have no evaluator.
  await Promise.all([progress().catch(() => undefined), evals().catch(() => undefined)]);
}
