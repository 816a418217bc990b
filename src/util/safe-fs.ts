/**
 * Files in directories that others can write: a run directory on shared storage, a checkpoint root the trainer
 * fills, the host directory every local user shares. A name there may be a symbolic link planted to make a
 * worker (often root) append to `/etc/…`, a hard link to someone else's file, a FIFO that blocks a reader
 * forever, or `/dev/zero`. So the files of ours that live there are opened without following a link
 * (O_NOFOLLOW), without blocking (O_NONBLOCK), and checked on the open descriptor (fstat, never a second lookup
 * by name): a regular file, one link, owned by this process's user, and of a bounded size when read.
 */
import { closeSync, constants, fstatSync, openSync, readSync, writeSync, type Stats } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { euid } from './process-identity.js';

const { O_RDONLY, O_WRONLY, O_RDWR, O_APPEND, O_CREAT, O_NOFOLLOW, O_NONBLOCK } = constants;

/** A file of ours that is not what it must be; its message names the path and what it is instead. */
export class UnsafeFileError extends Error {
  readonly code = 'EUNSAFE';
  constructor(
    readonly path: string,
    why: string,
  ) {
    super(`${path} ${why}: refused (infir2 writes and trusts only its own regular files there)`);
    this.name = 'UnsafeFileError';
  }
}

/**
 * Why an opened file cannot be one of ours, or null. `owner`: the uid it must have (null: any); `oneLink`: a second
 * name for it is refused (a hard link is how a file someone cannot write is put under a name that one can).
 */
export function fileProblem(st: Stats, owner: number | null = euid(), oneLink = true): string | null {
  if (st.isFIFO()) return 'is a FIFO';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'is a device';
  if (st.isSocket()) return 'is a socket';
  if (st.isDirectory()) return 'is a directory';
  if (!st.isFile()) return 'is not a regular file';
  if (oneLink && st.nlink > 1) return `has ${st.nlink} hard links (another name for someone else's file)`;
  if (owner !== null && st.uid !== owner) return `belongs to uid ${st.uid}, not to this process's uid ${owner}`;
  return null;
}

/** open(2) with O_NOFOLLOW, turning a link into an UnsafeFileError (ELOOP says "too many levels of symbolic links"). */
function openNoFollow(path: string, flags: number, mode?: number): number {
  try {
    return openSync(path, flags | O_NOFOLLOW | O_NONBLOCK, mode);
  } catch (err) {
    throw unsafeOpen(err, path);
  }
}

/** ELOOP: O_NOFOLLOW met a link; ENXIO: a FIFO opened to write with no reader (O_NONBLOCK), or a device with none. */
function unsafeOpen(err: unknown, path: string): unknown {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ELOOP') return new UnsafeFileError(path, 'is a symbolic link');
  if (code === 'ENXIO') return new UnsafeFileError(path, 'is a FIFO or a device');
  return err;
}

function checked(fd: number, path: string, owner: number | null, oneLink = true): Stats {
  const st = fstatSync(fd);
  const problem = fileProblem(st, owner, oneLink);
  if (problem) {
    closeSync(fd);
    throw new UnsafeFileError(path, problem);
  }
  return st;
}

/** A descriptor appending to `path` (created if absent): never through a link, only to a regular file of ours. */
export function openAppendFdSafe(path: string): number {
  const fd = openNoFollow(path, O_WRONLY | O_APPEND | O_CREAT, 0o666);
  checked(fd, path, euid());
  return fd;
}

/** Append `data` to `path` (created if absent): never through a link, only to a regular file of ours. */
export function appendFileSafe(path: string, data: string | Uint8Array): void {
  const fd = openAppendFdSafe(path);
  try {
    const buf = typeof data === 'string' ? Buffer.from(data) : data;
    for (let done = 0; done < buf.length; ) done += writeSync(fd, buf, done, buf.length - done);
  } finally {
    closeSync(fd);
  }
}

/** The same open for a long-lived log (`a+`: appended to, and read for where its last part began). */
export async function openAppendSafe(path: string, read = false): Promise<FileHandle> {
  let fh: FileHandle;
  try {
    fh = await open(path, (read ? O_RDWR : O_WRONLY) | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0o666);
  } catch (err) {
    throw unsafeOpen(err, path);
  }
  const problem = fileProblem(await fh.stat(), euid());
  if (problem) {
    await fh.close();
    throw new UnsafeFileError(path, problem);
  }
  return fh;
}

export interface ReadOptions {
  /** Larger files are refused (a record of ours is small; `/dev/zero` is endless). */
  maxBytes: number;
  /** A trainer's file (Megatron's tracker) rather than a record of ours: a symbolic link at `path` is followed. @default false */
  follow?: boolean;
  /** The uid the file must belong to; null: anyone's. @default null */
  owner?: number | null;
  /** Refuse a file with other hard links (a record whose owner is trusted). @default false */
  oneLink?: boolean;
}

export interface SafeRead {
  text: string;
  stat: Stats;
}

/**
 * A small file read whole, or null when it is not there. A link (unless `follow`), a FIFO, a device, another owner
 * than `owner`, other hard links (with `oneLink`), or more than `maxBytes` throws UnsafeFileError.
 */
export function readFileSafe(path: string, o: ReadOptions): SafeRead | null {
  let fd: number;
  try {
    fd = o.follow ? openSync(path, O_RDONLY | O_NONBLOCK) : openNoFollow(path, O_RDONLY);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  const st = checked(fd, path, o.owner ?? null, o.oneLink ?? false);
  try {
    if (st.size > o.maxBytes) throw new UnsafeFileError(path, `is ${st.size} bytes, more than the ${o.maxBytes} a file of ours holds`);
    const buf = Buffer.alloc(st.size);
    let got = 0;
    while (got < buf.length) {
      const n = readSync(fd, buf, got, buf.length - got, got);
      if (n === 0) break;
      got += n;
    }
    return { text: buf.subarray(0, got).toString('utf8'), stat: st };
  } finally {
    closeSync(fd);
  }
}
