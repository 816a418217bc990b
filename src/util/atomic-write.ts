/**
 * Write a file whole or not at all: a temp file beside it, then a rename. On a full or read-only disk the temp
 * file is removed before the error is rethrown, so a failed write never leaves a `.tmp` that keeps a full disk
 * full (issue 19).
 */
import { renameSync, unlinkSync, writeFileSync } from 'node:fs';

export function writeFileAtomic(file: string, data: string, tmpSuffix = `.tmp-${process.pid}`): void {
  const tmp = `${file}${tmpSuffix}`;
  try {
    writeFileSync(tmp, data);
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
