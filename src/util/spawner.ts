/**
 * Trainers started by a small helper process, not by the worker itself.
 *
 * Why: Node 20's libuv (1.46) starts a child with fork(), which copies the page tables of the whole parent: ~21 ms
 * of the worker's event loop per launch at the 360–380 MB a worker with 100 runs holds (1 ms for a bare Node),
 * during which no heartbeat, hand-off or status query is served. Measured in issue 33's bench: 6.4 s of the
 * worker's main thread in ChildProcess.spawn for 300 launches, and 100 runs handing over at once queued behind
 * one another's forks. The helper (spawner-child.ts) is forked once and stays small.
 *
 * How: this process listens on an abstract Unix socket (Linux; a random name, nothing on disk, so a worker killed
 * with SIGKILL leaves nothing behind: a socket file in a private directory did, once per worker). Any local process
 * could connect to it, so a connection is used only when its first line is a live launch's token, 128 random bits
 * that only this process and the helper know; anything else is closed unread. For each launch the helper
 * connects, writes the launch's random token on a line, and gives the connection to the child as its stdout and
 * stderr (spawn-output.ts); its pid and exit come back on the IPC channel. Output thus reaches this process as it
 * did through a pipe: interleaved, with backpressure, ending when every holder has closed it.
 *
 * Where the helper cannot run (INFIR2_SPAWN_HELPER=0, or it failed to start MAX_HELPER_STARTS times), the same
 * code runs here. A helper that dies leaves the trainers it started running (detached, as always); their exit
 * status is lost with it, so each is watched by its pid until it is gone, and said so.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import { dirname } from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { HelperAnswer, HelperRequest } from './spawner-child.js';
import { nodeScript } from './node-script.js';
import { pidAlive } from './process-group.js';
import { spawnWithSocketOutput, type SpawnEvents } from './spawn-output.js';

/** How a spawned process ended; `message` when it never started, or its exit status was lost. */
export interface ProcessExit {
  exitCode?: number;
  signal?: NodeJS.Signals;
  message?: string;
}

export interface SpawnedProcess {
  /** Undefined when it could not start (`exited` says why). */
  pid: number | undefined;
  /** stdout and stderr interleaved, as the process wrote them. */
  all: Readable;
  /** Once it exited and its output ended (or OUTPUT_GRACE_MS after the exit, when others still hold it). */
  exited: Promise<ProcessExit>;
}

/**
 * How long after the exit the output may stay open: a process it left behind holds it (a launcher killed from
 * outside leaves its ranks); the supervisor must get on with stopping them, not wait for them to close it.
 */
const OUTPUT_GRACE_MS = 1000;
/** A connection must name its launch in this many bytes, within HEADER_TIMEOUT_MS, or it is closed. */
const HEADER_MAX = 64;
const HEADER_TIMEOUT_MS = 10_000;
/** Helpers started before launching here instead. */
const MAX_HELPER_STARTS = 5;
/** How often a process whose helper died is looked for. */
const ORPHAN_POLL_MS = 500;

class Launch {
  readonly all = new PassThrough();
  pid: number | undefined;
  private exit: ProcessExit | null = null;
  private outputClosed = false;
  private settled = false;
  readonly started: Promise<SpawnedProcess>;
  private resolveStarted!: (p: SpawnedProcess) => void;
  private rejectStarted!: (e: Error) => void;
  private readonly exited: Promise<ProcessExit>;
  private resolveExited!: (e: ProcessExit) => void;

  constructor(
    readonly req: HelperRequest,
    private readonly forget: (l: Launch) => void,
  ) {
    this.started = new Promise((resolve, reject) => ((this.resolveStarted = resolve), (this.rejectStarted = reject)));
    this.exited = new Promise((resolve) => (this.resolveExited = resolve));
  }

  readonly events: SpawnEvents = {
    spawned: (pid) => {
      this.pid = pid;
      this.resolveStarted({ pid, all: this.all, exited: this.exited });
    },
    failed: (message) => {
      this.resolveStarted({ pid: undefined, all: this.all, exited: this.exited });
      this.all.end();
      this.exit = { message };
      this.settle();
    },
    unreachable: (message) => this.lose(`could not start a trainer: ${message}`),
    exited: (code, signal) => {
      this.exit = { ...(code !== null ? { exitCode: code } : {}), ...(signal ? { signal } : {}) };
      if (this.outputClosed) this.settle();
      else setTimeout(() => this.settle(), OUTPUT_GRACE_MS).unref();
    },
  };

  /** The connection that carries its output, its token line read; `rest` is what came after that line. */
  attach(sock: Socket, rest: Buffer): void {
    if (rest.length) this.all.write(rest);
    sock.on('close', () => {
      this.outputClosed = true;
      if (this.exit) this.settle();
    });
    sock.pipe(this.all);
  }

  /** It did not start, for a reason of this host's (not the command's): the launch fails as an error. */
  private lose(message: string): void {
    this.rejectStarted(new Error(message));
    this.all.end();
    this.forget(this);
  }

  /** Its helper died before saying whether it started: it is not known to run, so nothing is assumed. */
  abandon(why: string): void {
    if (this.pid === undefined) return this.lose(`the trainer's launch was lost: ${why}`);
    if (this.exit) return;
    const pid = this.pid;
    const poll = setInterval(() => {
      if (pidAlive(pid)) return;
      clearInterval(poll);
      this.exit = { message: `the exit status of the trainer (its launcher) was lost: ${why}` };
      this.settle();
    }, ORPHAN_POLL_MS);
  }

