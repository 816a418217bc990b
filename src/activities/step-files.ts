/**
 * The files of one step in the run directory, as an attempt reads and writes them: its log, its inputs, whether
 * its completion criterion is met on disk, its metrics, and its result (written last, atomically).
 */
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Writable } from 'node:stream';
import type { Progress, StepResult } from '../plan/contracts.js';
import type { PlanStep } from '../plan/types.js';
import { inspectCheckpointDir, type CheckpointInspection } from '../rundir/checkpoints.js';
import { fingerprintOutputs } from '../rundir/outputs.js';
import { writeFileAtomic } from '../util/atomic-write.js';
import { closeAttempt } from '../plan/goodput.js';

export function logFile(runDir: string, stepId: string): string {
  return join(runDir, 'logs', `${stepId}.log`);
}

export function resultFile(runDir: string, stepId: string): string {
  return join(runDir, 'results', `${stepId}.json`);
}

/** A path, or a Megatron indexed-dataset prefix (`<prefix>.bin` + `<prefix>.idx`). */
export function inputExists(p: string): boolean {
  return existsSync(p) || (existsSync(`${p}.bin`) && existsSync(`${p}.idx`));
}

/** Is the step's completion criterion met on disk? */
export function completionMet(step: PlanStep, insp?: CheckpointInspection | null): boolean {
  const c = step.completion;
  if (c.kind === 'checkpoint') {
    const i = insp && insp.dir === c.dir ? insp : inspectCheckpointDir(c.dir);
    return i.latestComplete !== null && i.latestComplete >= c.iteration;
  }
  return c.paths.every((p) => existsSync(p) && (statSync(p).isDirectory() || statSync(p).size > 0));
}

/** Numeric top-level fields of an evaluation step's JSON report (accuracy and the like). */
export function readMetrics(step: PlanStep): Record<string, number> {
  const metrics: Record<string, number> = {};
  // Only evaluations report metrics; other JSON outputs (an HF config.json) hold settings, not results.
  const paths = step.kind === 'eval' && step.completion.kind === 'files' ? step.completion.paths : [];
  for (const p of paths.filter((x) => x.endsWith('.json'))) {
    try {
      const data = JSON.parse(readFileSync(p, 'utf8')) as Record<string, unknown>;
      for (const [k, v] of Object.entries(data)) if (typeof v === 'number' && Number.isFinite(v)) metrics[k] = v;
    } catch {
      /* not a JSON object: no metrics */
    }
  }
  return metrics;
}

/** The step's result, also written to `<run>/results/<step>.json` (what `resume` and `status` read). */
export async function writeResult(step: PlanStep, runDir: string, attempt: number, progress: Progress, started: number): Promise<StepResult> {
  const fingerprint = await fingerprintOutputs(step);
  const result: StepResult = {
    stepId: step.id,
    outputs: step.outputs,
    iteration: step.completion.kind === 'checkpoint' ? step.completion.iteration : progress.iteration,
    loss: progress.loss,
    metrics: readMetrics(step),
    attempts: attempt,
    resumedFrom: progress.resumedFrom,
    durationSec: (Date.now() - started) / 1000,
    finishedAt: new Date().toISOString(),
    fingerprint,
    ...(progress.time ? { time: closeAttempt(progress.time, Date.now(), null) } : {}),
    ...(progress.preflight?.length ? { preflight: progress.preflight } : {}),
  };
  const file = resultFile(runDir, step.id);
  mkdirSync(dirname(file), { recursive: true });
  writeFileAtomic(file, JSON.stringify(result, null, 2) + '\n');
  return result;
}

export function closeStream(s: Writable): Promise<void> {
  return new Promise((resolve) => s.end(() => resolve()));
}
