/**
 * A run named on the command line, as its directory: a run id (its directory from the server's record, and its
 * live status), or a run directory itself (the files alone, no server). For the verbs that read a run's files:
 * `report`, `compare`.
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { UsageError } from '../errors.js';
import type { RunStatus } from '../plan/contracts.js';
import { outDirProblem } from '../report/write-report.js';

export interface LocatedRun {
  runDir: string;
  live: RunStatus | null;
}

export async function locateRuns(refs: string[]): Promise<LocatedRun[]> {
  // A run id never holds a '/' (run.ts's RUN_ID): such a ref is a path, and without a plan.json no run is there.
  const notRuns = refs.filter((ref) => ref.includes('/') && !existsSync(join(ref, 'plan.json')));
  if (notRuns.length) {
    throw new UsageError(notRuns.map((ref) => `${ref}: not a run directory (${existsSync(ref) ? 'it has no plan.json' : 'no such directory'}): expected a run id or the directory of a run`));
  }
  const out: (LocatedRun | null)[] = refs.map((ref) => (existsSync(join(ref, 'plan.json')) ? { runDir: resolve(ref), live: null } : null));
  const ids = refs.filter((_, i) => out[i] === null);
  if (!ids.length) return out as LocatedRun[];
  const { connectClient } = await import('../temporal/connection.js');
  const { resolveRun, runStatus, startedPlan } = await import('../temporal/runs.js');
  const { client, connection } = await connectClient();
  try {
    for (const [i, ref] of refs.entries()) {
      if (out[i]) continue;
      const r = await resolveRun(client, ref);
      const plan = await startedPlan(r);
      out[i] = { runDir: plan.runDir, live: await runStatus(client, r, false).catch(() => null) };
    }
    return out as LocatedRun[];
  } finally {
    await connection.close();
  }
}

/**
 * Refuses a directory the page (`a report`, `a comparison`) cannot be written to: one line naming where it came
 * from (`--out`, or the default's place, with a hint to give --out).
 */
export function checkOutDir(dir: string, from: string, page: 'report' | 'comparison'): void {
  const problem = outDirProblem(dir, `a ${page}`);
  if (problem) throw new UsageError(`${from}: ${problem}: expected a directory the ${page} can be written to${from === '--out' ? '' : ' (give --out DIR)'}`);
}
