/**
 * Write a file whole or not at all: a temp file beside it, then a rename. On a full or read-only disk the temp
 * file is removed before the error is rethrown, so a failed write never leaves a `.tmp` that keeps a full disk
 * full (issue 19).
 *
 * The temp file's name is unguessable and it is created exclusively (O_CREAT|O_EXCL: an existing name, a
 * symbolic link included, fails the open rather than being written through), since many of these files live in
 * directories others can write (a run directory, a checkpoint root, the host directory). The rename then
 * replaces whatever the final name was, a planted link included, and never follows it.
 */
import { randomBytes } from 'node:crypto';
import { renameSync, unlinkSync, writeFileSync } from 'node:fs';

export function writeFileAtomic(file: string, data: string | Uint8Array): void {
  const tmp = `${file}.tmp-${process.pid}-${randomBytes(6).toString('hex')}`;
  try {
    writeFileSync(tmp, data, { flag: 'wx' });
    renameSync(tmp, file);
  } catch (err) {
    try {
      unlinkSync(tmp);
    } catch {
      /* never created, or already renamed */
    }
    throw err;
  }
}
