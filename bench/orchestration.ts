/**
 * Orchestration benchmarks (run: `make bench`, or `npx tsx bench/orchestration.ts [handoff|overhead|timeline|recovery|hang|stall]...`). Prints figures; asserts
 * nothing, because timings on a busy 2-core machine are for reading, not for failing a build.
 *
 *  1. stage hand-off gap: exit of one process → start of the next, median over a 10-step plan of instant steps
 *  2. whole-run overhead: a 3-step plan of ~10 s fake-trainer steps vs the same commands back to back in a shell
 *     (`timeline`: every event of such a run, to see where the rest goes)
 *  3. recovery after a worker SIGKILL: kill → the resumed trainer's first iteration, with a 10 s heartbeat timeout
 *  4. hang detection: the hung trainer's last iteration → the supervisor's kill, and → the resumed trainer's
 *     first iteration, with a 5 s stall timeout
 *  5. the default adaptive stall limits (a recipe with no stallTimeout; the 7B CPT and RL steps'): a hang of 1 s
 *     iterations, and the longest silences of healthy stand-ins (a 90 s checkpoint load, 20 s saves, 5–60 s
 *     rollouts) with the limit in force at the time
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { compilePlan } from '../src/plan/compile.js';
import type { PlanStep, StallSpec } from '../src/plan/types.js';
import { loadRecipe } from '../src/recipe/load.js';
import { stepWorkflowId } from '../src/temporal/constants.js';
import { fakePlan, fakeStep, journal, PYTHON, ROOT, setupEnv, startPlan, waitFor, type Env } from '../test/integration/harness.js';

const STAMP = join(ROOT, 'bench', 'fixtures', 'stamp_step.py');

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

async function handoffGap(env: Env): Promise<void> {
  const runDir = join(env.dir, 'runs', 'handoff');
  const stamps = join(runDir, 'stamps.txt');
  mkdirSync(runDir, { recursive: true });
  const steps: PlanStep[] = Array.from({ length: 10 }, (_, i) => {
    const s = fakeStep({ id: `step.${i}`, runDir, files: true, dependsOn: i ? [`step.${i - 1}`] : [] });
    const out = s.outputs.report!;
    return { ...s, command: { ...s.command, argv: [PYTHON, STAMP, stamps, `step.${i}`, out] } };
  });
  const t0 = Date.now();
  await (await startPlan(env, fakePlan(runDir, 'handoff', steps))).result();
  const wall = (Date.now() - t0) / 1000;
  const lines = readFileSync(stamps, 'utf8').trim().split('\n').map((l) => l.split(' '));
  const start = new Map(lines.filter((l) => l[0] === 'start').map((l) => [l[1], Number(l[2])]));
  const end = new Map(lines.filter((l) => l[0] === 'end').map((l) => [l[1], Number(l[2])]));
  const gaps = steps.slice(1).map((s, i) => start.get(s.id)! - end.get(`step.${i}`)!);
  console.log(`hand-off gap (exit → next start), 10 instant steps: median ${median(gaps).toFixed(3)} s, max ${Math.max(...gaps).toFixed(3)} s; whole plan ${wall.toFixed(2)} s`);
}

async function overhead(env: Env): Promise<void> {
  const n = 3;
  const iters = 100;
  const stepsIn = (runDir: string) =>
    Array.from({ length: n }, (_, i) => fakeStep({ id: `train.${i}`, runDir, iters, sleep: 0.1, saveInterval: 25, dependsOn: i ? [`train.${i - 1}`] : [] }));
  // Back to back in a shell: the same argv, fresh checkpoint dirs.
  const shellDir = join(env.dir, 'runs', 'overhead-shell');
  const shellSteps = stepsIn(shellDir);
  const script = shellSteps.map((s) => s.command.argv.map((a) => `'${a}'`).join(' ') + ' >/dev/null').join(' && ');
  for (const s of shellSteps) mkdirSync(s.command.cwd, { recursive: true });
  const s0 = Date.now();
  execFileSync('bash', ['-c', script]);
  const shell = (Date.now() - s0) / 1000;
  // The same plan twice on the same worker: its first run pays for what a worker does once (the first workflow
  // task compiles the workflow code's paths, ~0.1 s here); a worker serves runs for weeks, so the second is the
  // steady state.
  for (const [k, which] of ['first run on a fresh worker', 'the next run on that worker'].entries()) {
    const runDir = join(env.dir, 'runs', `overhead-${k + 1}`);
    const steps = stepsIn(runDir);
    const t0 = Date.now();
    await (await startPlan(env, fakePlan(runDir, `overhead${k + 1}`, steps))).result();
    const t1 = Date.now();
    const orchestrated = (t1 - t0) / 1000;
    const perStep = (orchestrated - shell) / n;
    console.log(
      `whole-run overhead, ${n} steps × ${iters} iterations, ${which}: shell ${shell.toFixed(2)} s, infir2 ${orchestrated.toFixed(2)} s, ` +
        `overhead ${(((orchestrated - shell) / shell) * 100).toFixed(1)} % (${perStep.toFixed(2)} s per step)`,
    );
    // Where it goes: the run's start to the first iteration, the hand-offs, the last iteration to the run's end (the
    // report's page included); each less one iteration, which the shell spends too.
    const spans = steps.map((s) => journal(runDir, s.id)).map((j) => [j[0]!.t - 0.1, j.at(-1)!.t] as const);
    const gaps = spans.slice(1).map((sp, i) => sp[0] - spans[i]![1]);
    console.log(`  start → first iteration ${(spans[0]![0] - t0 / 1000).toFixed(2)} s; hand-offs ${gaps.map((g) => g.toFixed(2)).join(', ')} s; last iteration → run completed ${(t1 / 1000 - spans.at(-1)![1]).toFixed(2)} s`);
  }
}

/** An event's time, s (the server's clock). */
const evSec = (e: { eventTime?: { seconds?: unknown; nanos?: number | null } | null }) => Number(e.eventTime?.seconds ?? 0) + (e.eventTime?.nanos ?? 0) / 1e9;

