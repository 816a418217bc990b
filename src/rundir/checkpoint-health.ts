/**
 * Checkpoints that cannot be used: damaged ones (marked bad: moved aside with a reason file, never deleted, and
 * the tracker moved back to the previous complete iteration so that Megatron, slime and the reference trainer
 * all resume from there), and partial saves moved aside earlier (removed once a complete checkpoint at or past
 * their iteration exists: until then they may be all a person has to debug the crash, after that they only keep
 * a full disk full).
 */
import { existsSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../util/atomic-write.js';
import { readFileSafe } from '../util/safe-fs.js';
import { inspectCheckpointDir, iterDirName, TRACKER_FILE } from './checkpoints.js';
import { rm } from 'node:fs/promises';
import { treeBytes } from './tree-walk.js';

/** Inside a checkpoint moved aside as bad: why, when, and by which step. */
export const BAD_REASON_FILE = 'INFIR2_BAD_CHECKPOINT.txt';
/** In the checkpoint root: attempts that failed before their first iteration after loading an iteration. */
const LOAD_FAILURES_FILE = '.infir2-load-failures.json';

const BAD_DIR = /^iter_(\d{7,})\.bad-(\d+)$/;
const PARTIAL_DIR = /^iter_(\d{7,})\.partial-(\d+)$/;

export interface BadCheckpoint {
  iteration: number;
  /** Where it was moved. */
  path: string;
  reason: string;
}

export interface MarkedBad {
  movedTo: string;
  /** The complete iteration the next attempt loads, or null: none is left and the step starts fresh. */
  fallback: number | null;
}

/**
 * Move a damaged complete checkpoint aside (`iter_N.bad-<stamp>`, with a reason file) and point the tracker at
 * the newest complete iteration below it, written atomically; with none left the tracker is moved aside too.
 */
export function markBad(dir: string, iteration: number, reason: string, stamp: string): MarkedBad {
  const from = join(dir, iterDirName(iteration));
  const to = `${from}.bad-${stamp}`;
  renameSync(from, to);
  // The trainer wrote this directory: a link it holds under the reason file's name is replaced, not followed.
  writeFileAtomic(join(to, BAD_REASON_FILE), `${reason}\nmarked bad at ${new Date().toISOString()}; never loaded again, never deleted by infir2\n`);
  const fallback = inspectCheckpointDir(dir).complete.filter((it) => it < iteration).at(-1) ?? null;
  const tracker = join(dir, TRACKER_FILE);
  if (fallback !== null) writeFileAtomic(tracker, String(fallback));
  else if (existsSync(tracker)) renameSync(tracker, `${tracker}.bad-${stamp}`);
  clearLoadFailures(dir);
  return { movedTo: to, fallback };
}

/** The checkpoints of `dir` marked bad, oldest iteration first. */
export function badCheckpoints(dir: string): BadCheckpoint[] {
  if (!existsSync(dir)) return [];
  const out: BadCheckpoint[] = [];
  for (const name of readdirSync(dir)) {
    const m = BAD_DIR.exec(name);
    if (!m) continue;
    const path = join(dir, name);
    let reason = 'no reason recorded';
    try {
      reason = readFileSafe(join(path, BAD_REASON_FILE), { maxBytes: 64 * 1024 })?.text.split('\n')[0] ?? reason;
    } catch {
      /* not a file of ours (a link, a FIFO): no reason to show */
    }
    out.push({ iteration: Number(m[1]), path, reason });
  }
  return out.sort((a, b) => a.iteration - b.iteration);
}

/**
 * Count an attempt that failed before its first iteration after loading `iteration`; returns how many such
 * attempts in a row that iteration has now seen. Kept in the checkpoint root, so that it survives a worker
 * change and `infir2 resume`.
 */
export function recordLoadFailure(dir: string, iteration: number): number {
  const file = join(dir, LOAD_FAILURES_FILE);
  let prev: { iteration: number; count: number } | null = null;
  try {
    prev = JSON.parse(readFileSafe(file, { maxBytes: 4096 })?.text ?? 'null') as { iteration: number; count: number } | null;
  } catch {
    /* first failure */
  }
  const count = prev?.iteration === iteration ? prev.count + 1 : 1;
  writeFileAtomic(file, JSON.stringify({ iteration, count }));
  return count;
}

/** An attempt got past loading: the checkpoint it loaded is fine. */
export function clearLoadFailures(dir: string): void {
  rmSync(join(dir, LOAD_FAILURES_FILE), { force: true });
}

export interface PartialSaves {
  /** Removed now: a complete checkpoint at or past their iteration exists. */
  removed: string[];
  /** Still kept, and the bytes they hold (they count against a full disk). */
  kept: string[];
  keptBytes: number;
}

/**
 * Remove moved-aside partial saves that a complete checkpoint has superseded; report the rest. Asynchronous (a
 * partial save may hold 100,000 files): removing and sizing them never holds the worker's event loop, and neither
 * follows a link out of the save.
 */
export async function prunePartials(dir: string): Promise<PartialSaves> {
  const out: PartialSaves = { removed: [], kept: [], keptBytes: 0 };
  if (!existsSync(dir)) return out;
  const latest = inspectCheckpointDir(dir).latestComplete ?? -1;
  for (const name of readdirSync(dir)) {
    const m = PARTIAL_DIR.exec(name);
    if (!m) continue;
    const path = join(dir, name);
    if (Number(m[1]) <= latest) {
      await rm(path, { recursive: true, force: true });
      out.removed.push(path);
    } else {
      out.kept.push(path);
      out.keptBytes += (await treeBytes(path)).bytes;
    }
  }
  return out;
}
