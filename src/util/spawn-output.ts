/**
 * Start a detached process whose stdout and stderr are one Unix-socket connection to the process that wants its
 * output (util/spawner.ts). Used in the spawn helper (spawner-child.ts) and, where there is no helper, in the
 * worker itself: either way the output arrives the same way, on a connection the reader accepted and recognised.
 *
 * The connection first carries a line with the launch's token (which the reader matches to the launch it asked
 * for), then, once that line is written, it becomes the child's fds 1 and 2: one stream, interleaved as the child
 * wrote it, ending when the child and everything that inherited it have closed it, as a pipe does. libuv sets fds
 * 0–2 blocking in the child, and this process closes its own copy at once.
 */
import { spawn } from 'node:child_process';
import { createConnection } from 'node:net';

export interface SpawnRequest {
  file: string;
  args: string[];
  cwd: string;
  /** The whole environment (not merged with this process's). */
  env: Record<string, string>;
  /** The reader's socket, and the line that names this launch on it. */
  socketPath: string;
  token: string;
}

export interface SpawnEvents {
  spawned(pid: number): void;
  /** It could not start (no such file, a bad cwd): the command's fault. */
  failed(message: string): void;
  /** The reader's socket could not be reached: nothing was started, and the fault is this host's, not the command's. */
  unreachable(message: string): void;
  exited(code: number | null, signal: NodeJS.Signals | null): void;
}

export function spawnWithSocketOutput(req: SpawnRequest, on: SpawnEvents): void {
  const sock = createConnection(req.socketPath);
  let started = false;
  sock.on('error', (err) => {
    if (!started) on.unreachable(`the worker's output socket: ${err.message}`);
    sock.destroy();
  });
  sock.on('connect', () => {
    sock.write(`${req.token}\n`, (err) => {
      if (err) return; // 'error' follows
      started = true;
      try {
        const child = spawn(req.file, req.args, { cwd: req.cwd, env: req.env, detached: true, stdio: ['ignore', sock, sock] });
        child.on('spawn', () => on.spawned(child.pid!));
        child.on('error', (e) => on.failed(`could not start ${req.file}: ${e.message}`));
        child.on('exit', (code, signal) => on.exited(code, signal));
      } catch (e) {
        on.failed(`could not start ${req.file}: ${(e as Error).message}`);
      }
      // The child has its own copies of the connection (or none, if it did not start): this end is not needed.
      sock.destroy();
    });
  });
}
