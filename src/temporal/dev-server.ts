/**
 * The embedded default's server: the Temporal CLI's dev server (`temporal server start-dev`) with a SQLite
 * file in the state directory, its Web UI, and the project's search attributes. Started detached so it
 * outlives the command that started it; `stopDevServer` stops it.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { Connection } from '@temporalio/client';
import { SEARCH_ATTRIBUTE_FLAGS } from './constants.js';
import { makeDirs } from '../util/dir-probe.js';
import { groupAlive, terminateGroup } from '../util/process-group.js';
import { openAppendFdSafe } from '../util/safe-fs.js';

export interface DevServerOptions {
  /** The pinned Temporal CLI (`temporal server start-dev`). */
  temporalBin: string;
  /** Holds the SQLite file (the runs' durable history) and the server's log. */
  stateDir: string;
  /** Address the frontend and the UI listen on. @default '127.0.0.1' (this machine only) */
  ip?: string;
  /** The frontend's gRPC port. @default 7233 */
  port?: number;
  /** The Web UI's port. @default port + 1000 */
  uiPort?: number;
  /** No Web UI (tests that do not look at it). @default false */
  headless?: boolean;
  /** Where the Web UI's pages decode payloads (`infir2 codec-server`); its users may still set their own. */
  uiCodecEndpoint?: string;
}

export interface DevServerHandle {
  pid: number;
  address: string;
  uiUrl: string | null;
  dbFile: string;
  logFile: string;
}

export function devServerArgs(o: DevServerOptions): string[] {
  const ip = o.ip ?? '127.0.0.1';
  const port = o.port ?? 7233;
  const args = ['server', 'start-dev', '--db-filename', join(o.stateDir, 'temporal.sqlite'), '--ip', ip, '--port', String(port)];
  args.push(...(o.headless ? ['--headless'] : ['--ui-port', String(o.uiPort ?? port + 1000)]));
  if (o.uiCodecEndpoint && !o.headless) args.push('--ui-codec-endpoint', o.uiCodecEndpoint);
  for (const sa of SEARCH_ATTRIBUTE_FLAGS) args.push('--search-attribute', sa);
  // WAL: concurrent readers while the server writes; the SDK's own CI runs the dev server this way. synchronous
  // NORMAL: a commit is not flushed to the disk one by one (each flush took 1.4 ms here, and 100 runs handing over
  // at once made ~1,500 commits); WAL keeps the file consistent, and only a crash of the machine itself, which
  // takes its trainers too, can lose the last commits (the steps then go on from their checkpoints, as after a lost worker).
  args.push('--sqlite-pragma', 'journal_mode=WAL', '--sqlite-pragma', 'synchronous=NORMAL', '--log-level', 'warn');
  return args;
}

/** Resolve once the frontend answers (or throw after `timeoutMs`). */
export async function waitForServer(address: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const c = await Connection.connect({ address, connectTimeout: 2_000 });
      try {
        // Also proves the frontend is up; the default namespace is created asynchronously after it.
        await c.workflowService.describeNamespace({ namespace: 'default' });
        return;
      } finally {
        await c.close();
      }
    } catch (err) {
      last = err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  throw new Error(`the Temporal dev server at ${address} did not come up: ${last instanceof Error ? last.message : String(last)}`);
}

export async function startDevServer(o: DevServerOptions): Promise<DevServerHandle> {
  if (!existsSync(o.temporalBin)) {
    throw new Error(`the Temporal CLI is not installed at ${o.temporalBin}: run \`make setup\` (or set INFIR2_TEMPORAL_BIN)`);
  }
  makeDirs(o.stateDir);
  const logFile = join(o.stateDir, 'temporal-server.log');
  const child = spawnDetached(o.temporalBin, devServerArgs(o), logFile);
  if (child.pid === undefined) throw new Error(`could not start ${o.temporalBin}`);
  const address = `${o.ip ?? '127.0.0.1'}:${o.port ?? 7233}`;
  try {
    await waitForServer(address);
  } catch (err) {
    await terminateGroup(child.pid, 5_000);
    throw new Error(`${err instanceof Error ? err.message : String(err)} (see ${logFile})`);
  }
  const uiUrl = o.headless ? null : `http://${o.ip ?? '127.0.0.1'}:${o.uiPort ?? (o.port ?? 7233) + 1000}`;
  return { pid: child.pid, address, uiUrl, dbFile: join(o.stateDir, 'temporal.sqlite'), logFile };
}

/**
 * Start a long-lived daemon in its own process group with its output appended to `logFile`. Plain
 * child_process, not execa: the daemon must own its log file descriptor and outlive this process.
 */
export function spawnDetached(file: string, args: string[], logFile: string, env?: NodeJS.ProcessEnv) {
  // The state directory may be shared (INFIR2_HOME on a group's storage): never append through a planted link.
  const fd = openAppendFdSafe(logFile);
  try {
    const child = spawn(file, args, { detached: true, stdio: ['ignore', fd, fd], env: env ?? process.env });
    child.on('error', () => undefined);
    child.unref();
    return child;
  } finally {
    closeSync(fd);
  }
}

export async function stopDevServer(pid: number, graceMs = 10_000): Promise<void> {
  if (groupAlive(pid)) await terminateGroup(pid, graceMs);
}
