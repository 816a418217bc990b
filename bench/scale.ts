/**
 * The control plane at scale (issue 33), on the embedded default: a real dev server and one real worker (the
 * compiled CLI), with the fake trainer as the test suite runs it. Prints figures; asserts nothing.
 *
 *   npx tsx bench/scale.ts long [CHECKPOINTS] [EVAL_EVERY]   one attempt saving CHECKPOINTS checkpoints (default
 *       100000, one per 2 ms iteration, `keep.last 2`), evaluated every EVAL_EVERY (default 10000; 0: none):
 *       events and bytes of every workflow at the end, continue-as-new count, worker RSS over time
 *   npx tsx bench/scale.ts runs [N ...]   N concurrent runs (default 10 50 100) of 3 fake-trainer steps on one
 *       worker with `--slots N`: most trainers at once, hand-off gap p50/p95, `status` p50/p95, worker and
 *       server peak RSS, CPU seconds per step (worker, server, trainers)
 *
 * With `--stagger SEC`, the runs start evenly over SEC seconds instead of all at once (their equal steps then hand over
 * all at the same moment: the worst case, and the default).
 *
 * With `--cluster` (after the part), on the PostgreSQL cluster tier instead (test/cluster/harness.ts: the Temporal
 * server release docker-compose.yml pins, on PostgreSQL; needs `make setup-cluster`).
 *
 * The machine is shared: the load average is printed beside each figure.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { availableParallelism, loadavg } from 'node:os';
import { LAUNCHER_FILE, type PlanStep } from '../src/plan/types.js';
import { poolTaskQueue, stepWorkflowId } from '../src/temporal/constants.js';
import { resolveRun, runStatus } from '../src/temporal/runs.js';
import { launcherPython } from '../src/activities/trainer-process.js';
import type { ChildProcess } from 'node:child_process';
import type { Client } from '@temporalio/client';
import { clusterManifest, setupCluster } from '../test/cluster/harness.js';
import { fakePlan, fakeStep, journal, POOL, ROOT, setupEnv, sleep, startPlan, tmpRunDir } from '../test/integration/harness.js';

/** The control plane a bench runs on: the embedded dev server, or the cluster tier. */
interface Tier {
  name: string;
  dir: string;
  client: Client;
  address: string;
  serverPid: number;
  startWorker(extra: string[]): Promise<ChildProcess>;
  teardown(): Promise<void>;
}

async function tier(name: string, cluster: boolean): Promise<Tier> {
  if (!cluster) {
    const env = await setupEnv(name);
    return { name: 'embedded dev server (SQLite)', dir: env.dir, client: env.client, address: env.server.address, serverPid: env.server.pid, startWorker: (extra) => env.startWorker(extra), teardown: () => env.teardown() };
  }
  const { manifest, missing } = clusterManifest();
  if (!manifest) throw new Error(`no cluster tier here: ${missing}`);
  const env = await setupCluster(name, manifest);
  return { name: `cluster tier (Temporal ${manifest.version} on PostgreSQL ${manifest.pgVersion})`, dir: env.dir, client: env.client, address: env.address, serverPid: env.server.pid, startWorker: (extra) => env.startWorker(extra), teardown: () => env.teardown() };
}

const pct = (xs: number[], p: number) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};
const load = () => loadavg()[0]!.toFixed(1);
const mb = (kb: number) => `${(kb / 1024).toFixed(0)} MB`;

/** VmRSS of a process, kB (0 when it is gone). */
function rssKb(pid: number): number {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** CPU seconds of a process: its own, and its reaped children's (the worker's trainers). */
function cpuSec(pid: number): { self: number; children: number } {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const tick = 100;
  return { self: (Number(f[11]) + Number(f[12])) / tick, children: (Number(f[13]) + Number(f[14])) / tick };
}

/** CPU seconds of the live processes whose command line mentions `needle` (the report renderers, still idle). */
function liveCpuSec(needle: string): number {
  let sum = 0;
  for (const pid of readdirSync('/proc').filter((n) => /^\d+$/.test(n)).map(Number)) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(needle)) sum += cpuSec(pid).self;
    } catch {
      /* gone */
    }
  }
  return sum;
}

/** The trainers' CPU, s: reaped by the worker's spawn helper (util/spawner.ts), they count in its children's time. */
function helperChildrenCpuSec(): number {
  let sum = 0;
  for (const pid of readdirSync('/proc').filter((n) => /^\d+$/.test(n)).map(Number)) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('spawner-child')) sum += cpuSec(pid).children;
    } catch {
      /* gone */
    }
  }
  return sum;
}