  private settle(): void {
    if (this.settled) return;
    this.settled = true;
    this.resolveExited(this.exit!);
    this.forget(this);
  }
}

export class Spawner {
  /** `helper: false`: every launch from this process (INFIR2_SPAWN_HELPER=0 says the same for the worker's). */
  constructor(private readonly useHelper = process.env.INFIR2_SPAWN_HELPER !== '0') {}

  private server: Promise<string> | null = null;
  /** Exposed for tests that kill it. */
  helper: ChildProcess | null = null;
  private helperStarts = 0;
  private seq = 0;
  /** Launches not yet ended, by id (the helper's answers) and by token (the output connections). */
  private readonly live = new Map<number, Launch>();
  private readonly byToken = new Map<string, Launch>();

  async spawn(file: string, args: string[], o: { cwd: string; env: Record<string, string> }): Promise<SpawnedProcess> {
    const socketPath = await this.listen();
    const token = randomBytes(16).toString('hex');
    const env = { ...(process.env as Record<string, string>), ...o.env };
    const launch = new Launch({ id: ++this.seq, file, args, cwd: o.cwd, env, socketPath, token }, (l) => this.forget(l));
    this.live.set(launch.req.id, launch);
    this.byToken.set(token, launch);
    const helper = this.helperProcess();
    if (helper) helper.send(launch.req);
    else spawnWithSocketOutput(launch.req, launch.events);
    this.hold();
    return launch.started;
  }

  /** The socket and the helper, before the first launch needs them (a worker's start, not a step's, pays for them). */
  warm(): void {
    this.listen().catch(() => undefined);
    this.helperProcess();
    this.hold();
  }

  private forget(l: Launch): void {
    this.live.delete(l.req.id);
    this.byToken.delete(l.req.token);
    this.hold();
  }

  /** The socket the output connects to: abstract (a leading NUL), under a name no other worker picks. */
  private listen(): Promise<string> {
    this.server ??= new Promise((resolve, reject) => {
      const path = `\0infir2-spawn-${process.pid}-${randomBytes(12).toString('hex')}`;
      const server: Server = createServer((sock) => this.accept(sock));
      server.once('error', reject);
      server.listen(path, () => resolve(path));
      server.unref();
    });
    return this.server;
  }

  /** A connection must start with a live launch's token; anything else is closed unread. */
  private accept(sock: Socket): void {
    let head = Buffer.alloc(0);
    const timer = setTimeout(() => sock.destroy(), HEADER_TIMEOUT_MS).unref();
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const nl = head.indexOf(10);
      if (nl < 0) {
        if (head.length > HEADER_MAX) sock.destroy();
        return;
      }
      sock.off('data', onData);
      sock.pause();
      clearTimeout(timer);
      const launch = this.byToken.get(head.subarray(0, nl).toString('latin1'));
      if (!launch) return sock.destroy();
      launch.attach(sock, head.subarray(nl + 1));
    };
    sock.on('data', onData);
    sock.on('error', () => sock.destroy());
  }

  private helperProcess(): ChildProcess | null {
    if (this.helper) return this.helper;
    if (!this.useHelper || this.helperStarts >= MAX_HELPER_STARTS) return null;
    this.helperStarts++;
    const { script, execArgv } = nodeScript(dirname(fileURLToPath(import.meta.url)), 'spawner-child');
    let child: ChildProcess;
    try {
      child = fork(script, [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], execArgv, serialization: 'json' });
    } catch {
      return null;
    }
    child.on('message', (a: HelperAnswer) => {
      const launch = this.live.get(a.id);
      if (!launch) return;
      if (a.kind === 'spawned') launch.events.spawned(a.pid);
      else if (a.kind === 'exited') launch.events.exited(a.code, a.signal);
      else launch.events[a.kind](a.message);
    });
    const gone = (why: string) => {
      if (this.helper !== child) return;
      this.helper = null;
      for (const l of [...this.live.values()]) l.abandon(why);
    };
    child.on('error', (err) => gone(`the spawn helper failed (${err.message})`));
    child.on('exit', (code, signal) => gone(`the spawn helper exited (${signal ?? code})`));
    this.helper = child;
    return child;
  }

  /** The helper keeps this process alive only while a launch it made is live. */
  private hold(): void {
    const h = this.helper;
    if (!h) return;
    const busy = this.live.size > 0;
    for (const x of [h, h.channel as { ref?(): void; unref?(): void } | undefined]) (busy ? x?.ref : x?.unref)?.call(x);
  }
}

const spawner = new Spawner();

/** Start the worker's spawn helper now: its first launch otherwise waited ~0.1 s for a Node process to start. */
export function warmSpawner(): void {
  spawner.warm();
}

/**
 * Start `file` detached (its own session and process group), stdin closed, stdout and stderr interleaved in
 * `all`; `env` is added to this process's environment.
 */
export function spawnDetached(file: string, args: string[], o: { cwd: string; env: Record<string, string> }): Promise<SpawnedProcess> {
  return spawner.spawn(file, args, o);
}
