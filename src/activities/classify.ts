/**
 * Classify a finished attempt into a failure class (src/plan/types.ts FailureClass). Pure: the supervisor
 * passes what it saw; the workflow spends the retry budget of the class.
 */
import type { FailureClass } from '../plan/types.js';
import { storageErrorInLine } from '../rundir/storage.js';

export interface ExitFacts {
  exitCode: number | null;
  signal: string | null;
  /** Why the supervisor itself stopped the process, if it did. */
  stoppedBy: 'stall' | 'cancel' | 'shutdown' | 'timeout' | 'vanished' | null;
  /** For a stall: how long it was silent and the limit it broke (supervise.ts). */
  stall?: string | null;
  /** The trainer printed Megatron's "exiting program after receiving SIGTERM". */
  sawSigtermExit: boolean;
  /** Last lines of output, oldest first. */
  tail: string[];
  /** Kills by the kernel's OOM killer counted during the attempt, and where (see oom-kills.ts). */
  oomKills?: { count: number; file: string };
}

// Also what Slurm prints when its cgroup OOM-kills a rank on another node (`slurmstepd: error: Detected 1 oom_kill
// event in StepId=…`, `srun: error: node: task 3: Out Of Memory`), which no counter on this node sees.
const OOM = /CUDA out of memory|OutOfMemoryError|torch\.OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|Cannot allocate memory|MemoryError\b|out of memory|\boom[_-]kill event|\bOOM Killed\b/i;
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
/**
 * A collective that never completed: what PyTorch's NCCL watchdog, its blocking wait, gloo, the c10d store and
 * torchrun's rendezvous print when a peer stops answering. Most telling first: the reason is the last line
 * that matches the first pattern that matches at all.
 */
const TIMEOUT = [
  // `[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, ...,
  // Timeout(ms)=600000) ran for 600013 milliseconds before timing out.` (older torch: `Caught collective ...`;
  // also inside `Process group watchdog thread terminated with exception: ...` and `c10::DistBackendError`)
  /\bcollective operation timeout\b/i,
  // TORCH_NCCL_BLOCKING_WAIT=1: `Work WorkNCCL(...) timed out in blocking wait`, `... timed out in call to wait()`
  /\bWorkNCCL\(.*\) timed out\b/,
  // `[PG 3 Rank 4] Timeout at NCCL work: 9141, last enqueued NCCL work: 9141, last completed NCCL work: 9140.`
  /\bTimeout at NCCL work\b/,
  /\bDistBackendError\b.*\b(?:timed out|timeout)\b/i,
  // The watchdog itself wedged (usually a stuck CUDA stream): `[PG 0 Rank 0] Heartbeat monitor timed out!
  // Process will be terminated after dumping debug info.`, `ProcessGroupNCCL's watchdog got stuck for 480 seconds
  // without making progress in monitoring enqueued collectives.`
  /\bHeartbeat monitor timed out\b/,
  /\bwatchdog got stuck for \d+ seconds\b/,
  // gloo: `[.../gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete`
  /\bTimed out waiting \d+ ?ms for (?:send|recv) operation\b/i,
  // A peer that never arrived: `Timed out initializing process group in store based barrier on rank 1 ...`,
  // `torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/3 clients joined.`,
  // `DistStoreError: Socket Timeout`, `DistNetworkError: The client socket has timed out after 300000ms ...`
  /\bTimed out initializing process group\b/,
  /\bDist(?:Store|Network)Error\b.*\b(?:timed out|timeout)\b/i,
  // torchrun: `torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError`
  /\bRendezvousTimeoutError\b/,
];
/**
 * What the watchdog prints when it takes the process down after a timeout or an error: a hang unless the tail
 * shows an NCCL error (a peer that died, a broken link), which is a crash.
 */
const ABORTED = [
  // `NCCL communicator was aborted on rank 3. Original reason for failure was: ...`
  /\bNCCL communicator was aborted\b/,
  // `[Rank 4] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, ...`
  /\bSome NCCL operations have failed or timed out\b/,
];
// torchrun: `Signal 9 (SIGKILL) received by PID 4242`; srun: `error: ... task 3: Killed`; a shell: `Killed`.
const KILLED = /\bSignal 9 \(SIGKILL\)|\bSIGKILL\b|(?:^|: |\d+ )Killed\b/;
const NCCL_ERROR = /\bNCCL error\b|\bnccl(?:Remote|System|Internal|UnhandledCuda|InvalidUsage)Error\b|remote process exited/i;

