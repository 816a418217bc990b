/**
 * Lost-time accounting on a real worker against a real dev server: after a crash, a hang and a worker SIGKILL,
 * `infir2 status --json` says where each attempt's time went, and every figure agrees with the timestamps of the
 * step's log (infir2's own `[infir2 <ISO time>]` lines and the trainer's `[YYYY-MM-DD HH:MM:SS] iteration` lines,
 * to the second) within 2 s.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunStatus, StepState } from '../../src/plan/contracts.js';
import { totalSec, type AttemptTime, type GoodputFigures } from '../../src/plan/goodput.js';
import { fakePlan, fakeStep, journal, processesMentioning, ROOT, setupEnv, startPlan, tmpRunDir, waitFor, type Env } from './harness.js';

let env: Env;

beforeAll(async () => {
  env = await setupEnv('goodput');
});

afterAll(async () => {
  await env?.teardown();
});

interface StatusJson extends RunStatus {
  goodput: { run: GoodputFigures; steps: Record<string, GoodputFigures> };
}

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const childEnv = { ...process.env, TEMPORAL_ADDRESS: env.server.address, INFIR2_HOME: join(env.dir, 'cli-home') };
  return new Promise((resolve) => {
    execFile(process.execPath, [join(ROOT, 'bin', 'infir2.js'), ...args], { env: childEnv, encoding: 'utf8', timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

/** One attempt as the step's log tells it: times in ms since the epoch. */
interface LoggedAttempt {
  launchAt: number;
  iterations: { it: number; at: number }[];
  stopAt: number | null;
  endAt: number | null;
}

/** The attempts in a step's log, from infir2's notes and the trainer's iteration lines. */
function loggedAttempts(runDir: string, stepId: string): LoggedAttempt[] {
  const out: LoggedAttempt[] = [];
  for (const line of readFileSync(join(runDir, 'logs', `${stepId}.log`), 'utf8').split('\n')) {
    const note = /^\[infir2 (\S+)\] (.*)$/.exec(line);
    if (note) {
      const at = Date.parse(note[1]!);
      if (/^attempt \d+ (starting fresh|resuming from iteration)/.test(note[2]!)) out.push({ launchAt: at, iterations: [], stopAt: null, endAt: null });
      else if (/^stopping the attempt's processes/.test(note[2]!)) out.at(-1)!.stopAt = at;
      else if (/^attempt \d+ ended/.test(note[2]!)) out.at(-1)!.endAt = at;
      continue;
    }
    // The trainer's clock, local time, to the second (Megatron's format).
    const it = /\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] iteration\s+(\d+)\//.exec(line);
    if (it) out.at(-1)!.iterations.push({ it: Number(it[2]), at: new Date(it[1]!.replace(' ', 'T')).getTime() });
  }
  return out;
}

const sec = (ms: number) => ms / 1000;
/** Within 2 s: the trainer's timestamps are truncated to the second. */
const near = (measured: number, logged: number, what: string) => expect(Math.abs(measured - logged), `${what}: status ${measured.toFixed(2)} s, log ${logged.toFixed(2)} s`).toBeLessThanOrEqual(2);

/** The checks every attempt's figures pass against its log. */
function agreesWithLog(t: AttemptTime, l: LoggedAttempt, label: string, heardToTheEnd = true): void {
  const first = l.iterations[0]!;
  const last = l.iterations.at(-1)!;
  near(t.secs.startup ?? 0, sec(first.at - l.launchAt), `${label} startup`);
  near((t.secs.productive ?? 0) + (t.secs.recomputed ?? 0) + (t.secs.save ?? 0), sec(last.at - first.at), `${label} training`);
  // A lost worker's last heartbeat may be a second behind its log (heartbeats are flushed once a second).
  if (heardToTheEnd) expect(t.lastIteration, `${label} last iteration`).toBe(last.it);
  else expect(t.lastIteration, `${label} last iteration`).toBeGreaterThanOrEqual(last.it - 4);
}

async function statusJson(workflowId: string): Promise<StatusJson> {
  const r = await cli(['status', workflowId, '--json']);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as StatusJson;
}

const stepOf = (st: StatusJson, id: string): StepState => st.steps.find((s) => s.id === id)!;