/** Every execution of the workflows under `prefix`: events and bytes, and how many continued as new. */
async function histories(env: Tier, prefix: string): Promise<{ id: string; events: number; bytes: number; continued: number }[]> {
  const byId = new Map<string, { id: string; events: number; bytes: number; continued: number }>();
  for await (const wf of env.client.workflow.list({ query: `WorkflowId STARTS_WITH '${prefix}'` })) {
    const d = await env.client.workflow.getHandle(wf.workflowId, wf.runId).describe();
    const cur = byId.get(wf.workflowId) ?? { id: wf.workflowId, events: 0, bytes: 0, continued: 0 };
    cur.events = Math.max(cur.events, d.historyLength);
    cur.bytes = Math.max(cur.bytes, Number(d.raw.workflowExecutionInfo?.historySizeBytes ?? 0));
    if (wf.status.name === 'CONTINUED_AS_NEW') cur.continued += 1;
    byId.set(wf.workflowId, cur);
  }
  return [...byId.values()].sort((a, b) => a.id.localeCompare(b.id));
}

async function longAttempt(checkpoints: number, evalEvery: number, cluster: boolean): Promise<void> {
  const env = await tier('scale-long', cluster);
  try {
    const worker = await env.startWorker(['--slots', '4']);
    const runDir = tmpRunDir(env, 'long');
    const train = fakeStep({ id: 'cpt.stable', runDir, iters: checkpoints, sleep: 0.002, saveInterval: 1 });
    let step: PlanStep = train;
    if (evalEvery > 0) {
      const exportStep: PlanStep = { ...fakeStep({ id: 'cpt.stable.eval{iteration}.export', runDir, files: true }), kind: 'convert' };
      const score = fakeStep({ id: 'cpt.stable.eval{iteration}.arith', runDir, files: true, dependsOn: [exportStep.id] });
      step = { ...train, checkpointEval: { every: evalEvery, root: train.checkpoint!.dir, taskQueue: poolTaskQueue(POOL), steps: [exportStep, score] } };
    }
    // keep.last 2, as the issue's run; a checkpoint queued for evaluation stays until its score is written.
    const marker = join(runDir, 'cpt.stable.eval{iteration}.arith', 'report.json');
    step.checkpoint = { ...step.checkpoint!, retention: { last: 2, every: null, protect: [], summary: 'keep last 2', maxKept: 3, checkpointBytes: { withOptimizer: 1, weightsOnly: 1 }, ...(evalEvery > 0 ? { awaitEval: { every: evalEvery, marker } } : {}) } };
    const t0 = Date.now();
    const h = await startPlan(env, fakePlan(runDir, 'long', [step]), { heartbeatTimeoutSec: 60 });
    let done = false;
    let failed: string | null = null;
    void h.result().then(
      () => (done = true),
      (e: unknown) => ((done = true), (failed = String(e))),
    );
    const rss: string[] = [];
    let peak = 0;
    let nextLine = 0;
    while (!done) {
      await sleep(2_000);
      const kb = rssKb(worker.pid!);
      peak = Math.max(peak, kb);
      const s = (Date.now() - t0) / 1000;
      if (s >= nextLine) {
        nextLine += 60;
        const last = journal(runDir, 'cpt.stable').at(-1)?.iteration ?? 0;
        const [run, stage] = await Promise.all(['fake-long', stepWorkflowId('fake-long', 'cpt.stable')].map((id) => env.client.workflow.getHandle(id).describe().then((d) => d.historyLength, () => 0)));
        rss.push(`${s.toFixed(0)}s ${mb(kb)}`);
        console.log(`  ${s.toFixed(0)} s: iteration ${last}, worker RSS ${mb(kb)}, run ${run} events, stage ${stage} events (load ${load()})`);
      }
    }
    const wall = (Date.now() - t0) / 1000;
    console.log(`[${env.name}] one attempt, ${checkpoints} checkpoints (a 2 ms iteration each, keep.last 2${evalEvery ? `, evaluated every ${evalEvery}` : ''}): ${failed ? `FAILED ${failed}` : 'completed'} in ${wall.toFixed(0)} s; worker peak RSS ${mb(peak)} (load ${load()})`);
    console.log(`  worker RSS over time: ${rss.join(', ')}`);
    for (const w of await histories(env, 'fake-long')) {
      console.log(`  ${w.id}: ${w.events} events, ${(w.bytes / 1024).toFixed(0)} KiB${w.continued ? `, continued as new ${w.continued} times` : ''}`);
    }
  } finally {
    await env.teardown();
  }
}

