/**
 * Walking a tree that someone else filled: a checkpoint the trainer wrote, a partial save moved aside, a step's
 * outputs. Three rules, each learnt from a tree that froze a worker (issue 30: `ln -s . iter_0000300/a; ln -s .
 * iter_0000300/b` made the old walk go a/a/…/b/a/… for minutes on the worker's main thread, its heartbeats and
 * `status` stalled; a link to `/` would have walked the machine):
 *
 * - a symbolic link is an entry of its own (lstat), its target is never visited;
 * - the walk stops after `maxEntries` entries and does not descend past `maxDepth` levels, and says so;
 * - it is asynchronous: directories are read and entries lstat'ed through libuv's thread pool in batches, so the
 *   event loop runs between them (heartbeats, queries, the other steps of the worker).
 *
 * Entries come in a fixed order (names sorted within each directory, depth first), so that a digest of them is
 * the same on every walk of the same tree.
 */
import type { Dirent, Stats } from 'node:fs';
import { lstat, opendir, readlink } from 'node:fs/promises';
import { join } from 'node:path';

export interface WalkLimits {
  maxEntries: number;
  maxDepth: number;
}

/**
 * Far above any real checkpoint (Megatron's torch_dist: a few files per rank; 7B on 64 GPUs ≈ 130), far below a
 * tree that takes minutes to list.
 */
export const WALK_LIMITS: WalkLimits = { maxEntries: 1_000_000, maxDepth: 64 };

/**
 * How many entries are lstat'ed at once. Enough to keep libuv's threads busy; few enough that their completions,
 * handled on the main thread, come in small bursts (bench/hostile-walk.ts: the event loop's p99 delay was 19 ms
 * with 256 at once, 5 ms with 32, on a loaded 2-core machine; the walk took as long).
 */
const BATCH = 32;

export interface TreeEntry {
  /** Relative to the root; `.` for the root itself. */
  rel: string;
  type: 'file' | 'dir' | 'link' | 'other';
  size: number;
  mtimeMs: number;
  /** A link's own text (where it points), never followed. */
  target?: string;
}

export interface WalkSummary {
  entries: number;
  /** Why the walk stopped short (`more than 1000000 entries`, `deeper than 64 levels`), or null: it saw everything. */
  truncated: string | null;
}

const typeOf = (st: Stats): TreeEntry['type'] => (st.isSymbolicLink() ? 'link' : st.isDirectory() ? 'dir' : st.isFile() ? 'file' : 'other');

async function entryOf(path: string, rel: string, st: Stats): Promise<TreeEntry> {
  const type = typeOf(st);
  const e: TreeEntry = { rel, type, size: type === 'file' ? st.size : 0, mtimeMs: st.mtimeMs };
  if (type === 'link') e.target = await readlink(path).catch(() => '?');
  return e;
}

/**
 * Visit every entry under `root` (the root first), never through a link. A root that is not there visits nothing.
 * Errors reading a part of the tree (a directory removed meanwhile, one without permission) skip that part.
 */
export async function walkTree(root: string, visit: (e: TreeEntry) => void, limits: WalkLimits = WALK_LIMITS): Promise<WalkSummary> {
  const sum: WalkSummary = { entries: 0, truncated: null };
  let st: Stats;
  try {
    st = await lstat(root);
  } catch {
    return sum;
  }
  sum.entries = 1;
  visit(await entryOf(root, '.', st));
  if (st.isDirectory()) await walkDir(root, '', 1, visit, limits, sum);
  return sum;
}

async function names(dir: string, room: number): Promise<{ names: string[]; more: boolean }> {
  const out: string[] = [];
  let d;
  try {
    d = await opendir(dir);
  } catch {
    return { names: out, more: false };
  }
  let more = false;
  try {
    for await (const ent of d as AsyncIterable<Dirent>) {
      if (out.length >= room) {
        more = true;
        break;
      }
      out.push(ent.name);
    }
  } catch {
    /* removed meanwhile: what was read stands */
  }
  // Breaking out of the loop closes the handle; an error may leave it open.
  await d.close().catch(() => undefined);
  return { names: out.sort(), more };
}

async function walkDir(dir: string, rel: string, depth: number, visit: (e: TreeEntry) => void, limits: WalkLimits, sum: WalkSummary): Promise<void> {
  if (sum.truncated) return;
  if (depth > limits.maxDepth) {
    sum.truncated = `deeper than ${limits.maxDepth} levels at ${rel}`;
    return;
  }
  // One more name than the room left: seeing it is how the walk knows it stopped short.
  const listed = await names(dir, limits.maxEntries - sum.entries + 1);
  for (let i = 0; i < listed.names.length; i += BATCH) {
    const batch = listed.names.slice(i, i + BATCH);
    const stats = await Promise.all(batch.map((n) => lstat(join(dir, n)).catch(() => null)));
    for (const [j, name] of batch.entries()) {
      const s = stats[j];
      if (!s) continue; // gone meanwhile
      if (sum.entries >= limits.maxEntries) {
        sum.truncated = `more than ${limits.maxEntries} entries`;
        return;
      }
      const path = join(dir, name);
      const childRel = rel ? `${rel}/${name}` : name;
      sum.entries += 1;
      visit(await entryOf(path, childRel, s));
      if (s.isDirectory()) await walkDir(path, childRel, depth + 1, visit, limits, sum);
      if (sum.truncated) return;
    }
  }
  if (listed.more) sum.truncated ??= `more than ${limits.maxEntries} entries`;
}

/** The bytes of the regular files under `path` (links and their targets count nothing); 0 when it is gone. */
export async function treeBytes(path: string, limits: WalkLimits = WALK_LIMITS): Promise<{ bytes: number; truncated: string | null }> {
  let bytes = 0;
  const { truncated } = await walkTree(path, (e) => (bytes += e.size), limits);
  return { bytes, truncated };
}
