/** `infir2 status <run> [--json]`: per-step status, iteration/total, loss, last complete checkpoint, attempts. */
import { parseVerbArgs, positionals, type Options } from './args.js';
import { renderStatusTable } from './status-view.js';
import { runTimeFigures, stepTimeFigures } from '../views/step-figures.js';
import type { RunStatus } from '../plan/contracts.js';
import { parityOfRun } from '../report/parity-of-run.js';
import { withDiskCheckpoints } from '../rundir/disk-checkpoints.js';
import { visibleLines } from '../util/visible.js';
import { connectClient } from '../temporal/connection.js';
import { resolveRun, runStatus, startedPlan, type RunRef } from '../temporal/runs.js';

export const USAGE = 'infir2 status <run> [--json]';
export const OPTIONS = { json: { type: 'boolean' } } satisfies Options;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals: pos } = parseVerbArgs('status', argv, OPTIONS, USAGE);
  const [ref] = positionals('status', pos, ['run'], USAGE);
  const { client, connection } = await connectClient();
  try {
    const r = await resolveRun(client, ref!);
    const st = await withCheckpointsOnDisk(r, await runStatus(client, r, false));
    const now = Date.now();
    // A parity run's verdict (report/parity-of-run.ts), read from its files: other runs read nothing more.
    const parity = values.json ? null : parityOfRun(st.runDir);
    process.stdout.write(values.json ? JSON.stringify({ workflowId: r.workflowId, ...st, goodput: goodputJson(st, now) }, null, 2) + '\n' : renderStatusTable(r.workflowId, st, now) + (parity ? `\n${visibleLines(parity)}` : '') + '\n');
    return 0;
  } finally {
    await connection.close();
  }
}

/**
 * A run that closed without completing, as `status` and the end of `run`/`resume` show it: each unfinished
 * step's checkpoint as its directory has it, where this machine can read it (a trainer stopped by a cancel saves
 * after the workflow heard its last progress). Anything unreadable leaves the recorded value.
 */
export async function withCheckpointsOnDisk<T extends RunStatus & { workflowStatus: string }>(ref: RunRef, st: T): Promise<T> {
  if (st.workflowStatus === 'RUNNING' || st.workflowStatus === 'COMPLETED') return st;
  try {
    return { ...st, ...withDiskCheckpoints(st, await startedPlan(ref)) };
  } catch {
    return st;
  }
}

/**
 * `status --json`'s goodput: the run's figures and each step's (plan/goodput.ts GoodputFigures: goodput, seconds
 * per category adding up to the total, seconds and GPU-hours lost per failure class), a running attempt counted
 * until `now`. Each step's attempts, category by category, are in its `time`.
 */
function goodputJson(st: RunStatus, now: number) {
  const steps = Object.fromEntries(st.steps.flatMap((s) => {
    const f = stepTimeFigures(s, now);
    return f ? [[s.id, f]] : [];
  }));
  return { run: runTimeFigures(st.steps, now), steps };
}