/**
 * Where a run's time goes between its trainers: a 3-step plan of 2 s steps, after one run on the same worker, with
 * every event of the run's and its stages' histories (the server's clock) between the trainers' first and last
 * iterations (their journals), each with its offset from the run's start and from the line before.
 */
async function timeline(env: Env): Promise<void> {
  const plan = (name: string) => {
    const runDir = join(env.dir, 'runs', name);
    mkdirSync(runDir, { recursive: true });
    return fakePlan(runDir, name, Array.from({ length: 3 }, (_, i) => fakeStep({ id: `train.${i}`, runDir, iters: 20, sleep: 0.1, saveInterval: 25, dependsOn: i ? [`train.${i - 1}`] : [] })));
  };
  await (await startPlan(env, plan('timeline-warmup'))).result();
  const p = plan('timeline');
  const t0 = Date.now() / 1000;
  const h = await startPlan(env, p);
  await h.result();
  const marks: [number, string][] = [[t0, 'client: run started'], [Date.now() / 1000, 'client: result']];
  for (const s of p.steps) {
    const j = journal(p.runDir, s.id);
    marks.push([j[0]!.t, `${s.id}: first iteration`], [j.at(-1)!.t, `${s.id}: last iteration`]);
  }
  for (const [id, tag] of [[h.workflowId, 'run'], ...p.steps.map((s) => [stepWorkflowId(h.workflowId, s.id), s.id])] as const) {
    for (const e of (await env.client.workflow.getHandle(id).fetchHistory()).events ?? []) {
      const kind = Object.keys(e).find((k) => k.endsWith('EventAttributes') && (e as Record<string, unknown>)[k]) ?? 'event';
      const activity = e.activityTaskScheduledEventAttributes?.activityType?.name;
      marks.push([evSec(e), `${tag}: ${kind.replace('EventAttributes', '')}${activity ? ` ${activity}` : ''}`]);
    }
  }
  marks.sort((a, b) => a[0] - b[0]);
  console.log('timeline of a 3-step run on a warm worker (s from its start, ms since the line before):');
  let prev = t0;
  for (const [t, m] of marks) {
    console.log(`  ${(t - t0).toFixed(3).padStart(7)} ${`+${((t - prev) * 1000).toFixed(0)}`.padStart(6)} ms  ${m}`);
    prev = t;
  }
}

async function recovery(env: Env): Promise<void> {
  const runDir = join(env.dir, 'runs', 'recovery');
  const hb = 10;
  const victim = env.workers.at(-1)!;
  const plan = fakePlan(runDir, 'recovery', [fakeStep({ id: 'cpt.stable', runDir, iters: 200, sleep: 0.1, saveInterval: 10 })]);
  const h = await startPlan(env, plan, { heartbeatTimeoutSec: hb, retryDelaySec: 1 });
  await waitFor('iteration 25', () => journal(runDir, 'cpt.stable').some((e) => e.iteration >= 25));
  const firstPid = journal(runDir, 'cpt.stable')[0]!.pid;
  process.kill(victim.pid!, 'SIGKILL');
  const killedAt = Date.now();
  await env.startWorker();
  await waitFor('the resumed trainer', () => journal(runDir, 'cpt.stable').some((e) => e.pid !== firstPid), 120_000);
  const rec = (Date.now() - killedAt) / 1000;
  await h.result();
  console.log(`recovery after worker SIGKILL: ${rec.toFixed(1)} s to the resumed trainer's first iteration (heartbeat timeout ${hb} s; target ≤ ${hb + 5} s)`);
}

