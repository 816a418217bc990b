/**
 * Classify a finished attempt into a failure class (src/plan/types.ts FailureClass). Pure: the supervisor
 * passes what it saw; the workflow spends the retry budget of the class.
 */
import type { FailureClass } from '../plan/types.js';

export interface ExitFacts {
  exitCode: number | null;
  signal: string | null;
  /** Why the supervisor itself stopped the process, if it did. */
  stoppedBy: 'stall' | 'cancel' | 'shutdown' | 'timeout' | null;
  /** The trainer printed Megatron's "exiting program after receiving SIGTERM". */
  sawSigtermExit: boolean;
  /** Last lines of output, oldest first. */
  tail: string[];
}

const OOM = /CUDA out of memory|OutOfMemoryError|torch\.OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|Cannot allocate memory|MemoryError\b|out of memory/i;
// Errors that a retry cannot fix: the command line or the inputs are wrong.
const CONFIG = [
  /error: unrecognized arguments/,
  /error: argument [-\w]+:/,
  /error: the following arguments are required/,
  /^usage: /,
  /\bModuleNotFoundError\b/,
  /\bFileNotFoundError\b/,
  /\bNo such file or directory\b/,
  /KeyError: 'fmt'/,
  /AssertionError: .*(rope_theta|rotary_base|vocab)/,
  /^error: (?:bad argument|invalid|missing|checkpoint)/i,
];

export function classifyExit(f: ExitFacts): { cls: FailureClass; reason: string } {
  const text = f.tail.join('\n');
  if (f.stoppedBy === 'stall') return { cls: 'hang', reason: 'no progress within the stall timeout; the process was killed' };
  if (f.stoppedBy === 'timeout') return { cls: 'hang', reason: 'the attempt exceeded its time limit; the process was killed' };
  if (f.stoppedBy === 'shutdown') return { cls: 'preempted', reason: 'the worker shut down; the trainer was stopped to checkpoint' };
  if (OOM.test(text)) return { cls: 'oom', reason: lastMatching(f.tail, OOM) ?? 'out of memory' };
  if (f.signal === 'SIGKILL' || f.signal === 'SIGTERM' || f.signal === 'SIGINT' || f.signal === 'SIGHUP') {
    return { cls: 'preempted', reason: `killed by ${f.signal} from outside the supervisor` };
  }
  if (f.exitCode === 0 && f.sawSigtermExit) return { cls: 'preempted', reason: 'the trainer saved and exited after SIGTERM' };
  if (f.exitCode === 2 || CONFIG.some((re) => f.tail.some((l) => re.test(l.trim())))) {
    const line = f.tail.map((l) => l.trim()).filter((l) => CONFIG.some((re) => re.test(l))).at(-1);
    return { cls: 'config', reason: line ?? `exit code ${f.exitCode} (bad usage)` };
  }
  if (f.exitCode === 0) return { cls: 'crash', reason: 'exited 0 but its final checkpoint or output is missing' };
  const last = lastError(f.tail);
  return { cls: 'crash', reason: `exit code ${f.exitCode ?? f.signal}${last ? `: ${last}` : ''}` };
}

function lastMatching(lines: string[], re: RegExp): string | undefined {
  return lines.map((l) => l.trim()).filter((l) => re.test(l)).at(-1);
}

function lastError(lines: string[]): string | undefined {
  return lines
    .map((l) => l.trim())
    .filter((l) => /error|exception|fatal|traceback/i.test(l))
    .at(-1)
    ?.slice(0, 300);
}
