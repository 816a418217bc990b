/**
 * The report of a recorded 7B-style run (test/fixtures/report-7b: Megatron CPT with a crash and a resume, slime
 * SFT `step` lines, slime RL `rollout`/`perf`/`step`/`eval` lines with a hang and a resume, evalscope scores),
 * rendered against the plan the 7B recipe compiles to. Every number checked here is read back from the fixture's
 * lines, so a parser that drifts from the log formats fails.
 */
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compilePlan } from '../../../src/plan/compile.js';
import { loadRecipe } from '../../../src/recipe/load.js';
import { reportCharts } from '../../../src/report/charts.js';
import { readRunData, type RunData } from '../../../src/report/run-data.js';
import { outDirProblem, writeReport, writeReportPngsAfter, type WrittenReport } from '../../../src/report/write-report.js';

const FIXTURE = join(__dirname, '../../fixtures/report-7b');
const SETS = ['cpt.warmupIters=40', 'cpt.iterations=400', 'cpt.decayIters=80', 'rl.curriculum.0.rollouts=40', 'rl.curriculum.1.rollouts=40'];
let dir: string;
let runDir: string;
let data: RunData;
let written: WrittenReport;
let html: string;

/** The numbers a log's lines carry, read with a plain pattern (independent of the parsers under test). */
function logged(step: string, re: RegExp): number[] {
  return readFileSync(join(FIXTURE, 'logs', `${step}.log`), 'utf8').split('\n').flatMap((l) => {
    const m = re.exec(l);
    return m ? [Number(m[1])] : [];
  });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'infir2-report-7b-'));
  const { recipe } = await loadRecipe('infir2-7b', { sets: [...SETS, `runDir=${dir}`] });
  const plan = compilePlan(recipe, { runId: 'r7b', projectRoot: process.cwd() });
  runDir = plan.runDir;
  cpSync(FIXTURE, runDir, { recursive: true });
  writeFileSync(join(runDir, 'plan.json'), JSON.stringify(plan));
  writeFileSync(join(runDir, 'recipe.json'), JSON.stringify(recipe));
  data = readRunData(runDir);
  written = writeReport(runDir, { now: new Date('2026-03-05T00:00:00Z') });
  html = readFileSync(written.page, 'utf8');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('report of a 7B-style Megatron + slime run', () => {
  it('reads every step of the plan, with its status and attempts from the files alone', () => {
    expect(data.steps.map((s) => s.id)).toEqual(['cpt.warmup', 'cpt.stable', 'cpt.decay', 'sft.stage1', 'sft.stage2', 'convert.hf', 'convert.fp8', 'rl.stage1', 'rl.stage2', 'convert.rl', 'eval.aime24', 'eval.aime25', 'eval.gpqa', 'eval.livecodebench']);
    expect(data.status).toBe('completed');
    expect(data.problems).toEqual([]);
    const stable = data.steps.find((s) => s.id === 'cpt.stable')!.series!;
    expect(stable.attempts.map((a) => [a.attempt, a.resumedFrom, a.failure?.class ?? null])).toEqual([[1, 40, 'crash'], [2, 100, null]]);
    const rl1 = data.steps.find((s) => s.id === 'rl.stage1')!.series!;
    expect(rl1.attempts.map((a) => [a.attempt, a.resumedFrom, a.failure?.class ?? null])).toEqual([[1, null, 'hang'], [2, 20, null]]);
  });

  it('charts CPT loss, validation and learning rate on one WSD axis, the phases marked', () => {
    const byId = new Map(reportCharts(data).map((c) => [c.id, c]));
    expect([...byId.keys()]).toEqual(['cpt-loss', 'cpt-lr', 'sft-loss', 'sft-lr', 'rl-reward', 'rl-length', 'throughput', 'throughput-1', 'grad-norm', 'timeline', 'time-split']);
    const loss = byId.get('cpt-loss')!;
    // A resumed attempt trains 101..186 again: each iteration is one point, the later value kept.
    expect(loss.series).toEqual([
      { name: 'cpt.warmup train', points: 40, drawn: 40 },
      { name: 'cpt.stable train', points: 280, drawn: 280 },
      { name: 'cpt.decay train', points: 80, drawn: 80 },
      { name: 'validation', points: 4, drawn: 4 },
    ]);
    const stable = data.steps.find((s) => s.id === 'cpt.stable')!.series!;
    const lines = logged('cpt.stable', /iteration\s+150\/.*lm loss: (\S+) \|/);
    expect(lines).toHaveLength(2); // before the crash and after the resume
    expect(stable.loss.yAt(150)).toBe(lines[1]);
    expect(JSON.stringify(loss.option)).toContain('warmup ends (40)');
    expect(JSON.stringify(loss.option)).toContain('stable ends (320)');
    const lr = data.steps.find((s) => s.id === 'cpt.decay')!.series!.lr;
    expect(lr.at(-1)!.y).toBe(logged('cpt.decay', /learning rate: (\S+) \|/).at(-1));
    expect(byId.get('throughput')!.yName).toBe('TFLOP/s/GPU');
    expect(byId.get('throughput-1')!.yName).toBe('tokens/s/GPU');
  });

  it('charts SFT loss per slime step and RL reward and length per rollout, the curriculum stages marked', () => {
    const charts = new Map(reportCharts(data).map((c) => [c.id, c]));
    expect(charts.get('sft-loss')!.xName).toBe('step');
    expect(charts.get('sft-loss')!.series.filter((s) => s.points > 0).map((s) => [s.name, s.points])).toEqual([['sft.stage1', 225], ['sft.stage2', 300]]);
    const reward = charts.get('rl-reward')!;
    expect(reward.series.map((s) => [s.name, s.points])).toEqual([['rl.stage1', 40], ['rl.stage2', 40], ['eval aime', 4]]);
    const opt = JSON.stringify(reward.option);
    expect(opt).toContain('stage1: ≤ 8192 tokens');
    expect(opt).toContain('stage2: ≤ 16384 tokens');
    const s2 = data.steps.find((s) => s.id === 'rl.stage2')!.series!;
    expect(s2.reward.values()).toEqual(logged('rl.stage2', /rollout \d+: \{'rollout\/raw_reward': ([\d.]+)/));
    expect(s2.responseLength.values()).toEqual(logged('rl.stage2', /'rollout\/response_lengths': ([\d.]+)/));
  });

  it('writes one self-contained page whose tables hold the logged and recorded figures, and a PNG per chart', () => {
    expect(written.charts).toBe(11);
    expect(html).not.toMatch(/<script|<link|<img|(?:src|href)="https?:|url\((?!#)/); // nothing to fetch, nothing to run
    expect((html.match(/<svg/g) ?? []).length).toBe(11);
    const row = (id: string) => new RegExp(`<tr data-step="${id.replace('.', '\\.')}">(.*?)</tr>`).exec(html)![1]!;
    expect(row('cpt.stable')).toContain('<td data-k="attempts">2</td><td data-k="failures">crash</td>');
    expect(row('rl.stage1')).toContain('<td data-k="failures">hang</td>');
    const lastLoss = logged('cpt.decay', /lm loss: (\S+) \|/).at(-1)!;
    expect(row('cpt.decay')).toContain(`<td data-k="loss">${Number(lastLoss.toPrecision(7))}</td>`);
    expect(row('eval.aime24')).toContain('acc 60.9 %');
    expect(html).toContain('data-bench="gpqa" data-model="rl" data-value="0.5265"');
    expect(html).toContain('attempt 2 resumed from iteration 100');
    expect(html).toContain('<td>rl.curriculum.1.maxResponseLen</td><td>16384</td>');
    const pngs = readdirSync(join(runDir, 'report', 'charts')).sort();
    expect(pngs).toEqual(['cpt-loss.png', 'cpt-lr.png', 'grad-norm.png', 'rl-length.png', 'rl-reward.png', 'sft-loss.png', 'sft-lr.png', 'throughput-1.png', 'throughput.png', 'time-split.png', 'timeline.png']);
    for (const p of pngs) {
      const b = readFileSync(join(runDir, 'report', 'charts', p));
      expect(b.subarray(1, 4).toString()).toBe('PNG');
      expect(b.length).toBeGreaterThan(10_000);
    }
  });

  it('at the end of a run, writes the page first and its PNGs after, the page never linking a PNG not yet written', () => {
    const other = mkdtempSync(join(tmpdir(), 'infir2-report-later-'));
    try {
      cpSync(runDir, other, { recursive: true });
      rmSync(join(other, 'report'), { recursive: true, force: true });
      const now = new Date('2026-03-05T00:00:00Z');
      const staged = writeReportPngsAfter(other, { now });
      const first = readFileSync(staged.report.page, 'utf8');
      expect(staged.report.charts).toBe(11);
      expect((first.match(/<svg/g) ?? []).length).toBe(11);
      expect(first).not.toContain('.png');
      expect(readdirSync(join(other, 'report', 'charts'))).toEqual([]);
      const done = staged.pngs();
      expect(done.pngs).toHaveLength(11);
      expect(readdirSync(join(other, 'report', 'charts')).sort()).toEqual(readdirSync(join(runDir, 'report', 'charts')).sort());
      // The same page `infir2 report` writes in one go
      // (but for its directory, and the class names ECharts numbers by the charts it drew before in this process).
      const same = (page: string) => page.replace(/zr\d+-(cls-|c)\d+/g, 'zr-$1');
      expect(same(readFileSync(done.page, 'utf8').replaceAll(other, runDir))).toBe(same(html));
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });

  it('says what is missing or cut instead of failing', () => {
    rmSync(join(runDir, 'logs', 'sft.stage2.log'));
    rmSync(join(runDir, 'recipe.json'));
    writeFileSync(join(runDir, 'results', 'convert.hf.json'), '{"stepId": "convert.hf", trunc');
    const d = readRunData(runDir);
    expect(d.problems).toEqual([
      'recipe.json is missing: the parameters table is empty',
      'sft.stage2: its log (logs/sft.stage2.log) is missing: no series for it',
      expect.stringMatching(/^the result of convert\.hf \(.*convert\.hf\.json\) could not be read: /),
    ]);
    const w = writeReport(runDir, { out: join(dir, 'out2'), png: false });
    const page = readFileSync(w.page, 'utf8');
    expect(page).toContain('sft.stage2: its log (logs/sft.stage2.log) is missing');
    expect(page).toContain('recipe.json is missing.');
  });

  it('makes a nested output directory one level at a time, and refuses one it cannot write at once', () => {
    const w = writeReport(runDir, { out: join(dir, 'a', 'b', 'c'), png: false });
    expect(readdirSync(join(dir, 'a', 'b', 'c')).sort()).toEqual(['.infir2-page', 'charts', 'index.html']);
    expect(w.page).toBe(join(dir, 'a', 'b', 'c', 'index.html'));
    // Node's recursive mkdir never returns under /proc: the probe names it instead, in bounded time.
    const t0 = Date.now();
    expect(outDirProblem('/proc/x/report')).toBe('/proc is on the proc pseudo file system, which cannot hold a report');
    expect(outDirProblem('/proc/x', 'a comparison')).toBe('/proc is on the proc pseudo file system, which cannot hold a comparison');
    expect(Date.now() - t0).toBeLessThan(1_000);
    writeFileSync(join(dir, 'file'), 'x');
    expect(outDirProblem(join(dir, 'file', 'report'))).toBe(`${join(dir, 'file')} is not a directory`);
    expect(outDirProblem(join(dir, 'fresh', 'report'))).toBeNull();
  });
});