describe('lost-time accounting', () => {
  it('accounts a crash and a hang attempt by attempt, in agreement with the logs', async () => {
    const worker = await env.startWorker();
    const runDir = tmpRunDir(env, 'crashhang');
    const plan = fakePlan(runDir, 'crashhang', [
      // Reaches 10, checkpoint 8: the retry redoes 9 and 10.
      fakeStep({ id: 'cpt.crash', runDir, iters: 14, saveInterval: 4, sleep: 0.5, faults: ['crash@11'] }),
      // Reaches 6, checkpoint 4, then silent: stopped 4 s later; the retry redoes 5 and 6.
      fakeStep({ id: 'cpt.hang', runDir, iters: 10, saveInterval: 4, sleep: 0.5, faults: ['hang@7'], stallTimeoutSec: 4 }),
    ]);
    const h = await startPlan(env, plan);
    await h.result();
    const st = await statusJson(h.workflowId);

    for (const [id, cls, redone] of [['cpt.crash', 'crash', [9, 10]], ['cpt.hang', 'hang', [5, 6]]] as const) {
      const s = stepOf(st, id);
      const [a1, a2] = s.time!.attempts;
      const [l1, l2] = loggedAttempts(runDir, id);
      expect(s.time!.attempts).toHaveLength(2);
      expect(a1!.failure).toBe(cls);
      agreesWithLog(a1!, l1!, `${id} attempt 1`);
      agreesWithLog(a2!, l2!, `${id} attempt 2`);
      // The failed attempt: its silence from the last iteration to the stop (a hang) or the exit (a crash).
      const lastAt = l1!.iterations.at(-1)!.at;
      near(a1!.secs.detection ?? 0, sec((l1!.stopAt ?? l1!.endAt!) - lastAt), `${id} detection`);
      if (cls === 'hang') expect(a1!.secs.detection).toBeGreaterThanOrEqual(4 - 1);
      // The retry redid what the failure threw away: from its first iteration (the end of its startup) to the last redone.
      const at = (it: number) => l2!.iterations.find((e) => e.it === it)!.at;
      expect(a2!.secs.recomputed).toBeGreaterThan(0);
      near(a2!.secs.recomputed ?? 0, sec(at(redone[1]) - at(redone[0])), `${id} recomputed`);
      // From the failed attempt's end to the retry's launch: restart and the retry's wait.
      near((a1!.secs.overhead ?? 0) + (st.goodput.steps[id]!.secs.restart ?? 0) + (a2!.secs.waiting ?? 0), sec(l2!.launchAt - (l1!.stopAt ?? l1!.endAt!)), `${id} restart`);
      // Every second of the step is in one category, and the failure is charged with what it cost.
      const f = st.goodput.steps[id]!;
      expect(f.totalSec).toBeCloseTo(totalSec(f.secs), 6);
      near(f.totalSec, sec(l2!.endAt! - l1!.launchAt), `${id} total`);
      expect(f.lostSecByClass[cls]).toBeGreaterThan((a1!.secs.detection ?? 0) + (a2!.secs.startup ?? 0));
      expect(f.goodput).toBeGreaterThan(0.2);
      expect(f.goodput).toBeLessThan(0.9);
    }
    expect(st.goodput.run.lostSecByClass).toMatchObject({ crash: expect.any(Number), hang: expect.any(Number) });
    // The table says it too: a goodput line, and a row per step.
    const text = await cli(['status', h.workflowId]);
    expect(text.stdout).toMatch(/goodput \d+\.\d % of \d+s · other time: .*detection .* · lost to failures: .*(hang|crash) \d+s/);
    expect(text.stdout).toMatch(/^cpt\.hang\s+\d+\.\d %/m);
    await env.stopWorker(worker);
  }, 120_000);

  it('accounts an attempt whose worker was SIGKILLed from its last heartbeat: the silence until the heartbeat timeout is detection', async () => {
    const victim = await env.startWorker();
    const runDir = tmpRunDir(env, 'lostworker');
    // Long enough that the orphan is still training when the retry takes over (it trains on past its worker's
    // death, its output dropped, and would otherwise finish the step by itself: src/launcher/).
    const plan = fakePlan(runDir, 'lostworker', [fakeStep({ id: 'cpt.stable', runDir, iters: 80, saveInterval: 5, sleep: 0.3 })]);
    const h = await startPlan(env, plan);
    await waitFor('iteration 12', () => journal(runDir, 'cpt.stable').some((e) => e.iteration >= 12));
    process.kill(victim.pid!, 'SIGKILL');
    await env.startWorker();
    await h.result();
    const st = await statusJson(h.workflowId);
    const s = stepOf(st, "cpt.stable");
    expect(s.failures).toEqual({ preempted: 1 });
    const [a1, a2] = s.time!.attempts;
    const [l1, l2] = loggedAttempts(runDir, 'cpt.stable');
    expect(a1!.failure).toBe('preempted');
    agreesWithLog(a1!, l1!, 'lost attempt', false);
    agreesWithLog(a2!, l2!, 'retry');
    // Nothing was heard after the last iteration the dead worker logged: from then to the retry's launch is the
    // heartbeat timeout (5 s here: detection), the retry delay (restart) and the retry's wait for the lock.
    const silence = sec(l2!.launchAt - l1!.iterations.at(-1)!.at);
    const f = st.goodput.steps['cpt.stable']!;
    near((a1!.secs.detection ?? 0) + (f.secs.restart ?? 0) + (a2!.secs.waiting ?? 0), silence, 'detection + restart + waiting');
    expect(a1!.secs.detection).toBeGreaterThanOrEqual(5 - 1);
    near(f.totalSec, sec(l2!.endAt! - l1!.launchAt), 'total');
    expect(f.lostSecByClass.preempted).toBeGreaterThan(a1!.secs.detection!);
    expect(processesMentioning(runDir)).toEqual([]);
  }, 120_000);
});
