/**
 * The end-of-run report is rendered in child processes, at most REPORT_PROCESSES at once, off the worker's event
 * loop, each taking job after job: the recorded 7B-style run (test/fixtures/report-7b) written by the activity,
 * several reports asked for at once, and a run directory the renderer cannot read failing with its words.
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPORT_PROCESSES, warmReportRenderer, writeRunReport } from '../../../src/activities/run-report.js';
import { compilePlan } from '../../../src/plan/compile.js';
import { loadRecipe } from '../../../src/recipe/load.js';
import { processesMentioning, waitFor } from '../../integration/harness.js';

const FIXTURE = join(import.meta.dirname, '../../fixtures/report-7b');
const SETS = ['cpt.warmupIters=40', 'cpt.iterations=400', 'cpt.decayIters=80', 'rl.curriculum.0.rollouts=40', 'rl.curriculum.1.rollouts=40'];
let dir: string;
const runDirs: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'infir2-run-report-'));
  for (let i = 0; i < 3; i++) {
    const { recipe } = await loadRecipe('infir2-7b', { sets: [...SETS, `runDir=${join(dir, `r${i}`)}`] });
    const plan = compilePlan(recipe, { runId: `r${i}`, projectRoot: process.cwd() });
    cpSync(FIXTURE, plan.runDir, { recursive: true });
    writeFileSync(join(plan.runDir, 'plan.json'), JSON.stringify(plan));
    writeFileSync(join(plan.runDir, 'recipe.json'), JSON.stringify(recipe));
    runDirs.push(plan.runDir);
  }
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** This process's report renderers (other tests' workers on the machine render reports too). */
function renderers(): number[] {
  return processesMentioning('report-process').filter((pid) => {
    try {
      return Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]) === process.pid;
    } catch {
      return false;
    }
  });
}

/**
 * Whether every process of `pids` has been reaped by this process (its /proc entry gone), and so its exit seen by the
 * module: a process leaves `renderers()` as soon as it is exiting (its command line reads empty), but its exit is
 * reported only once all its threads have ended, which on a loaded machine took longer than 200 ms (a node process
 * has several).
 */
const reaped = (pids: number[]) => pids.every((pid) => !existsSync(`/proc/${pid}`));

const status = (runDir: string, runId: string) => ({ recipe: 'infir2-7b', runId, runDir, status: 'completed' as const, message: null, steps: [] });

describe('writeRunReport', () => {
  it('writes the report in child processes, a few at a time, while this event loop stays free', async () => {
    let ticks = 0;
    let most = 0;
    const pids = new Set<number>();
    const timer = setInterval(() => {
      ticks += 1;
      const now = renderers();
      for (const p of now) pids.add(p);
      most = Math.max(most, now.length);
    }, 20);
    const t0 = performance.now();
    const written = await Promise.all(runDirs.map((d, i) => writeRunReport({ runDir: d, status: status(d, `r${i}`) })));
    const ms = performance.now() - t0;
    clearInterval(timer);
    for (const [i, w] of written.entries()) {
      expect(w.page).toBe(join(runDirs[i]!, 'report', 'index.html'));
      expect(readFileSync(w.page, 'utf8')).toContain('<html');
      expect(w.charts).toBeGreaterThan(0);
    }
    // The timer ran throughout (rendering here would have blocked it for the whole of it).
    expect(ticks).toBeGreaterThan((ms / 20) * 0.5);
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(REPORT_PROCESSES);
    // Three reports, no more renderers than REPORT_PROCESSES: one took two jobs.
    expect(pids.size).toBeLessThanOrEqual(REPORT_PROCESSES);
  }, 120_000);

  it('a run directory the renderer cannot read fails with its words', async () => {
    const gone = join(dir, 'no-such-run');
    await expect(writeRunReport({ runDir: gone, status: status(gone, 'x') })).rejects.toThrow(/^the report could not be written: .+/);
    // The renderer lives on for the next one.
    const again = await writeRunReport({ runDir: runDirs[0]!, status: status(runDirs[0]!, 'r0') });
    expect(again.page).toBe(join(runDirs[0]!, 'report', 'index.html'));
  }, 60_000);

  it('a renderer killed mid-report fails that report only; the next starts another', async () => {
    const job = writeRunReport({ runDir: runDirs[1]!, status: status(runDirs[1]!, 'r1') });
    const victims = await waitFor('the renderer', () => {
      const p = renderers();
      return p.length ? p : null;
    });
    for (const pid of victims) process.kill(pid, 'SIGKILL');
    await expect(job).rejects.toThrow(/^the report renderer exited SIGKILL/);
    // Every renderer killed is gone before the next report is asked for (a job given to one dying unnoticed fails
    // too, and the activity's retry takes it again).
    await waitFor('the killed renderers to be reaped', () => reaped(victims));
    const next = await writeRunReport({ runDir: runDirs[2]!, status: status(runDirs[2]!, 'r2') });
    expect(next.page).toBe(join(runDirs[2]!, 'report', 'index.html'));
  }, 60_000);

  it('a warm renderer waits for the next report: one is started when none is there, and is the one used', async () => {
    // None left from the tests before: this one starts it.
    const old = renderers();
    for (const pid of old) process.kill(pid, 'SIGTERM');
    await waitFor('no renderer', () => reaped(old));
    const before = new Set<number>();
    warmReportRenderer();
    warmReportRenderer();
    // Started a few seconds after the step (its trainer starts meanwhile), or the one already there.
    const warm = await waitFor('a warm renderer', () => (renderers().length ? renderers() : null), 20_000);
    expect(warm.length).toBeGreaterThanOrEqual(1);
    expect(warm.length).toBeLessThanOrEqual(REPORT_PROCESSES);
    await writeRunReport({ runDir: runDirs[0]!, status: status(runDirs[0]!, 'r0') });
    // No renderer was started for the report itself: it went to the one waiting (or one already there).
    expect(renderers().filter((p) => !before.has(p) && !warm.includes(p))).toEqual([]);
  }, 60_000);
});
