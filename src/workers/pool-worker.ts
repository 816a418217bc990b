/**
 * A worker process: polls the orchestrator queue (workflows) and the task queue of each pool it serves
 * (activities). Its activity slots are its GPUs; a step needing k GPUs runs with k of them in
 * CUDA_VISIBLE_DEVICES. On SIGTERM/SIGINT it stops polling, lets running trainers checkpoint and exit (the
 * supervisor sends them SIGTERM), and exits.
 */
import { Worker } from '@temporalio/worker';
import { createActivities, orchestratorActivities } from '../activities/index.js';
import { workerIdentity } from '../activities/attempt.js';
import { GpuSlots } from '../activities/gpu-slots.js';
import { prepareLaunches } from '../activities/trainer-process.js';
import { DEFAULT_KILL_GRACE_MS } from '../util/process-group.js';
import { ORCHESTRATOR_TASK_QUEUE } from '../temporal/constants.js';
import { codecFromEnv, EncryptionCodec } from '../temporal/codec.js';
import { connectConfig } from '../temporal/connection.js';
import { connectWorker } from '../temporal/worker-connection.js';
import { watchServerIdentity } from './server-identity.js';
import { completionProbe } from './server-probe.js';
import { gpuOverlapWarnings, liveWorkers, registerWorker } from './worker-registry.js';
import { encodedFailuresConverterPath, workflowBundle } from './workflow-bundle.js';
import { installWorkerRuntime } from './worker-log.js';

export interface PoolWorkerOptions {
  /** Task queues of the pools to serve. */
  taskQueues: string[];
  /** Also run workflows (the orchestrator queue). */
  orchestrator: boolean;
  /** GPU ids this worker owns (e.g. ['0','1']); empty on a CPU machine. */
  gpus: string[];
  /**
   * Steps this worker runs at once.
   * @default the number of GPUs, or 1 on a CPU machine
   */
  slots?: number;
  /**
   * How long a trainer has to save and exit after SIGTERM (cancel, stall, worker shutdown) before SIGKILL, ms.
   * Megatron with `--exit-signal-handler` saves on SIGTERM: too short a grace loses that save.
   * @default 30000 (`DEFAULT_KILL_GRACE_MS`)
   */
  killGraceMs?: number;
  /**
   * The supervisor heartbeats at least this often while a trainer lives, ms, so that a dead worker is noticed
   * within the run's heartbeat timeout and a cancellation reaches the trainer within about this long.
   * @default 2000
   */
  keepAliveMs?: number;
  /** Where the worker's warnings go. @default stderr */
  log?: (msg: string) => void;
}

/**
 * How the orchestrator queue's worker runs workflow code. `isolateExecutionTimeout`: the SDK stops a workflow
 * activation that runs longer than this (default 5 s) by terminating its V8 context, and on Node 20 that
 * termination, landing inside a workflow's AsyncLocalStorage scope (every cancellation scope is one), leaves
 * Node's async-hook stack corrupted: the whole process aborts with `async hook stack has become corrupted`
 * (issue 33: a stage replaying 15,000 progress signals under load took the worker, and with it every run it
 * served and every trainer it supervised, down; a fresh worker died the same way on the same workflow). Our
 * workflows run no user code, so an activation that runs long is a slow one, not a deadlock: it is let finish,
 * and at worst that workflow's task times out and is retried while the others wait their turn.
 */
export const WORKFLOW_WORKER_TUNING = {
  // The largest the SDK takes (it uses the same in its debug mode).
  isolateExecutionTimeout: '4294967295ms',
  // Workflow tasks are polled 10 at a time by default, 2 of them on the queue where a new workflow's first task
  // waits: when 100 runs handed over to their next steps together, those first tasks waited up to 1.7 s in line.
  // Polls are long-lived and cheap; the one workflow thread still runs one activation at a time.
  maxConcurrentWorkflowTaskExecutions: 60,
  maxConcurrentWorkflowTaskPolls: 30,
  nonStickyToStickyPollRatio: 0.5,
} as const;

/** Activity tasks polled at once (default 10): as many as the slots, up to this many. */
const MAX_ACTIVITY_POLLS = 30;

