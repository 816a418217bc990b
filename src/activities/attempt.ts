/** One attempt of one step, as the supervisor's phases share it: the step, its ids, its progress and its log. */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { dirname } from 'node:path';
import type { Progress } from '../plan/contracts.js';
import type { PlanStep } from '../plan/types.js';
import { logFile } from './step-files.js';
import { newLaunchIds, type LaunchIds } from './trainer-process.js';

export interface RunStepInput {
  recipe: string;
  runId: string;
  runDir: string;
  step: PlanStep;
  /** 1-based attempt number within the step (the workflow counts them). */
  attempt: number;
}

export interface Attempt {
  step: PlanStep;
  input: RunStepInput;
  ids: LaunchIds;
  /** Also the heartbeat details; mutated as the trainer reports. */
  progress: Progress;
  /** ms since the epoch. */
  started: number;
  ctx: Context;
  log: WriteStream;
  /** A `[infir2 <time>] …` line in the step's log. */
  note: (msg: string) => void;
}

export function openAttempt(input: RunStepInput): Attempt {
  const { step, runDir, attempt } = input;
  mkdirSync(step.command.cwd, { recursive: true });
  mkdirSync(dirname(logFile(runDir, step.id)), { recursive: true });
  const log = createWriteStream(logFile(runDir, step.id), { flags: 'a' });
  return {
    step,
    input,
    ids: newLaunchIds(attempt),
    progress: {
      iteration: null,
      totalIterations: step.progress.totalIterations,
      loss: null,
      throughput: null,
      throughputUnit: null,
      lastCheckpoint: null,
      resumedFrom: null,
      attempt,
      pid: null,
      updatedAt: new Date().toISOString(),
    },
    started: Date.now(),
    ctx: Context.current(),
    log,
    note: (msg: string) => log.write(`[infir2 ${new Date().toISOString()}] ${msg}\n`),
  };
}

/** The attempt's failure, typed by its class (the workflow's retry rule reads the type); config is final. */
export function failure(a: Attempt, cls: string, reason: string): ApplicationFailure {
  return ApplicationFailure.create({
    type: cls,
    message: `${a.step.id}: ${cls}: ${reason}`,
    nonRetryable: cls === 'config',
    details: [a.progress],
  });
}
