/**
 * Follow a run until it ends: a line whenever a step's status, iteration or checkpoint changes (issue 5 turns
 * this into redrawn progress bars). Ctrl-C detaches; the run goes on.
 */
import type { Client } from '@temporalio/client';
import { renderStatusTable } from './status-view.js';
import { resolveRun, runStatus } from '../temporal/runs.js';

const POLL_MS = 1_000;

export async function follow(client: Client, workflowId: string): Promise<number> {
  const ref = await resolveRun(client, workflowId);
  let detached = false;
  const onInt = () => {
    detached = true;
  };
  process.once('SIGINT', onInt);
  const seen = new Map<string, string>();
  try {
    for (;;) {
      const st = await runStatus(client, ref);
      for (const s of st.steps) {
        const p = s.progress;
        const key = `${s.status}|${p?.iteration ?? ''}|${p?.lastCheckpoint ?? ''}|${s.attempts}`;
        if (seen.get(s.id) === key) continue;
        const prevStatus = seen.get(s.id)?.split('|')[0];
        seen.set(s.id, key);
        if (s.status === 'pending') continue;
        if (s.status === 'running' && prevStatus === 'running' && p?.iteration != null && p.lastCheckpoint === null) continue;
        const iter = p?.iteration != null ? ` ${p.iteration}/${p.totalIterations ?? '?'}` : '';
        const loss = p?.loss != null ? ` loss ${p.loss.toPrecision(4)}` : '';
        const fail = s.lastFailure && s.status !== 'completed' ? ` (${s.lastFailure.class}: ${s.lastFailure.message.slice(0, 100)})` : '';
        process.stdout.write(`${s.id.padEnd(14)} ${s.status}${iter}${loss}${s.attempts > 1 ? ` attempt ${s.attempts}` : ''}${fail}\n`);
      }
      if (st.workflowStatus !== 'RUNNING') {
        process.stdout.write('\n' + renderStatusTable(workflowId, st) + '\n');
        return st.status === 'completed' ? 0 : 1;
      }
      if (detached) {
        process.stdout.write(`\ndetached; the run goes on.\n  reattach: npx infir2 status ${workflowId}\n  cancel:   npx infir2 cancel ${workflowId}\n`);
        return 0;
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  } finally {
    process.removeListener('SIGINT', onInt);
  }
}