/** The most intervals open at once. */
function mostAtOnce(intervals: [number, number][]): number {
  const edges = intervals.flatMap(([a, b]) => [[a, 1] as const, [b, -1] as const]).sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  let cur = 0;
  let most = 0;
  for (const [, d] of edges) most = Math.max(most, (cur += d));
  return most;
}

/** An event's time, s (the server's clock). */
const evSec = (e: { eventTime?: { seconds?: unknown; nanos?: number | null } | null }) => Number(e.eventTime?.seconds ?? 0) + (e.eventTime?.nanos ?? 0) / 1e9;
type HistoryEvent = Awaited<ReturnType<ReturnType<Client['workflow']['getHandle']>['fetchHistory']>>['events'] extends (infer E)[] | null | undefined ? E : never;

/**
 * The dispatch part of a hand-off, from the workflows' histories (the server's timestamps): the runStep activity
 * of step k-1 completed → its stage closed → the run workflow saw it → started step k's stage → that stage
 * scheduled its runStep → a worker took it. And every workflow task of those workflows: its wait in the queue
 * (scheduled → started: pollers, the worker's slots) and its run on the worker (started → completed).
 */
async function dispatchParts(client: Client, runIds: string[], steps: number) {
  const parts = { 'activity done → stage closed': [] as number[], 'stage closed → run saw it': [] as number[], 'run saw it → next stage started': [] as number[], 'stage started → activity scheduled': [] as number[], 'activity scheduled → taken': [] as number[] };
  const wtWait: number[] = [];
  const wtRun: number[] = [];
  const events = async (id: string) => (await client.workflow.getHandle(id).fetchHistory()).events ?? [];
  const taskTimes = (evs: HistoryEvent[]) => {
    let scheduled = 0;
    let started = 0;
    for (const e of evs) {
      if (e.workflowTaskScheduledEventAttributes) scheduled = evSec(e);
      if (e.workflowTaskStartedEventAttributes) wtWait.push((started = evSec(e)) - scheduled);
      if (e.workflowTaskCompletedEventAttributes) wtRun.push(evSec(e) - started);
    }
  };
  for (const runId of runIds) {
    const run = await events(runId);
    taskTimes(run);
    const stages = await Promise.all(Array.from({ length: steps }, (_, k) => events(stepWorkflowId(runId, `step.${k}`))));
    stages.forEach(taskTimes);
    for (let k = 1; k < steps; k++) {
      const prev = stages[k - 1]!;
      const next = stages[k]!;
      const done = prev.filter((e) => e.activityTaskCompletedEventAttributes).map(evSec).at(-1)!;
      const closed = evSec(prev.find((e) => e.workflowExecutionCompletedEventAttributes)!);
      const saw = evSec(run.find((e) => e.childWorkflowExecutionCompletedEventAttributes?.workflowExecution?.workflowId === stepWorkflowId(runId, `step.${k - 1}`))!);
      const started = evSec(next[0]!);
      const scheduledEv = next.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runStep')!;
      const scheduled = evSec(scheduledEv);
      const taken = evSec(next.find((e) => e.activityTaskStartedEventAttributes && String(e.activityTaskStartedEventAttributes.scheduledEventId) === String(scheduledEv.eventId))!);
      const vals = [closed - done, saw - closed, started - saw, scheduled - started, taken - scheduled];
      Object.values(parts).forEach((xs, i) => xs.push(vals[i]!));
    }
  }
  return { parts, wtWait, wtRun };
}

/**
 * CPU seconds one trainer start costs (the launcher, then the fake trainer to its first iteration and exit), from
 * `k` starts one after another: N hand-offs at the same moment need N of these on the machine's cores before the
 * last trainer runs, whatever the orchestration costs.
 */
async function trainerStartCpuSec(env: Tier, k = 10): Promise<number> {
  const dir = tmpRunDir(env, 'start-floor');
  const step = fakeStep({ id: 'floor', runDir: dir, iters: 1, sleep: 0 });
  const launcher = join(ROOT, LAUNCHER_FILE);
  // The interpreter the worker runs the launcher with.
  const python = await launcherPython();
  mkdirSync(step.command.cwd!, { recursive: true });
  const before = cpuSec(process.pid).children;
  for (let i = 0; i < k; i++) execFileSync(python, ['-I', '-S', launcher, '--', ...step.command.argv], { cwd: dir, stdio: 'ignore' });
  return (cpuSec(process.pid).children - before) / k;
}

