/**
 * Does a run directory still hold this run? `infir2 run` writes `plan.json` there before the run starts, so every
 * attempt of every step can tell three cases apart before it creates anything: the run's files are there; they
 * are gone (the directory was removed, or its file system unmounted: a storage fault that a remount or a restore
 * repairs, so it is retried with pauses, and never recreated empty, which would let the run "complete" on
 * nothing); or another run's files are there (a mistake no retry fixes).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { errnoWords } from '../util/dir-probe.js';

/** The file that says which run a directory holds. */
export const RUN_RECORD = 'plan.json';

export interface RunDirVerdict {
  cls: 'storage' | 'config';
  reason: string;
}

export function runDirVerdict(runDir: string, recipe: string, runId: string): RunDirVerdict | null {
  const file = join(runDir, RUN_RECORD);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      return { cls: 'storage', reason: `the run directory ${runDir} no longer holds this run's files (${RUN_RECORD} is gone): it was removed or its file system is not mounted; restore it, or start the run again` };
    }
    return { cls: 'storage', reason: `cannot read ${file}: ${errnoWords(err)}` };
  }
  let recorded: { recipe?: unknown; runId?: unknown };
  try {
    recorded = JSON.parse(text) as typeof recorded;
  } catch {
    return { cls: 'storage', reason: `${file} is not readable JSON (damaged, or a save cut short)` };
  }
  if (recorded.recipe !== recipe || recorded.runId !== runId) {
    return { cls: 'config', reason: `the run directory ${runDir} holds another run's files (${RUN_RECORD} is run '${String(recorded.runId)}' of recipe '${String(recorded.recipe)}')` };
  }
  return null;
}
