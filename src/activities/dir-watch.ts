/**
 * The paths a running attempt depends on, watched by identity (device and inode), not by name: a run directory
 * removed mid-step, a checkpoint directory replaced by another of the same name, or a lock file another attempt
 * took over all leave a trainer writing where nobody reads. Seen from the path alone, a trainer that recreates
 * its save directory would look fine and "complete" into a directory the run no longer owns.
 */
import { statSync } from 'node:fs';

export interface Watched {
  /** What it is, in words: "the run directory", "the step's lock". */
  what: string;
  path: string;
}

/** How often the paths are looked at while the trainer runs. */
export const DIR_WATCH_MS = 1_000;

interface Seen extends Watched {
  dev: number;
  ino: number;
}

export class DirWatch {
  private seen: Seen[] = [];

  /** Records each path's identity now; a path that does not exist yet is not watched. */
  constructor(paths: Watched[]) {
    for (const p of paths) {
      try {
        const st = statSync(p.path);
        this.seen.push({ ...p, dev: st.dev, ino: st.ino });
      } catch {
        /* not there at launch: nothing to compare with */
      }
    }
  }

  /** The first watched path that vanished or was replaced, as a line for the failure; null while all hold. */
  check(): string | null {
    for (const s of this.seen) {
      let st;
      try {
        st = statSync(s.path);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT' || code === 'ENOTDIR') return `${s.what} ${s.path} was removed while the trainer ran`;
        continue; // EIO, EACCES: the trainer's own writes will say more
      }
      if (st.dev !== s.dev || st.ino !== s.ino) return `${s.what} ${s.path} was replaced while the trainer ran (another file or directory now has its path)`;
    }
    return null;
  }
}
