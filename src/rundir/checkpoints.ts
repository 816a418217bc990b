/**
 * Megatron-layout checkpoint inspection: which iterations are complete, which directory is a partial save.
 * Complete means: `iter_N/metadata.json` exists and the tracker (`latest_checkpointed_iteration.txt`, written
 * by rank 0 after every rank finished) has reached N (docs/infir2-recipe.md §3.1). An `iter_*` newer than the
 * tracker, or one without metadata.json, is a crash during save and must never be loaded.
 */
import { existsSync, readdirSync, renameSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { iterDirName } from '../plan/types.js';
import { readFileSafe, UnsafeFileError } from '../util/safe-fs.js';

export const TRACKER_FILE = 'latest_checkpointed_iteration.txt';
const ITER_DIR = /^iter_(\d{7,})$/;

export { iterDirName };

export interface CheckpointInspection {
  dir: string;
  /** The tracker's value; 'release' for a converted base checkpoint; null when absent or unreadable. */
  tracker: number | 'release' | null;
  /** Complete iterations, ascending. */
  complete: number[];
  /** The newest complete iteration (what a resume loads), or null. */
  latestComplete: number | null;
  /** Iteration directories that are not complete (partial saves), ascending. */
  partial: number[];
}

function readTracker(dir: string): number | 'release' | null {
  let text: string;
  try {
    // The trainer's file: a link is followed, but a FIFO (which would block the worker) or a huge file is no tracker.
    text = readFileSafe(join(dir, TRACKER_FILE), { maxBytes: 4096, follow: true })?.text.trim() ?? '';
  } catch (err) {
    if (err instanceof UnsafeFileError) return null;
    throw err;
  }
  if (!text) return null;
  if (text === 'release') return 'release';
  return /^\d+$/.test(text) ? Number(text) : null;
}

export function inspectCheckpointDir(dir: string): CheckpointInspection {
  const empty: CheckpointInspection = { dir, tracker: null, complete: [], latestComplete: null, partial: [] };
  if (!existsSync(dir) || !statSync(dir).isDirectory()) return empty;
  const tracker = readTracker(dir);
  const limit = typeof tracker === 'number' ? tracker : -1;
  const complete: number[] = [];
  const partial: number[] = [];
  for (const name of readdirSync(dir)) {
    const m = ITER_DIR.exec(name);
    if (!m) continue;
    const it = Number(m[1]);
    // Iteration 0 is never loadable: Megatron asserts `iteration > 0 or release` when it reads the tracker.
    const ok = it > 0 && it <= limit && existsSync(join(dir, name, 'metadata.json'));
    (ok ? complete : partial).push(it);
  }
  complete.sort((a, b) => a - b);
  partial.sort((a, b) => a - b);
  return { dir, tracker, complete, partial, latestComplete: complete.at(-1) ?? null };
}

/**
 * Move partial saves newer than the newest complete iteration out of the way (renamed, never deleted), so
 * that a resumed trainer neither loads nor trips over them when it saves the same iteration again.
 * Returns the names it moved.
 */
export function quarantinePartials(inspection: CheckpointInspection, stamp: string): string[] {
  const moved: string[] = [];
  const floor = inspection.latestComplete ?? -1;
  for (const it of inspection.partial) {
    if (it <= floor) continue;
    const from = join(inspection.dir, iterDirName(it));
    const to = `${from}.partial-${stamp}`;
    renameSync(from, to);
    moved.push(to);
  }
  return moved;
}