async function hangDetection(env: Env): Promise<void> {
  const runDir = join(env.dir, 'runs', 'hang');
  const stall = 5;
  const plan = fakePlan(runDir, 'hang', [fakeStep({ id: 'cpt.warmup', runDir, iters: 40, sleep: 0.1, saveInterval: 10, faults: ['hang@25'], stallTimeoutSec: stall })]);
  const h = await startPlan(env, plan);
  await waitFor('iteration 24', () => journal(runDir, 'cpt.warmup').some((e) => e.iteration === 24));
  const hungAt = Date.now();
  const firstPid = journal(runDir, 'cpt.warmup')[0]!.pid;
  const log = join(runDir, 'logs', 'cpt.warmup.log');
  await waitFor('the stall kill', () => /stopping the process group \d+: stall/.test(readFileSync(log, 'utf8')), 60_000);
  const killed = (Date.now() - hungAt) / 1000;
  await waitFor('the resumed trainer', () => journal(runDir, 'cpt.warmup').some((e) => e.pid !== firstPid), 60_000);
  const resumed = (Date.now() - hungAt) / 1000;
  await h.result();
  console.log(`hang detection: killed ${killed.toFixed(1)} s after the last iteration, resumed trainer's first iteration at ${resumed.toFixed(1)} s (stall timeout ${stall} s; target ≤ ${stall + 5} s to the kill)`);
}

/** The longest silence between two progress lines of a step's log, seconds (its trainer's own timestamps, to the second). */
function longestSilence(runDir: string, stepId: string): number {
  const stamps = [...readFileSync(join(runDir, 'logs', `${stepId}.log`), 'utf8').matchAll(/\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] iteration/g)].map((m) => new Date(m[1]!.replace(' ', 'T')).getTime());
  return Math.max(0, ...stamps.slice(1).map((t, i) => (t - stamps[i]!) / 1000));
}

async function defaultStallLimits(env: Env): Promise<void> {
  const plan7b = compilePlan((await loadRecipe(join(ROOT, 'recipes', 'qwen2.5-7b-fp8.yaml'))).recipe, { runId: 'x' });
  const spec = (id: string) => plan7b.steps.find((s) => s.id === id)!.stall!;
  const runDir = join(env.dir, 'runs', 'adaptive');
  const step = (o: Omit<Parameters<typeof fakeStep>[0], 'runDir'>, s: StallSpec) =>
    fakeStep({ ...o, runDir, stall: { ...s, saveEvery: o.saveInterval ?? 3, evalEvery: null }, stallTimeoutSec: s.capSec });
  const h = await startPlan(env, fakePlan(runDir, 'adaptive', [
    step({ id: 'cpt.hang', iters: 30, saveInterval: 10, sleep: 1, faults: ['hang@20'] }, spec('cpt.stable')),
    step({ id: 'cpt.load', iters: 12, saveInterval: 3, sleep: 1, faults: ['crash@8'], extraArgs: ['--load-sleep', '90'] }, spec('cpt.stable')),
    step({ id: 'cpt.save', iters: 10, saveInterval: 6, sleep: 1, extraArgs: ['--save-sleep', '20'] }, spec('cpt.stable')),
    step({ id: 'rl.rollouts', iters: 4, saveInterval: 2, extraArgs: ['--sleep-cycle', '5,60,10,25'] }, spec('rl.stage1')),
  ]));
  await waitFor('cpt.hang at iteration 19', () => journal(runDir, 'cpt.hang').some((e) => e.iteration === 19), 120_000);
  const hungAt = Date.now();
  await waitFor('the stall kill', () => /stopping the process group \d+: stall/.test(readFileSync(join(runDir, 'logs', 'cpt.hang.log'), 'utf8')), 120_000);
  const killed = (Date.now() - hungAt) / 1000;
  const res = (await h.result()) as { status: { steps: { id: string; failures: Record<string, number> }[] } };
  const hangs = (id: string) => res.status.steps.find((s) => s.id === id)!.failures.hang ?? 0;
  console.log(`default stall limits (no stallTimeout; 7B CPT: max(20 s, 10 × p95 gap), RL: max(10 m, 3 × longest gap)):`);
  console.log(`  hang of 1 s iterations: killed ${killed.toFixed(1)} s after its last iteration (goal ≤ 30 s)`);
  for (const [id, what] of [['cpt.load', 'a silent 90 s checkpoint load'], ['cpt.save', 'silent 20 s saves'], ['rl.rollouts', '5–60 s rollouts']] as const) {
    console.log(`  ${what}: longest silence ${longestSilence(runDir, id).toFixed(0)} s, hangs declared ${hangs(id)} (goal 0)`);
  }
}

// `npx tsx bench/orchestration.ts [part ...]`: only the parts named (all of them by default).
const PARTS = { handoff: handoffGap, overhead, timeline, recovery, hang: hangDetection, stall: defaultStallLimits };
const chosen = process.argv.slice(2);
for (const c of chosen) if (!(c in PARTS)) throw new Error(`unknown part ${c}: ${Object.keys(PARTS).join(', ')}`);
const env = await setupEnv('bench');
try {
  await env.startWorker();
  for (const [name, part] of Object.entries(PARTS)) if (!chosen.length || chosen.includes(name)) await part(env);
} finally {
  await env.teardown();
}
