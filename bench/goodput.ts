/**
 * Goodput under faults (run: `npx tsx bench/goodput.ts`, or `make bench`). A stand-in trainer with realistic
 * proportions (iterations, silent saves and checkpoint loads, a process start) runs one long CPT step through the
 * real orchestrator (dev server, worker, workflows, supervisor) while a seeded schedule injects a crash, a hang
 * and a worker SIGKILL. It prints the measured goodput beside the best achievable for that schedule and save
 * interval: the goodput of an ideal orchestrator that notices every failure at once and restarts at once, but
 * still pays the trainer's own start, checkpoint load and the iterations lost since the last checkpoint.
 *
 * Time is compressed 20×: an iteration of 0.5 s stands for 10 s on a cluster, a 1 s save for 20 s, a 2 s load
 * for 40 s, and the orchestrator's absolute settings are scaled the same way (heartbeat timeout 60 s → 3 s, retry
 * delay 5 s → 0.25 s, kill grace 30 s → 2 s, the default stall limits' floor, startup and save allowances ÷ 20);
 * the stall factor is a ratio of the trainer's own rhythm and stays 10. Both figures come from the run's files and
 * the bench's clock (the step's log, the trainer's journal), not from infir2's accounting, which is printed beside
 * them for comparison.
 *
 * Knobs: GOODPUT_ITERS (1500), GOODPUT_ITER_S (0.5), GOODPUT_SAVE_EVERY (50), GOODPUT_SEED (7).
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { StepState } from '../src/plan/contracts.js';
import type { GoodputFigures } from '../src/plan/goodput.js';
import { compilePlan } from '../src/plan/compile.js';
import type { StallSpec } from '../src/plan/types.js';
import { loadRecipe } from '../src/recipe/load.js';
import { fakePlan, fakeStep, journal, ROOT, setupEnv, startPlan, waitFor } from '../test/integration/harness.js';

const SCALE = 20;
const ITERS = Number(process.env.GOODPUT_ITERS ?? 1500);
const ITER_S = Number(process.env.GOODPUT_ITER_S ?? 0.5);
const SAVE_EVERY = Number(process.env.GOODPUT_SAVE_EVERY ?? 50);
const SEED = Number(process.env.GOODPUT_SEED ?? 7);
const SAVE_S = 1;
const LOAD_S = 2;
const START_S = 1;
const HEARTBEAT_S = 60 / SCALE;
const RETRY_S = 5 / SCALE;
const KILL_GRACE_S = 2;

/** mulberry32: a small seeded generator, so a schedule is the same on every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Three faults at distinct iterations between 10 % and 90 % of the run, in a seeded order, none on a save. */
function schedule(): { kind: 'crash' | 'hang' | 'workerkill'; at: number }[] {
  const r = rng(SEED);
  const kinds = (['crash', 'hang', 'workerkill'] as const).map((k) => ({ k, o: r() })).sort((a, b) => a.o - b.o).map((x) => x.k);
  const used = new Set<number>();
  return kinds.map((kind) => {
    let at = 0;
    do at = Math.floor(ITERS * (0.1 + 0.8 * r()));
    while (at % SAVE_EVERY === 0 || [...used].some((u) => Math.abs(u - at) < 2 * SAVE_EVERY));
    used.add(at);
    return { kind, at };
  });
}

/** The default adaptive stall limits of a CPT step (as the 7B recipe compiles them), absolute times ÷ SCALE. */
async function scaledStallSpec(): Promise<StallSpec> {
  const plan = compilePlan((await loadRecipe(join(ROOT, 'recipes', 'qwen2.5-7b-fp8.yaml'))).recipe, { runId: 'x' });
  const s = plan.steps.find((x) => x.id === 'cpt.stable')!.stall!;
  return { ...s, startupSec: s.startupSec / SCALE, floorSec: s.floorSec / SCALE, saveSec: s.saveSec / SCALE, evalSec: s.evalSec / SCALE, capSec: s.capSec / SCALE, saveEvery: SAVE_EVERY, evalEvery: null };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)]! : 0;
}

const pct = (x: number) => `${(x * 100).toFixed(2)} %`;

