/**
 * Follow a run until it ends. On a terminal, a block of one line per step (bar, iteration/total, loss, ETA) is
 * redrawn in place; otherwise a plain line is printed whenever a step's status, attempt or checkpoint changes.
 * Ctrl-C detaches: the run goes on, and the way back is printed.
 */
import type { Client } from '@temporalio/client';
import { plainLine, progressBlock, RateTracker } from './progress-view.js';
import { withCheckpointsOnDisk } from './status.js';
import { renderStatusTable } from './status-view.js';
import { resolveRun, runStatus } from '../temporal/runs.js';

const POLL_MS = 1_000;

export async function follow(client: Client, workflowId: string, out: NodeJS.WriteStream = process.stdout): Promise<number> {
  const ref = await resolveRun(client, workflowId);
  const tty = Boolean(out.isTTY) && !process.env.CI;
  let detached = false;
  const onInt = () => {
    detached = true;
  };
  process.once('SIGINT', onInt);
  const rates = new RateTracker();
  const seen = new Map<string, string>();
  const printed = new Map<string, string>();
  let drawn = 0;
  try {
    for (;;) {
      const st = await runStatus(client, ref);
      const now = Date.now();
      for (const s of st.steps) rates.observe(s.id, s.progress?.iteration, now);
      if (tty) {
        const lines = progressBlock(st.steps, rates);
        // Move up over the previous block and redraw it line by line, clearing leftovers.
        if (drawn) out.write(`\x1b[${drawn}F`);
        out.write(lines.map((l) => `\x1b[2K${l.slice(0, (out.columns || 120) - 1)}\n`).join(''));
        drawn = lines.length;
      } else {
        for (const s of st.steps) {
          const key = `${s.status}|${s.progress?.lastCheckpoint ?? ''}|${s.attempts}`;
          if (seen.get(s.id) === key || s.status === 'pending') continue;
          seen.set(s.id, key);
          // A change the line does not show (a checkpoint found before the first iteration) prints nothing:
          // `cpt.warmup running` once, not three times.
          const line = plainLine(s);
          if (printed.get(s.id) === line) continue;
          printed.set(s.id, line);
          out.write(`${line}\n`);
        }
      }
      if (st.workflowStatus !== 'RUNNING') {
        out.write('\n' + renderStatusTable(workflowId, await withCheckpointsOnDisk(ref, st)) + '\n');
        return st.status === 'completed' ? 0 : 1;
      }
      if (detached) {
        out.write(`\ndetached; the run goes on.\n  reattach: infir2 status ${workflowId}   (or: infir2 logs ${workflowId} --follow)\n  cancel:   infir2 cancel ${workflowId}\n`);
        return 0;
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  } finally {
    process.removeListener('SIGINT', onInt);
  }
}