async function concurrentRuns(n: number, cluster: boolean, staggerSec: number): Promise<void> {
  const env = await tier(`scale-${n}`, cluster);
  try {
    const worker = await env.startWorker(['--slots', String(n)]);
    const iters = 100;
    const sleepSec = 0.2;
    const stepsPerRun = 3;
    const plans = Array.from({ length: n }, (_, i) => {
      const runDir = tmpRunDir(env, `r${i}`);
      return fakePlan(runDir, `r${i}`, Array.from({ length: stepsPerRun }, (_, k) => fakeStep({ id: `step.${k}`, runDir, iters, sleep: sleepSec, saveInterval: 10, dependsOn: k ? [`step.${k - 1}`] : [] })));
    });
    const cpu0 = { worker: cpuSec(worker.pid!), server: cpuSec(env.serverPid), trainers: helperChildrenCpuSec() };
    const t0 = Date.now();
    // Staggered, the runs start evenly over `staggerSec` (a lab's runs, which rarely hand over in the same second);
    // at 0 all start together and, their steps being equal, all hand over together: the worst case.
    const handles = await Promise.all(plans.map(async (p, i) => {
      await sleep((staggerSec * 1000 * i) / n);
      return startPlan(env, p, { heartbeatTimeoutSec: 60 });
    }));
    let finished = 0;
    const results = Promise.allSettled(handles.map((h) => h.result().finally(() => (finished += 1))));
    const statusTimes: number[] = [];
    let peakWorker = 0;
    let peakServer = 0;
    let i = 0;
    while (finished < n) {
      peakWorker = Math.max(peakWorker, rssKb(worker.pid!));
      peakServer = Math.max(peakServer, rssKb(env.serverPid));
      // `status` of one run after another, as people would: what `infir2 status` does after connecting.
      const s0 = performance.now();
      try {
        await runStatus(env.client, await resolveRun(env.client, handles[i++ % n]!.workflowId), false);
        statusTimes.push((performance.now() - s0) / 1000);
      } catch {
        /* a run closing under us */
      }
      await sleep(250);
    }
    const settled = await results;
    const wall = (Date.now() - t0) / 1000;
    const cpu1 = { worker: cpuSec(worker.pid!), server: cpuSec(env.serverPid), trainers: helperChildrenCpuSec() };
    // Renderers still alive (idle) are not in the worker's children's time yet.
    const renderers = liveCpuSec('report-process');
    const failures = settled.filter((r) => r.status === 'rejected').length;
    const intervals: [number, number][] = [];
    const gaps: number[] = [];
    // The gap in three: the trainer's end to the supervisor's `ended` line (its last save, exit, clean-up),
    // that line to the next attempt's `taken by worker` line (the workflows and the activity's dispatch), that line
    // to its `starting` line (the activity's phases: preflight, lock, GPUs, resume point), and that line to the
    // next trainer's first iteration (the launcher's and the trainer's interpreters).
    const parts = { exit: [] as number[], dispatch: [] as number[], phases: [] as number[], startup: [] as number[] };
    const byHandoff: number[][] = [];
    const stamp = (runDir: string, id: string, what: RegExp) => {
      const m = new RegExp(`^\\[infir2 (\\S+)\\] attempt 1 ${what.source}`, 'm').exec(readFileSync(join(runDir, 'logs', `${id}.log`), 'utf8'));
      return m ? Date.parse(m[1]!) / 1000 : NaN;
    };
    for (const p of plans) {
      const spans = p.steps.map((s) => {
        const j = journal(p.runDir, s.id);
        return [j[0]!.t - sleepSec, j.at(-1)!.t] as [number, number];
      });
      intervals.push(...spans);
      for (let k = 1; k < spans.length; k++) {
        gaps.push(spans[k]![0] - spans[k - 1]![1]);
        (byHandoff[k - 1] ??= []).push(spans[k]![0] - spans[k - 1]![1]);
        const ended = stamp(p.runDir, p.steps[k - 1]!.id, /ended/);
        const taken = stamp(p.runDir, p.steps[k]!.id, /taken by worker/);
        const starting = stamp(p.runDir, p.steps[k]!.id, /starting/);
        parts.exit.push(ended - spans[k - 1]![1]);
        parts.dispatch.push(taken - ended);
        parts.phases.push(starting - taken);
        parts.startup.push(spans[k]![0] - starting);
      }
    }
    const steps = n * stepsPerRun;
    const cliEnv = { ...process.env, TEMPORAL_ADDRESS: env.address };
    const cli = Array.from({ length: 3 }, () => {
      const c0 = performance.now();
      execFileSync(process.execPath, [join(ROOT, 'bin', 'infir2.js'), 'status', handles[0]!.workflowId, '--json'], { env: cliEnv, stdio: 'ignore' });
      return (performance.now() - c0) / 1000;
    });
    const startCpu = await trainerStartCpuSec(env);
    const cores = availableParallelism();
    console.log(`[${env.name}] N = ${n} concurrent runs × ${stepsPerRun} steps (${iters} iterations of ${sleepSec} s, a checkpoint every 10), one worker --slots ${n}, ${staggerSec ? `started evenly over ${staggerSec} s` : 'all started at once (every hand-off at the same moment: the worst case)'}: ${n - failures}/${n} completed in ${wall.toFixed(0)} s (load ${load()})`);
    console.log(`  one trainer's start (launcher + fake trainer, to its exit after one iteration): ${(startCpu * 1000).toFixed(0)} ms of CPU; ${n} at the same moment on ${cores} cores: ${((startCpu * n) / cores).toFixed(2)} s before the last one runs, with no orchestration at all`);
    console.log(`  most trainers at once: ${mostAtOnce(intervals)}`);
    console.log(`  hand-off gap (last iteration → next step's first iteration, less one iteration): p50 ${pct(gaps, 50).toFixed(2)} s, p95 ${pct(gaps, 95).toFixed(2)} s`);
    for (const [what, xs] of Object.entries(parts)) console.log(`    ${what}: p50 ${pct(xs, 50).toFixed(2)} s, p95 ${pct(xs, 95).toFixed(2)} s`);
    try {
      const d = await dispatchParts(env.client, handles.map((h) => h.workflowId), stepsPerRun);
      console.log(`    dispatch, from the histories: ${Object.entries(d.parts).map(([what, xs]) => `${what} p50 ${pct(xs, 50).toFixed(2)} / p95 ${pct(xs, 95).toFixed(2)} s`).join('; ')}`);
      console.log(`    workflow tasks (${d.wtRun.length}): queued p50 ${pct(d.wtWait, 50).toFixed(3)} / p95 ${pct(d.wtWait, 95).toFixed(3)} s, on the worker p50 ${pct(d.wtRun, 50).toFixed(3)} / p95 ${pct(d.wtRun, 95).toFixed(3)} s`);
    } catch (err) {
      console.log(`    dispatch from the histories: not read (${(err as Error).message})`);
    }
    console.log(`    by hand-off: ${byHandoff.map((xs, k) => `step ${k} → ${k + 1} p50 ${pct(xs, 50).toFixed(2)} s, p95 ${pct(xs, 95).toFixed(2)} s`).join('; ')}`);
    console.log(`  status (resolve + read, in process; ${statusTimes.length} reads): p50 ${pct(statusTimes, 50).toFixed(3)} s, p95 ${pct(statusTimes, 95).toFixed(3)} s; the CLI after the runs (a fresh node each time): ${cli.map((x) => x.toFixed(2)).join(', ')} s`);
    console.log(`  peak RSS: worker ${mb(peakWorker)}, server ${mb(peakServer)}`);
    const per = (a: number, b: number) => ((b - a) / steps).toFixed(3);
    console.log(`  CPU per step: worker ${per(cpu0.worker.self, cpu1.worker.self)} s, server ${per(cpu0.server.self, cpu1.server.self)} s; the trainers (launcher and fake trainer) ${per(cpu0.trainers, cpu1.trainers)} s; the worker's children (exited report renderers; trainers too with INFIR2_SPAWN_HELPER=0) ${per(cpu0.worker.children, cpu1.worker.children)} s, live report renderers ${(renderers / steps).toFixed(3)} s`);
  } finally {
    await env.teardown();
  }
}

const cluster = process.argv.includes('--cluster');
const staggerAt = process.argv.indexOf('--stagger');
const stagger = staggerAt > 0 ? Number(process.argv[staggerAt + 1]) : 0;
const [part = 'all', ...args] = process.argv.slice(2).filter((a, i, all) => a !== '--cluster' && a !== '--stagger' && all[i - 1] !== '--stagger');
if (part === 'long' || part === 'all') await longAttempt(Number(args[0] ?? 100_000), Number(args[1] ?? 10_000), cluster);
if (part === 'runs' || part === 'all') for (const n of (part === 'runs' && args.length ? args : ['10', '50', '100']).map(Number)) await concurrentRuns(n, cluster, stagger);
