/**
 * What a finished step produced, and whether it is still there unchanged. A step's fingerprint covers its final
 * checkpoint directory (or its output files): every file's relative path, size and modification time, and every
 * symbolic link's own text (a link is never followed: rundir/tree-walk.ts). `resume` keeps a step only when its
 * fingerprint still matches, so deleted or rewritten outputs are rerun, never trusted.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { PlanStep } from '../plan/types.js';
import { iterDirName } from './checkpoints.js';
import { walkTree, type TreeEntry } from './tree-walk.js';

/** One line per entry, as the walk that predates links' own lines wrote them for files (the digests stay the same). */
function line(e: TreeEntry): string | null {
  if (e.type === 'dir') return null;
  if (e.type === 'link') return `${e.rel}\t->\t${e.target}`;
  return `${e.rel}\t${e.size}\t${Math.floor(e.mtimeMs)}`;
}

/** The paths that make up a step's result. */
export function outputPaths(step: PlanStep): string[] {
  const c = step.completion;
  return c.kind === 'checkpoint' ? [join(c.dir, iterDirName(c.iteration))] : c.paths;
}

/** A digest of the step's outputs, or null when any of them is missing. */
export async function fingerprintOutputs(step: PlanStep): Promise<string | null> {
  const h = createHash('sha256');
  for (const p of outputPaths(step)) {
    if (!existsSync(p)) return null;
    // Hashed as it is walked (a 100,000-file checkpoint is never one string): `<path>\n<line>\n<line>…\n`.
    h.update(`${p}\n`);
    let first = true;
    const add = (l: string) => {
      h.update(first ? l : `\n${l}`);
      first = false;
    };
    const { truncated } = await walkTree(p, (e) => {
      const l = line(e);
      if (l !== null) add(l);
    });
    // A tree past the walk's bound is fingerprinted by its first part (the same part on every walk), and says so.
    if (truncated) add(`truncated: ${truncated}`);
    h.update('\n');
  }
  return h.digest('hex').slice(0, 32);
}
