/**
 * Which Temporal cluster a worker serves. A server restarted on the same database keeps its cluster id and the
 * worker rides the restart out; a server replaced by one on another database (a new `infir2 up` state, a dev
 * server on a fresh file, another cluster behind the same address) has a new id. A worker that kept serving it
 * would run the new server's steps beside trainers of the old one's runs, on the same GPUs and directories: it
 * stops instead.
 */
import type { NativeConnection } from '@temporalio/worker';

/** How often the worker asks who the server is. */
export const IDENTITY_CHECK_MS = 10_000;

async function clusterId(connection: NativeConnection): Promise<string | null> {
  try {
    const info = await connection.withDeadline(Date.now() + 5_000, () => connection.workflowService.getClusterInfo({}));
    return info.clusterId || null;
  } catch {
    return null; // down or restarting: not a different server
  }
}

/**
 * Call `onReplaced` once if the server behind `connection` turns out to be another cluster than at start, and
 * `onAnswer` when it stops answering and when it answers again (the worker's log says both: sdk-core retries
 * quietly, and running trainers do not need the server). Returns the stop function.
 */
export async function watchServerIdentity(
  connection: NativeConnection,
  address: string,
  onReplaced: (msg: string) => void,
  everyMs = IDENTITY_CHECK_MS,
  onAnswer: (answers: boolean, msg: string) => void = () => undefined,
): Promise<() => void> {
  const first = await clusterId(connection);
  if (!first) return () => undefined; // a server that does not say cannot be told apart: nothing to watch
  let busy = false;
  let silentSince: number | null = null;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    void clusterId(connection)
      .then((now) => {
        if (!now && silentSince === null) {
          silentSince = Date.now();
          onAnswer(false, `the Temporal server at ${address} does not answer: running trainers go on; the worker retries, and holds any step's outcome until it answers`);
        } else if (now && silentSince !== null) {
          onAnswer(true, `the Temporal server at ${address} answers again (silent for about ${Math.max(1, Math.round((Date.now() - silentSince) / 1000))} s)`);
          silentSince = null;
        }
        if (now && now !== first) {
          clearInterval(timer);
          onReplaced(`the Temporal server at ${address} is now another cluster (id ${first} → ${now}: a different database); stopping so that this worker never mixes the runs of two servers`);
        }
      })
      .finally(() => (busy = false));
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