export function classifyExit(f: ExitFacts): { cls: FailureClass; reason: string } {
  const text = f.tail.join('\n');
  if (f.stoppedBy === 'stall') return { cls: 'hang', reason: `${f.stall ?? 'no progress within the stall timeout'}; the process was killed` };
  if (f.stoppedBy === 'timeout') return { cls: 'hang', reason: 'the attempt exceeded its time limit; the process was killed' };
  if (f.stoppedBy === 'shutdown') return { cls: 'preempted', reason: 'the worker shut down; the trainer was stopped to checkpoint' };
  // The supervisor's line says which path; this is the class and its fallback words.
  if (f.stoppedBy === 'vanished') return { cls: 'storage', reason: "a directory of the run vanished while the trainer ran; the process was stopped" };
  // A full or read-only disk under a save: waiting for space helps, retrying at once does not.
  const storage = f.tail.map((l) => l.trim()).filter((l) => storageErrorInLine(l)).at(-1);
  if (storage) return { cls: 'storage', reason: storage.slice(0, 300) };
  if (OOM.test(text)) return { cls: 'oom', reason: lastMatching(f.tail, OOM) ?? 'out of memory' };
  // The OOM killer's SIGKILL reaches the trainer itself, or a rank under torchrun/srun, which then reports it.
  const killed = f.signal === 'SIGKILL' || f.exitCode === 137 || f.tail.some((l) => KILLED.test(l));
  if (killed && f.oomKills && f.oomKills.count > 0) {
    return { cls: 'oom', reason: `killed by the kernel's OOM killer (${f.oomKills.count} OOM kill${f.oomKills.count > 1 ? 's' : ''} in ${f.oomKills.file} during the attempt)` };
  }
  if (f.signal === 'SIGKILL' || f.signal === 'SIGTERM' || f.signal === 'SIGINT' || f.signal === 'SIGHUP') {
    return { cls: 'preempted', reason: `killed by ${f.signal} from outside the supervisor` };
  }
  if (f.exitCode === 0 && f.sawSigtermExit) return { cls: 'preempted', reason: 'the trainer saved and exited after SIGTERM' };
  if (f.exitCode === 2 || CONFIG.some((re) => f.tail.some((l) => re.test(l.trim())))) {
    const line = f.tail.map((l) => l.trim()).filter((l) => CONFIG.some((re) => re.test(l))).at(-1);
    return { cls: 'config', reason: line ?? `exit code ${f.exitCode} (bad usage)` };
  }
  // After config: a rank that died of a bad argument or a missing file leaves its peers waiting in a collective
  // until it times out; that is the configuration error, and retrying cannot fix it.
  const timeout = firstLastMatching(f.tail, TIMEOUT) ?? (f.tail.some((l) => NCCL_ERROR.test(l)) ? undefined : firstLastMatching(f.tail, ABORTED));
  if (timeout) return { cls: 'hang', reason: timeout.slice(0, 300) };
  if (f.exitCode === 0) return { cls: 'crash', reason: 'exited 0 but its final checkpoint or output is missing' };
  const last = lastError(f.tail);
  return { cls: 'crash', reason: `exit code ${f.exitCode ?? f.signal}${last ? `: ${last}` : ''}` };
}

function lastMatching(lines: string[], re: RegExp): string | undefined {
  return lines.map((l) => l.trim()).filter((l) => re.test(l)).at(-1);
}

/** The last line matching the first of `res` that matches any line. */
function firstLastMatching(lines: string[], res: RegExp[]): string | undefined {
  for (const re of res) {
    const line = lastMatching(lines, re);
    if (line !== undefined) return line;
  }
  return undefined;
}

function lastError(lines: string[]): string | undefined {
  return lines
    .map((l) => l.trim())
    .filter((l) => /error|exception|fatal|traceback/i.test(l))
    .at(-1)
    ?.slice(0, 300);
}
