/**
 * Storage faults in words: which errors are the disk's (full, read-only, quota, permission), how much room is
 * left where, and one line a person can act on: "disk full on /data/run/cpt (1.2 GB free)". The worker turns
 * such an error into an attempt failure of class `storage` (waited out with backoff) instead of a crash.
 */
import { existsSync, statfsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/** errno codes that always mean the file system refused a write (a write on an fd names no path). */
const DISK_CODES = new Set(['ENOSPC', 'EROFS', 'EDQUOT']);
/** Refusals that are the storage's only when a path is named (process.kill's EPERM has none). */
const PATH_CODES = new Set(['EACCES', 'EPERM']);

export type StorageCode = 'ENOSPC' | 'EROFS' | 'EDQUOT' | 'EACCES';

/** A Node file-system error caused by the storage (its `path`, when it names one, says where). */
export function isStorageError(err: unknown): err is NodeJS.ErrnoException & { code: string } {
  const e = err as NodeJS.ErrnoException | null;
  if (!e || typeof e.code !== 'string') return false;
  return DISK_CODES.has(e.code) || (PATH_CODES.has(e.code) && typeof e.path === 'string');
}

/**
 * What a trainer prints when the disk refuses it: Python's `OSError: [Errno 28] No space left on device: '…'`,
 * its strerror inside a longer message (the reference trainer's `cannot save checkpoint to …: No space left on
 * device`), torch's `PytorchStreamWriter failed writing file …: file write failed` on a full disk, and the same
 * words from C libraries (NCCL, cuFile).
 */
const TRAINER_STORAGE: [RegExp, StorageCode][] = [
  [/No space left on device|\[Errno 28\]|\bENOSPC\b|PytorchStreamWriter failed writing file/i, 'ENOSPC'],
  [/Read-only file system|\[Errno 30\]|\bEROFS\b/i, 'EROFS'],
  [/Disk quota exceeded|\[Errno 122\]|\bEDQUOT\b/i, 'EDQUOT'],
  [/PermissionError: \[Errno 13\]|\[Errno 13\] Permission denied/, 'EACCES'],
];

/** The storage error a line of trainer output reports, and the path it names (if it names one). */
export function storageErrorInLine(line: string): { code: StorageCode; path: string | null } | null {
  const hit = TRAINER_STORAGE.find(([re]) => re.test(line));
  if (!hit) return null;
  const quoted = /'(\/[^']+)'/.exec(line)?.[1];
  const bare = /(?:^|[\s(=])(\/[^\s'":,)]+)/.exec(line)?.[1];
  return { code: hit[1], path: quoted ?? bare ?? null };
}

/** The deepest existing directory at or above `path` (statfs needs one). */
function existing(path: string): string {
  let p = resolve(path);
  while (!existsSync(p) && dirname(p) !== p) p = dirname(p);
  return p;
}

/** Bytes an unprivileged writer may still use on the file system holding `path`; null if it cannot be read. */
export function freeBytes(path: string): number | null {
  try {
    const s = statfsSync(existing(path));
    return Number(s.bavail) * Number(s.bsize);
  } catch {
    return null;
  }
}

/** `1.2 GB`, `340 MB`, `12 kB`: free space as a person reads it. */
export function formatBytes(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(1)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(0)} MB`;
  return `${Math.round(n / 1e3)} kB`;
}

/** One line naming the fault, the path and (for a full disk) the room left: what `status` shows while waiting. */
export function storageReason(code: string, path: string): string {
  const free = freeBytes(path);
  const room = free === null ? '' : ` (${formatBytes(free)} free)`;
  switch (code) {
    case 'ENOSPC':
      return `disk full on ${path}${room}`;
    case 'EDQUOT':
      return `disk quota exceeded on ${path}${room}`;
    case 'EROFS':
      return `read-only file system at ${path}`;
    default:
      return `permission denied on ${path}`;
  }
}