/** Why the worker stopped by itself (null: it was asked to, by a signal). */
export type WorkerEnd = { replacedServer: string } | null;

export async function runPoolWorker(opts: PoolWorkerOptions): Promise<WorkerEnd> {
  const log = opts.log ?? ((m: string) => process.stderr.write(`${m}\n`));
  installWorkerRuntime(log);
  const killGraceMs = opts.killGraceMs ?? DEFAULT_KILL_GRACE_MS;
  // With INFIR2_CODEC_KEY every payload the worker writes is encrypted, failure messages included (the workflows'
  // failures by their bundle, the activities' by the converter at that path); a malformed key stops it here.
  const codec = codecFromEnv();
  const encrypting = codec instanceof EncryptionCodec;
  const dataConverter = { payloadCodecs: [codec], ...(encrypting ? { failureConverterPath: encodedFailuresConverterPath() } : {}) };
  const { connection, namespace } = await connectWorker();
  const slots = opts.slots ?? Math.max(1, opts.gpus.length);
  const gpus = new GpuSlots(opts.gpus.length ? opts.gpus : []);
  const serverTakes = completionProbe(connection, namespace, codec, workerIdentity());
  const activities = createActivities({ gpus, killGraceMs, keepAliveMs: opts.keepAliveMs ?? 2_000, serverTakes });
  const workers: Worker[] = [];
  if (opts.orchestrator) {
    workers.push(
      await Worker.create({
        connection,
        namespace,
        taskQueue: ORCHESTRATOR_TASK_QUEUE,
        workflowBundle: await workflowBundle(encrypting),
        activities: orchestratorActivities,
        dataConverter,
        // A workflow task waits this long on a dead worker's sticky queue before any worker may take it
        // (default 10 s): it adds straight to the recovery time after a worker dies.
        stickyQueueScheduleToStartTimeout: '1s',
        ...WORKFLOW_WORKER_TUNING,
      }),
    );
  }
  for (const taskQueue of opts.taskQueues) {
    workers.push(
      await Worker.create({
        connection,
        namespace,
        taskQueue,
        activities,
        dataConverter,
        maxConcurrentActivityTaskExecutions: slots,
        maxConcurrentActivityTaskPolls: Math.min(slots, MAX_ACTIVITY_POLLS),
        // Flush heartbeats (progress, liveness) within a second: cancellation arrives on the reply.
        maxHeartbeatThrottleInterval: '1s',
        defaultHeartbeatThrottleInterval: '1s',
        // On shutdown, cancel running steps at once (their supervisors SIGTERM the trainers, which save),
        // then give the trainers the kill grace to finish saving before the SDK gives up on them.
        shutdownGraceTime: '1s',
        shutdownForceTime: killGraceMs + 15_000,
      }),
    );
  }
  if (opts.taskQueues.length) prepareLaunches();
  // Other workers on this host given the same GPUs: sharing is safe (GPUs are claimed host-wide) but is worth
  // knowing, since their steps now wait on each other.
  for (const w of gpuOverlapWarnings(opts.gpus, liveWorkers())) log(w);
  const address = connectConfig().connectionOptions.address;
  const unregister = registerWorker({ address, namespace, taskQueues: opts.taskQueues, orchestrator: opts.orchestrator, gpus: opts.gpus });
  let end: WorkerEnd = null;
  const stopWatching = await watchServerIdentity(connection, address, (msg) => {
    log(msg);
    end = { replacedServer: msg };
    for (const w of workers) {
      try {
        w.shutdown();
      } catch {
        /* already stopping */
      }
    }
  }, undefined, (_answers, msg) => log(`${new Date().toISOString()} ${msg}`));
  log(`worker ready: ${[opts.orchestrator ? ORCHESTRATOR_TASK_QUEUE : null, ...opts.taskQueues].filter(Boolean).join(', ')}; ${slots} slot(s); GPUs: ${opts.gpus.join(',') || 'none'}${encrypting ? `; payloads encrypted (key id ${codec.keyId})` : ''}`);
  try {
    await Promise.all(workers.map((w) => w.run()));
  } finally {
    stopWatching();
    unregister();
    await connection.close();
  }
  return end;
}
