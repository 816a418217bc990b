/**
 * Would a workflow code still run the runs that are in flight? Before new code reaches the workers, the recorded
 * histories of infir2's workflows (every workflow of the orchestrator queue that runs now, and those closed in
 * the last days, which a query or `status` may replay) are replayed against it with the SDK's replayer
 * (`Worker.runReplayHistories`). A history the code would command differently fails with a determinism
 * violation: the error a worker with that code would hit on that run as soon as it replays it (after a restart,
 * a cache eviction, a query), stalling the run until the old code is back.
 */
import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import type { PayloadCodec } from '@temporalio/common';
import { Worker, type WorkflowBundleOption } from '@temporalio/worker';
import { ORCHESTRATOR_TASK_QUEUE } from '../temporal/constants.js';
import { installWorkerRuntime } from './worker-log.js';
import { encodedFailuresConverterPath } from './workflow-bundle.js';

export interface ReplayTarget {
  workflowId: string;
  runId: string;
  type: string;
  /** `running`, `completed`, `failed`, … (the execution's status, lower case). */
  status: string;
}

export interface ReplayVerdict extends ReplayTarget {
  /** Why the code cannot replay this history (one line), or null when it replays it as recorded. */
  error: string | null;
}

/** The visibility query: infir2's workflows that run now or closed after `since`. */
export function replayQuery(since: Date): string {
  return `TaskQueue = '${ORCHESTRATOR_TASK_QUEUE}' AND (ExecutionStatus = 'Running' OR CloseTime > '${since.toISOString()}')`;
}

/** The workflows to replay, newest first as the server lists them. */
export async function replayTargets(client: Client, since: Date): Promise<ReplayTarget[]> {
  const out: ReplayTarget[] = [];
  for await (const wf of client.workflow.list({ query: replayQuery(since) })) out.push(target(wf));
  return out;
}

function target(wf: WorkflowExecutionInfo): ReplayTarget {
  return { workflowId: wf.workflowId, runId: wf.runId, type: wf.type, status: wf.status.name.toLowerCase() };
}

/** The first line of a replay error, without the SDK's stack. */
function oneLine(err: Error): string {
  return `${err.name === 'Error' ? '' : `${err.name}: `}${err.message}`.split('\n')[0]!.trim();
}

/**
 * Replay each target's history against `bundle`. `encrypted`: the histories' payloads and failures were written
 * with the codec (the bundle must then be the one with the encoded-failures converter, as the workers load it).
 */
export async function replayAll(
  client: Client,
  targets: ReplayTarget[],
  opts: { bundle: WorkflowBundleOption; codec: PayloadCodec; encrypted: boolean },
): Promise<ReplayVerdict[]> {
  if (!targets.length) return [];
  // The replayer is a worker: its state changes and core's chatter stay out of the verdicts (warnings still show).
  installWorkerRuntime((line) => process.stderr.write(`${line}\n`));
  async function* histories() {
    for (const t of targets) yield { workflowId: t.workflowId, history: await client.workflow.getHandle(t.workflowId, t.runId).fetchHistory() };
  }
  const replayed = Worker.runReplayHistories(
    {
      workflowBundle: opts.bundle,
      dataConverter: { payloadCodecs: [opts.codec], ...(opts.encrypted ? { failureConverterPath: encodedFailuresConverterPath() } : {}) },
      replayName: 'infir2-replay-check',
    },
    histories(),
  );
  // One result per history, in the order given.
  const verdicts: ReplayVerdict[] = [];
  for await (const r of replayed) {
    const t = targets[verdicts.length]!;
    verdicts.push({ ...t, error: r.error ? oneLine(r.error) : null });
  }
  return verdicts;
}
