/**
 * The spawn helper (util/spawner.ts): a bare Node process the worker forks once, which starts the trainers for it.
 * A fork copies the page tables of the process that forks: ~1 ms here, ~21 ms from a worker of 360 MB, during
 * which the worker's event loop stands still. It reads spawn requests on its IPC channel, answers each with the
 * pid or why it could not start, then the exit; it exits when the worker is gone (the trainers it started live on,
 * detached, as they would without it: the next attempt takes them over).
 */
import { spawnWithSocketOutput, type SpawnRequest } from './spawn-output.js';

export type HelperRequest = SpawnRequest & { id: number };
export type HelperAnswer =
  | { id: number; kind: 'spawned'; pid: number }
  | { id: number; kind: 'failed' | 'unreachable'; message: string }
  | { id: number; kind: 'exited'; code: number | null; signal: NodeJS.Signals | null };

const send = (a: HelperAnswer) => process.send?.(a);

process.on('message', (req: HelperRequest) => {
  spawnWithSocketOutput(req, {
    spawned: (pid) => send({ id: req.id, kind: 'spawned', pid }),
    failed: (message) => send({ id: req.id, kind: 'failed', message }),
    unreachable: (message) => send({ id: req.id, kind: 'unreachable', message }),
    exited: (code, signal) => send({ id: req.id, kind: 'exited', code, signal }),
  });
});
// The worker is gone (or closed the channel): nothing can read an answer any more. That, and SIGKILL, are the
// only ends: a terminal's ^C or a hang-up reaches the worker's whole process group, and a helper that died of it
// would lose the exit status of every trainer the worker is stopping gracefully in that very moment.
process.on('disconnect', () => process.exit(0));
for (const sig of ['SIGINT', 'SIGHUP', 'SIGTERM'] as const) process.on(sig, () => undefined);
