/**
 * Will the next checkpoint fit? Checked while the trainer runs, so that `status` warns before a save fails
 * half-written: the room left on the checkpoint root's file system against the size of the newest complete
 * checkpoint (what the next save will write again, give or take). The checkpoint is sized by rundir/tree-walk.ts:
 * asynchronously, never through a link, bounded; a tree past the bound is sized by what was seen (a lower bound,
 * still enough to warn).
 */
import { join } from 'node:path';
import { inspectCheckpointDir, iterDirName } from '../rundir/checkpoints.js';
import { formatBytes, freeBytes } from '../rundir/storage.js';
import { treeBytes } from '../rundir/tree-walk.js';

/** Re-read the free space this often, ms: statfs is cheap, but a busy root is not worth asking every tick. */
export const SAVE_ROOM_CHECK_MS = 15_000;

export class SaveRoom {
  private sizedIteration: number | null = null;
  private size = 0;

  constructor(private readonly dir: string) {}

  /** A warning when the free space is below the newest checkpoint's size; null when it fits or nothing is known. */
  async check(): Promise<string | null> {
    try {
      return await this.measure();
    } catch {
      return null; // it runs beside the watchdog: an unreadable root must not take the worker down
    }
  }

  private async measure(): Promise<string | null> {
    const latest = inspectCheckpointDir(this.dir).latestComplete;
    if (latest === null) return null;
    if (latest !== this.sizedIteration) {
      this.size = (await treeBytes(join(this.dir, iterDirName(latest)))).bytes;
      this.sizedIteration = latest;
    }
    const free = freeBytes(this.dir);
    if (free === null || this.size === 0 || free >= this.size) return null;
    return `the next save will not fit: ~${formatBytes(this.size)} (checkpoint ${latest}), ${formatBytes(free)} free on ${this.dir}`;
  }
}