async function main(): Promise<void> {
  const faults = schedule();
  const spec = await scaledStallSpec();
  const env = await setupEnv('goodput-bench');
  try {
    let worker = await env.startWorker(['--kill-grace', String(KILL_GRACE_S)]);
    const runDir = join(env.dir, 'runs', 'goodput');
    const step = fakeStep({
      id: 'cpt.stable',
      runDir,
      iters: ITERS,
      saveInterval: SAVE_EVERY,
      sleep: ITER_S,
      faults: faults.filter((f) => f.kind !== 'workerkill').map((f) => `${f.kind}@${f.at}`),
      extraArgs: ['--save-sleep', String(SAVE_S), '--load-sleep', String(LOAD_S), '--startup', String(START_S)],
      stall: spec,
      stallTimeoutSec: spec.capSec,
      retries: { crash: 3, hang: 3, preempted: 3 },
    });
    console.log(
      `goodput under faults: ${ITERS} iterations of ${ITER_S} s, a ${SAVE_S} s save every ${SAVE_EVERY}, ${LOAD_S} s load, ${START_S} s start ` +
        `(time compressed ${SCALE}×); faults (seed ${SEED}): ${faults.map((f) => `${f.kind}@${f.at}`).join(', ')}`,
    );
    const t0 = Date.now();
    const h = await startPlan(env, fakePlan(runDir, 'goodput', [step]), { heartbeatTimeoutSec: HEARTBEAT_S, retryDelaySec: RETRY_S });
    const kill = faults.find((f) => f.kind === 'workerkill')!;
    await waitFor(`iteration ${kill.at}`, () => journal(runDir, step.id).some((e) => e.iteration >= kill.at), ITERS * ITER_S * 3000);
    process.kill(worker.pid!, 'SIGKILL');
    const killedAt = Date.now();
    worker = await env.startWorker(['--kill-grace', String(KILL_GRACE_S)]);
    await h.result();
    const wallS = (Date.now() - t0) / 1000;

    // From the run's files: each attempt's launch (infir2's note), its iterations (the trainer's journal).
    const log = readFileSync(join(runDir, 'logs', `${step.id}.log`), 'utf8');
    const launches = [...log.matchAll(/^\[infir2 (\S+)\] attempt \d+ (?:starting fresh|resuming from iteration)/gm)].map((m) => Date.parse(m[1]!) / 1000);
    const entries = journal(runDir, step.id);
    const pids = [...new Set(entries.map((e) => e.pid))];
    // Plain iteration time: gaps between consecutive iterations of one trainer, saves and loads excluded.
    const gaps = entries.slice(1).flatMap((e, i) => {
      const prev = entries[i]!;
      return e.pid === prev.pid && e.iteration === prev.iteration + 1 && prev.iteration % SAVE_EVERY !== 0 ? [e.t - prev.t] : [];
    });
    const iterS = median(gaps);
    const useful = ITERS * iterS;
    // The ideal: each attempt from its launch to its last progress (a hang's silence and a dead worker's
    // detection are not spent; the zombie after the worker kill trained nothing kept), attempts back to back.
    const killedPid = entries.find((e) => e.iteration >= kill.at)?.pid;
    const ideal = pids.reduce((sum, pid, i) => {
      const lastT = entries.filter((e) => e.pid === pid).at(-1)!.t;
      const end = pid === killedPid ? Math.min(lastT, killedAt / 1000) : lastT;
      return sum + Math.max(0, end - launches[i]!);
    }, 0);
    const first = launches[0]!;
    const last = entries.at(-1)!.t;
    const realS = last - first;
    const best = useful / ideal;
    const measured = useful / realS;
    const redone = entries.length - ITERS;
    console.log(`  attempts ${pids.length}; iteration ${iterS.toFixed(3)} s (median); iterations trained again (lost to failures) ${redone}`);
    console.log(`  best achievable (zero detection and restart): ${pct(best)}  (${ideal.toFixed(1)} s for ${useful.toFixed(1)} s of kept training)`);
    console.log(`  measured through infir2:                     ${pct(measured)}  (${realS.toFixed(1)} s from the first launch to the last iteration; whole run ${wallS.toFixed(1)} s)`);
    console.log(`  gap: ${((best - measured) * 100).toFixed(2)} percentage points (${(realS - ideal).toFixed(1)} s of detection and restart)`);

    // infir2's own accounting, beside it.
    const st = await statusJson(env.server.address, h.workflowId, env.dir);
    const s = st.steps.find((x) => x.id === step.id)!;
    const f = st.goodput.steps[step.id]!;
    const d = (x: number | undefined) => `${(x ?? 0).toFixed(1)} s`;
    console.log(`  infir2 status: goodput ${pct(f.goodput ?? 0)} of ${f.totalSec.toFixed(1)} s; ${Object.entries(f.secs).map(([k, v]) => `${k} ${d(v)}`).join(', ')}`);
    for (const a of s.time!.attempts.filter((x) => x.failure)) {
      const next = s.time!.attempts.find((x) => x.attempt === a.attempt + 1);
      const restart = next ? (next.scheduledAt - a.endedAt!) / 1000 : 0;
      console.log(
        `    attempt ${a.attempt} (${a.failure}): detection ${d(a.secs.detection)}, stopping ${d(a.secs.overhead)}, restart ${restart.toFixed(1)} s, ` +
          `next attempt's wait ${d(next?.secs.waiting)}, startup ${d(next?.secs.startup)}, recomputed ${d(next?.secs.recomputed)}`,
      );
    }
  } finally {
    await env.teardown();
  }
}

function statusJson(address: string, workflowId: string, dir: string): Promise<{ steps: StepState[]; goodput: { steps: Record<string, GoodputFigures> } }> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [join(ROOT, 'bin', 'infir2.js'), 'status', workflowId, '--json'], { env: { ...process.env, TEMPORAL_ADDRESS: address, INFIR2_HOME: join(dir, 'cli-home') }, encoding: 'utf8' }, (err, stdout) =>
      err ? reject(err) : resolve(JSON.parse(stdout)),
    );
  });
}

await main();
