/**
 * A real full or read-only disk for tests: a small tmpfs mounted (needs root; elsewhere the caller skips, saying
 * why) and filled to its last block. Used where a file must meet ENOSPC from the kernel itself: the step's log,
 * the checkpoint saves of storage.test.ts.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export const NO_MOUNT = 'cannot mount a tmpfs here (needs root): the disk-full and read-only cases are not checked';

/** Mount a tmpfs of `size` at `dir`; false (the caller skips, saying why) where this process may not mount. */
export function mountTmpfs(dir: string, size: string): boolean {
  mkdirSync(dir, { recursive: true });
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export function umount(dir: string): void {
  try {
    execFileSync('umount', ['-l', dir], { stdio: 'ignore' });
  } catch {
    /* not mounted */
  }
}

/** Fill the file system under `dir` to the last block; returns the filler file. */
export function fill(dir: string): string {
  const file = join(dir, 'filler');
  const fd = openSync(file, 'w');
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  }
  try {
    for (;;) writeSync(fd, chunk, 0, 512);
  } catch {
    /* full to the last sector */
  }
  closeSync(fd);
  return file;
}
