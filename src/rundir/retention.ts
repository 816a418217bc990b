/**
 * Checkpoint retention: which complete checkpoints of a step stay on disk, deleting the rest as newer ones are
 * saved, without ever racing a reader.
 *
 * Kept, whatever the policy: the newest complete checkpoint (what a resume loads), the protected iterations (phase
 * boundaries and finals that later steps load), and any iteration a reader has pinned (`.infir2-pins/`: a fork's
 * decay while its first attempt loads the source run's checkpoint). The protocol with readers: a reader writes its
 * pin, then checks that the checkpoint is still there; the pruner renames the doomed directory aside, then checks
 * for pins, and renames it back if one appeared. Whichever comes second sees the other: a reader never loads a
 * checkpoint that is being deleted, and a pinned one is never deleted. Deletions are appended to
 * `.infir2-retention.jsonl` in the root (what `fork` and `resume --dry-run` read).
 */
import { existsSync, lstatSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { RetentionSpec } from '../plan/types.js';
import { appendFileSafe, readFileSafe } from '../util/safe-fs.js';
import { inspectCheckpointDir, iterDirName } from './checkpoints.js';

export const PINS_DIR = '.infir2-pins';
export const RETENTION_RECORD = '.infir2-retention.jsonl';
const DELETING = /^iter_\d{7,}\.deleting-/;

export interface Deletion {
  iteration: number;
  deletedAt: string;
  policy: string;
  by: string;
}

/** The complete iterations the policy lets go, oldest first. Pure. */
export function retentionVictims(
  complete: readonly number[],
  spec: Pick<RetentionSpec, 'last' | 'every' | 'protect' | 'awaitEval'>,
  pinned: ReadonlySet<number> = new Set(),
  evaluated: (iteration: number) => boolean = () => true,
): number[] {
  const keep = new Set<number>(spec.protect);
  // A checkpoint waiting for its evaluation (queued, or being read) is a reader's too.
  const awaiting = (it: number) => !!spec.awaitEval && it % spec.awaitEval.every === 0 && !evaluated(it);
  const newest = complete.at(-1);
  if (newest !== undefined) keep.add(newest);
  if (spec.last === null && spec.every === null) return [];
  if (spec.last !== null) for (const it of complete.slice(-spec.last)) keep.add(it);
  if (spec.every !== null) for (const it of complete) if (it % spec.every === 0) keep.add(it);
  return complete.filter((it) => !keep.has(it) && !pinned.has(it) && !awaiting(it));
}

/** Iterations pinned by a reader. */
export function pinnedIterations(root: string): Set<number> {
  const dir = join(root, PINS_DIR);
  if (!existsSync(dir)) return new Set();
  return new Set(readdirSync(dir).flatMap((n) => (/^iter_(\d{7,})\./.exec(n) ? [Number(/^iter_(\d{7,})\./.exec(n)![1])] : [])));
}

/** The record's size past which it is not ours (a line per deletion: millions of checkpoints). */
const MAX_RECORD_BYTES = 64 * 1024 * 1024;

/**
 * What retention has deleted from a root, oldest first. Only what explains a missing checkpoint, so a record that
 * is not ours (a link, a FIFO, another user's file) or a line that is not a deletion is passed over, never thrown.
 */
export function deletions(root: string): Deletion[] {
  let text: string;
  try {
    text = readFileSafe(join(root, RETENTION_RECORD), { maxBytes: MAX_RECORD_BYTES })?.text ?? '';
  } catch {
    return [];
  }
  return text.split('\n').flatMap((l) => {
    try {
      const d = JSON.parse(l) as Deletion;
      return typeof d?.iteration === 'number' && typeof d.deletedAt === 'string' ? [d] : [];
    } catch {
      return [];
    }
  });
}

export class CheckpointGoneError extends Error {}

/**
 * Pin `iteration` of `root` for `owner` and make sure it is still there (complete); returns the release. Throws
 * CheckpointGoneError, naming what the retention record says, when it is not.
 */
export async function pinCheckpoint(root: string, iteration: number, owner: string): Promise<() => void> {
  // Never create a root that is not there: that is a missing checkpoint, not a place to pin in.
  if (!existsSync(root)) throw new CheckpointGoneError(`checkpoint ${iteration} of ${root} is not there (no such directory)`);
  const pins = join(root, PINS_DIR);
  if (!existsSync(pins)) mkdirSync(pins);
  // A link there would put pins where the pruner of this root never looks.
  if (!lstatSync(pins).isDirectory()) throw new Error(`${pins} is not a directory (a symbolic link?): refused, pins live in the root itself`);
  const pin = join(pins, `${iterDirName(iteration)}.${randomUUID()}`);
  writeFileSync(pin, `${JSON.stringify({ owner, since: new Date().toISOString() })}\n`, { flag: 'wx' });
  const release = () => rmSync(pin, { force: true });
  // A pruner that renamed it aside before seeing the pin renames it back: look again before giving up.
  for (let i = 0; i < 5; i += 1) {
    if (inspectCheckpointDir(root).complete.includes(iteration)) return release;
    await new Promise((r) => setTimeout(r, 200));
  }
  release();
  const gone = deletions(root).find((d) => d.iteration === iteration);
  throw new CheckpointGoneError(
    gone
      ? `checkpoint ${iteration} of ${root} was deleted by its retention policy (${gone.policy}) at ${gone.deletedAt}`
      : `checkpoint ${iteration} of ${root} is not there (no complete ${iterDirName(iteration)})`,
  );
}

/**
 * Apply the policy to `root` now: delete what it lets go (renamed aside first, then removed), finish deletions a
 * crash interrupted, and record each. Returns the iterations deleted.
 */
export async function applyRetention(root: string, spec: RetentionSpec, by: string): Promise<number[]> {
  if (!existsSync(root)) return [];
  for (const name of readdirSync(root).filter((n) => DELETING.test(n))) await rm(join(root, name), { recursive: true, force: true });
  const deleted: number[] = [];
  const evaluated = (it: number) => !spec.awaitEval || existsSync(spec.awaitEval.marker.replaceAll('{iteration}', String(it)));
  const victims = retentionVictims(inspectCheckpointDir(root).complete, spec, pinnedIterations(root), evaluated);
  const record = join(root, RETENTION_RECORD);
  // Every deletion is recorded: a record that cannot be (a link planted in its place, someone else's file) stops
  // the pass before anything is deleted, rather than after a checkpoint went unrecorded.
  if (victims.length) appendFileSafe(record, '');
  for (const it of victims) {
    const from = join(root, iterDirName(it));
    const doomed = `${from}.deleting-${Date.now().toString(36)}`;
    renameSync(from, doomed);
    if (pinnedIterations(root).has(it)) {
      renameSync(doomed, from); // a reader pinned it in between: it stays
      continue;
    }
    appendFileSafe(record, `${JSON.stringify({ iteration: it, deletedAt: new Date().toISOString(), policy: spec.summary, by } satisfies Deletion)}\n`);
    await rm(doomed, { recursive: true, force: true });
    deleted.push(it);
  }
  return deleted;
}
