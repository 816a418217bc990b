/**
 * What a failed attempt's class becomes once the run directory is asked: a storage fault named with its path and
 * the room left, and a checkpoint that breaks every attempt loading it marked bad, so that the next attempt
 * falls back to the previous complete one instead of retrying the same damage until the budget is spent.
 */
import type { FailureClass } from '../plan/types.js';
import { clearLoadFailures, markBad, prunePartials, recordLoadFailure } from '../rundir/checkpoint-health.js';
import { formatBytes, isStorageError, storageErrorInLine, storageReason } from '../rundir/storage.js';
import type { Attempt } from './attempt.js';
import { logFile } from './step-files.js';

/**
 * Damage a trainer reports while loading: the reference trainer's hash check (`corrupt checkpoint …: model.pt
 * does not match metadata.json`), torch reading a truncated file (`PytorchStreamReader failed reading zip
 * archive`), a zero-byte shard (`EOFError: Ran out of input`).
 */
const DAMAGED = [/\bcorrupt checkpoint\b/i, /PytorchStreamReader failed reading/, /\bEOFError: Ran out of input\b/, /\bunpickling stack underflow\b/i];

/** Failures in a row before the first iteration, on the same loaded checkpoint, that mark it bad. */
const LOAD_STRIKES = 2;

export interface Verdict {
  cls: FailureClass;
  reason: string;
}

/** Where a storage fault with no path of its own most likely is: the checkpoint root, else the working dir. */
function stepPath(a: Attempt): string {
  return a.step.checkpoint?.dir ?? a.step.command.cwd;
}

/** A storage reason for the step, with what moved-aside partial saves hold (they count against a full disk). */
export async function storageVerdict(a: Attempt, code: string, path: string): Promise<Verdict> {
  let reason = storageReason(code, path);
  if (code === 'ENOSPC' && a.step.checkpoint) {
    const { keptBytes } = await prunePartials(a.step.checkpoint.dir);
    if (keptBytes > 0) reason += `; ${formatBytes(keptBytes)} of it in partial saves moved aside, removed once a newer checkpoint is complete`;
  }
  return { cls: 'storage', reason };
}

/** A storage error the worker itself met (opening the log, the lock, a rename), as a verdict; else null. */
export async function workerStorageVerdict(a: Attempt, err: unknown): Promise<Verdict | null> {
  return isStorageError(err) ? storageVerdict(a, err.code, err.path ?? stepPath(a)) : null;
}

export async function refineVerdict(a: Attempt, v: Verdict, tail: string[]): Promise<Verdict> {
  if (v.cls === 'storage') {
    const hit = storageErrorInLine(v.reason);
    return hit ? storageVerdict(a, hit.code, hit.path ?? stepPath(a)) : v;
  }
  // The step's own log could not be written: the disk under the run directory is the fault, whatever the
  // trainer did next.
  const logFault = a.logError && isStorageError(a.logError) ? a.logError : null;
  if (logFault && v.cls !== 'config') return storageVerdict(a, logFault.code, logFault.path ?? logFile(a.input.runDir, a.step.id));
  return checkpointVerdict(a, v, tail) ?? v;
}

/**
 * A resumed attempt that crashed before its first iteration: the checkpoint it loaded is suspect. Damage the
 * trainer named, or the second such crash in a row on the same iteration, marks it bad; the verdict then says
 * where it went, where the next attempt starts and how many iterations that costs.
 */
function checkpointVerdict(a: Attempt, v: Verdict, tail: string[]): Verdict | null {
  const { step, progress, note } = a;
  const loaded = progress.resumedFrom;
  if (!step.checkpoint || loaded === null) return null;
  const dir = step.checkpoint.dir;
  if (progress.iteration !== null && progress.iteration > loaded) {
    clearLoadFailures(dir); // it loaded fine; whatever failed later is not the checkpoint's fault
    return null;
  }
  if (v.cls !== 'crash') return null;
  const named = tail.map((l) => l.trim()).filter((l) => DAMAGED.some((re) => re.test(l))).at(-1);
  const strikes = recordLoadFailure(dir, loaded);
  if (!named && strikes < LOAD_STRIKES) return null;
  const why = named ?? `${strikes} attempts in a row failed before their first iteration after loading it`;
  const bad = markBad(dir, loaded, `${step.id}: ${why.slice(0, 300)}`, `${Date.now()}`);
  const next = bad.fallback === null ? 'no complete checkpoint is left: the next attempt starts fresh' : `the next attempt resumes from iteration ${bad.fallback}`;
  const lost = loaded - (bad.fallback ?? 0);
  const reason = `checkpoint ${loaded} is damaged (${why.slice(0, 200)}): moved aside to ${bad.movedTo}; ${next} (${lost} iteration${lost === 1 ? '' : 's'} to redo)`;
  note(`marked checkpoint ${loaded} bad: ${reason}`);
  return { cls: 'crash', reason };
}
