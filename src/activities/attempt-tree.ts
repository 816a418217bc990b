/**
 * Every process of one attempt, wherever it runs, and how it is stopped.
 *
 * What makes up the attempt: its launch token (`INFIR2_LAUNCH`) in the environment of every process it started,
 * on this host found by scanning /proc (util/process-tree.ts), and on each node by the launcher there, a child
 * subreaper that holds its node's part of the tree whatever sessions the processes make (src/launcher/). Why not a
 * cgroup per attempt: see docs/operations.md "What a stop does".
 *
 * How it is stopped:
 *   graceful  (cancel, worker shutdown, attempt deadline) the launchers get a stop request in the stop file, on the
 *             step's shared directory so that every node's launcher sees it: each SIGTERMs its rank main processes
 *             only, waits for them (Megatron saves and prints `exiting program after receiving SIGTERM.`), then
 *             stops the rest. Here, the attempt's processes on this host are awaited for the allowance the stall
 *             policy gives a save (and the grace and a slack), then killed. A local launcher that cannot be reached
 *             by the file gets SIGTERM (the same stop, with the allowance it was started with); where no launcher
 *             is left, the same sequence is run from here (stopTree).
 *   kill      (a hang: a hung rank cannot save; a vanished directory: a save would land in its replacement) every
 *             process at once: `kill` in the stop file for the other nodes, SIGKILL here.
 * A graceful stop turns into a kill when the attempt goes silent past its stall limit meanwhile (escalate).
 */
import { launcherArgv, removeStopFile, stopFilePath, writeStopRequest, type StopRequest } from '../util/launcher.js';
import { killTree, stopTree, treeAlive, treeMembers } from '../util/process-tree.js';

/** What identifies an attempt's processes and reaches its launchers (recorded in the lock and the GPU claims). */
export interface AttemptTree {
  /** The launch token in their environment. */
  token: string;
  /** The file its launchers poll for a stop request. */
  stopFile: string;
  /** The launchers run inside the command on each node (srun): the local process is never signalled. */
  nodeLaunchers: boolean;
  /** The local launcher (the process the worker started) where it is one; null: per node. */
  launcherPid: number | null;
}

export type StopHow = 'graceful' | 'kill';

/** Time the launchers take beyond the allowance and grace they were given: their polls, SIGKILL, reaping. */
const LAUNCHER_SLACK_MS = 5_000;
const POLL_MS = 200;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function attemptTree(token: string, cwd: string, nodeLaunchers: boolean, launcherPid: number | null): AttemptTree {
  return { token, stopFile: stopFilePath(cwd, token), nodeLaunchers, launcherPid: nodeLaunchers ? null : launcherPid };
}

/** The argv the worker starts: the launcher in front of the command, unless the command runs one on each node. */
export function launchedArgv(argv: string[], nodeLaunchers: boolean, python: string, stopAllowanceSec: number): string[] {
  return nodeLaunchers ? argv : launcherArgv(python, stopAllowanceSec, argv);
}

/** Write a stop request to the tree's launchers; false where its directory cannot take it (gone, read-only). */
export function ask(tree: Pick<AttemptTree, 'stopFile'>, req: StopRequest): boolean {
  try {
    writeStopRequest(tree.stopFile, req);
    return true;
  } catch {
    return false;
  }
}

/** Whether any process of the attempt lives on this host. */
export function attemptAlive(tree: Pick<AttemptTree, 'token'>): boolean {
  return treeAlive(tree.token);
}

/** Every process of the attempt at once, on every node. */
export async function killAttempt(tree: AttemptTree): Promise<void> {
  ask(tree, { mode: 'kill' });
  await killTree(tree.token);
}

/** A stop in progress; `done` settles once no process of the attempt is left on this host. */
export class AttemptStop {
  readonly done: Promise<'gone' | 'killed'>;
  private readonly abort = new AbortController();

  constructor(
    readonly tree: AttemptTree,
    readonly how: StopHow,
    allowanceMs: number,
    graceMs: number,
    private readonly note: (msg: string) => void,
  ) {
    this.done = how === 'kill' ? killAttempt(tree).then(() => 'killed' as const) : this.graceful(allowanceMs, graceMs);
  }

  /** A graceful stop becomes a kill (the attempt went silent past its limit while it was to save). */
  escalate(why: string): void {
    if (this.how === 'kill' || this.abort.signal.aborted) return;
    this.note(`${why}: killing every process of the attempt`);
    this.abort.abort();
  }

  private async graceful(allowanceMs: number, graceMs: number): Promise<'gone' | 'killed'> {
    const { tree } = this;
    if (!tree.nodeLaunchers && !launcherAlive(tree)) {
      // Its launcher was killed from outside (or the lock is older than launchers): the same stop, from here.
      return stopTree(tree.token, { allowanceMs, graceMs, abort: this.abort.signal });
    }
    if (!ask(tree, { mode: 'stop', allowanceSec: Math.ceil(allowanceMs / 1000) })) {
      this.note(`could not write the stop file ${tree.stopFile}${tree.launcherPid !== null ? ': SIGTERM to the launcher' : ''}`);
      // The local launcher stops its tree on SIGTERM too, with the allowance it was started with.
      try {
        if (tree.launcherPid !== null) process.kill(tree.launcherPid, 'SIGTERM');
      } catch {
        /* it ended meanwhile */
      }
    }
    const deadline = Date.now() + allowanceMs + graceMs + LAUNCHER_SLACK_MS;
    while (Date.now() < deadline && !this.abort.signal.aborted) {
      if (!attemptAlive(tree)) return 'gone';
      await sleep(POLL_MS);
    }
    if (!this.abort.signal.aborted) this.note(`the attempt's processes outlived the stop's ${Math.round((allowanceMs + graceMs) / 1000)} s: killing them`);
    await killAttempt(tree);
    return 'killed';
  }
}

/** The local launcher still runs (found by the token, so a reused pid is not taken for it). */
function launcherAlive(tree: AttemptTree): boolean {
  return tree.launcherPid !== null && treeMembers(tree.token).includes(tree.launcherPid);
}

/** After the attempt: its stop file goes (a launcher that is still there would read it as a new request). */
export function forgetStopFile(tree: AttemptTree): void {
  try {
    removeStopFile(tree.stopFile);
  } catch {
    /* its directory went */
  }
}
