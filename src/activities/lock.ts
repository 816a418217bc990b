/**
 * An exclusive lock on a checkpoint directory, so two trainers never write into one.
 *
 * The lock file records who holds it: host, the supervising worker's pid, and the trainer: its launch token, which
 * every process of the attempt carries, and the stop file its launchers poll (attempt-tree.ts). A new attempt on the
 * same host that finds the lock held by a live trainer (a zombie attempt left by a worker that died) stops every
 * process of it before taking over, gracefully (the ranks save where they stand): that is the guarantee that an
 * earlier attempt's processes are gone before a new one starts. A lock held from another host is taken over only
 * when its lease (refreshed while the holder is alive) has expired; its launchers, wherever they still run, are
 * told to kill their trees.
 *
 * Killing a trainer's process group does not stop work it handed to a cluster (slime's `ray job submit` client
 * leaves its Ray job training). So the lock also records the step's stop command (`ray job stop <id>`), and
 * whoever takes over a lock its holder did not release runs that command before training in the directory.
 */
import { closeSync, lstatSync, lutimesSync, openSync, unlinkSync, writeSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { writeFileAtomic } from '../util/atomic-write.js';
import { DEFAULT_KILL_GRACE_MS, pidAlive, processStartTicks, terminateGroup, trainerGroupAlive } from '../util/process-group.js';
import { ask, AttemptStop, attemptAlive, type AttemptTree } from './attempt-tree.js';
import { euid } from '../util/process-identity.js';
import { readFileSafe } from '../util/safe-fs.js';

export const LOCK_FILE = '.infir2.lock';
/** A lock from another host whose lease was not refreshed for this long is stale. */
export const LOCK_LEASE_MS = 120_000;
/** A lock file that cannot be read yet (its creator is between create and write) is left alone this long. */
const UNREADABLE_GRACE_MS = 5_000;

export interface LockInfo {
  host: string;
  workerPid: number;
  /** The process the worker launched (the launcher), once launched. */
  pgid: number | null;
  /** Its start time, to tell it from a reused pid. */
  startTicks: number | null;
  /** Every process of the trainer, and its launchers' stop file (absent: a lock written before, judged by `pgid`'s group). */
  tree?: AttemptTree | null;
  owner: string;
  since: string;
  /** Unique per acquisition: release removes only the lock it took. */
  token: string;
  /** What stops the trainer's work outside its process group, already filled in for its attempt. */
  stop?: StopCommand | null;
}

export interface StopCommand {
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  /** Asked after the stop until it prints nothing: the stopped work is gone (a cancelled job's ranks saving). */
  untilGone?: string[];
}

export interface AcquireOptions {
  /** Hears what was found and done to an earlier holder. */
  onTakeover?: (msg: string) => void;
  /** SIGTERM → SIGKILL grace for what is left of a zombie trainer once its ranks exited, ms. @default 30000 */
  killGraceMs?: number;
  /** How long a zombie trainer's ranks get to save and exit after SIGTERM, ms. @default killGraceMs */
  stopAllowanceMs?: number;
  /** Runs an earlier holder's stop command; failures are the callee's to report. */
  runStop?: (stop: StopCommand) => Promise<void>;
}

export class LockBusyError extends Error {}

export class DirLock {
  private constructor(
    readonly file: string,
    private info: LockInfo,
  ) {}

  /**
   * Stop, as a takeover would, the trainer a dead worker of this host left holding `dir` (its tree alive, its worker
   * gone), without taking the lock. The next attempt calls it before it waits for GPUs: the orphan holds the step's
   * GPUs, so the attempt would otherwise wait, unsupervised, for the orphan to finish the whole stage. Another
   * user's lock, another host's, or one whose worker lives is left to `acquire`.
   */
  static async stopOrphan(dir: string, opts: AcquireOptions = {}): Promise<boolean> {
    const held = readLock(join(dir, LOCK_FILE));
    if (!held || held.host !== hostname() || held.fileUid !== euid() || held.pgid === null) return false;
    if (held.workerPid === process.pid || pidAlive(held.workerPid) || !trainerAlive(held)) return false;
    opts.onTakeover?.(`stopping the trainer of ${held.owner}, whose worker (pid ${held.workerPid}) is gone, before waiting for its GPUs`);
    await stopHolder(held, opts);
    return true;
  }

  /** Take the lock on `dir`, clearing out a dead or zombie holder (its process group, then its stop command). */
  static async acquire(dir: string, owner: string, opts: AcquireOptions = {}): Promise<DirLock> {
    const { onTakeover, runStop } = opts;
    const file = join(dir, LOCK_FILE);
    const info: LockInfo = { host: hostname(), workerPid: process.pid, pgid: null, startTicks: null, owner, since: new Date().toISOString(), token: randomUUID(), stop: null };
    for (let tries = 0; tries < 50; tries++) {
      try {
        const fd = openSync(file, 'wx');
        try {
          writeSync(fd, JSON.stringify(info));
        } catch (err) {
          // A full disk: an empty lock file left behind would read as a contender's and stall the next attempt.
          closeSync(fd);
          unlinkSync(file);
          throw err;
        }
        closeSync(fd);
        return new DirLock(file, info);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const held = readLock(file);
      if (held) {
        // Another user's lock (a checkpoint root on shared storage): never its process group or its stop command
        // taken on its word; waited out like another host's, by its lease.
        const foreign = held.fileUid !== euid();
        if (held.host === info.host && !foreign) {
          if (held.pgid !== null && trainerAlive(held)) {
            onTakeover?.(`terminating a trainer of an earlier attempt (${held.owner}, ${held.tree ? `launch ${held.tree.token}` : `process group ${held.pgid}`})`);
            await stopHolder(held, opts);
          } else if (held.pgid === null && held.workerPid !== process.pid && pidAlive(held.workerPid)) {
            throw new LockBusyError(`${dir} is locked by worker pid ${held.workerPid} (${held.owner}), which is still launching it`);
          }
        } else if (Date.now() - mtimeMs(file) < LOCK_LEASE_MS) {
          throw new LockBusyError(`${dir} is locked by ${held.owner} on ${held.host}${foreign ? ` (a lock file of uid ${held.fileUid})` : ''}`);
        }
        onTakeover?.(`taking over a stale lock of ${held.owner} on ${held.host}`);
        // Its launchers may still run on nodes of their own (an srun job whose submit host died): they kill theirs.
        if (held.host !== info.host && held.tree && !foreign) ask(held.tree, { mode: 'kill' }); // a directory gone: nothing to reach
        if (held.stop?.argv.length && runStop && !foreign) {
          onTakeover?.(`stopping the work of ${held.owner}: ${held.stop.argv.join(' ')}`);
          await runStop(held.stop);
        }
      } else if (Date.now() - mtimeMs(file) < UNREADABLE_GRACE_MS) {
        // Just created by a contender that has not written it yet: wait for it rather than race it.
        await new Promise((r) => setTimeout(r, 200));
        continue;
      }
      // Stale: remove and race for a fresh create; only one contender's `wx` open can win.
      try {
        unlinkSync(file);
      } catch {
        /* someone else removed it first */
      }
    }
    throw new LockBusyError(`could not lock ${dir}`);
  }

  /** Record the trainer (its launcher's pid, every process of it) and stop command, so that a later attempt can find and stop it. */
  setTrainer(pid: number, tree: AttemptTree | null, stop: StopCommand | null = null): void {
    this.info = { ...this.info, pgid: pid, startTicks: processStartTicks(pid), tree, stop };
    writeFileAtomic(this.file, JSON.stringify(this.info));
  }

  /** Refresh the lease (the file's mtime). */
  touch(): void {
    const now = new Date();
    try {
      lutimesSync(this.file, now, now); // never through a link put in its place
    } catch {
      /* the lock was taken over: the next release is a no-op */
    }
  }

  release(): void {
    const held = readLock(this.file);
    if (held && held.token === this.info.token) {
      try {
        unlinkSync(this.file);
      } catch {
        /* already gone */
      }
    }
  }
}

/** The lock's record and the uid that wrote it; null while unreadable (being written, or not a file of ours: a link, a FIFO). */
function readLock(file: string): (LockInfo & { fileUid: number }) | null {
  try {
    const r = readFileSafe(file, { maxBytes: 1024 * 1024 });
    if (!r) return null;
    const info = JSON.parse(r.text) as LockInfo;
    if (info.tree && !validTree(info.tree)) info.tree = null;
    return { ...info, fileUid: r.stat.uid };
  } catch {
    return null;
  }
}

function mtimeMs(file: string): number {
  try {
    return lstatSync(file).mtimeMs;
  } catch {
    return 0;
  }
}

/** A lock file is input from whoever could write the directory: a tree is used only when it has the shape of one. */
function validTree(t: unknown): t is AttemptTree {
  const x = t as AttemptTree | null;
  return !!x && typeof x.token === 'string' && /^[0-9a-z]+$/.test(x.token) && typeof x.stopFile === 'string' && typeof x.nodeLaunchers === 'boolean';
}

function trainerAlive(held: LockInfo): boolean {
  if (held.tree) return attemptAlive(held.tree);
  return held.pgid !== null && trainerGroupAlive(held.pgid, held.startTicks);
}

/** Stop a holder's trainer as a takeover does: its tree gracefully (it may save), else its process group. */
async function stopHolder(held: LockInfo, opts: AcquireOptions): Promise<void> {
  const killGraceMs = opts.killGraceMs ?? DEFAULT_KILL_GRACE_MS;
  if (held.tree) await new AttemptStop(held.tree, 'graceful', opts.stopAllowanceMs ?? killGraceMs, killGraceMs, (m) => opts.onTakeover?.(m)).done;
  else if (held.pgid !== null) await terminateGroup(held.pgid, killGraceMs);
}
