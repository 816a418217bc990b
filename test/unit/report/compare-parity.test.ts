/** compare.ts and parity.ts on synthetic series: the figures are what their definitions say. */
import { describe, expect, it } from 'vitest';
import type { Plan } from '../../../src/plan/types.js';
import { parityVariants, type ParitySpec } from '../../../src/plan/parity.js';
import { compareRuns, comparisonTable, ema, emaGap } from '../../../src/report/compare.js';
import { parityVerdict } from '../../../src/report/parity.js';
import type { RunData, StepReport } from '../../../src/report/run-data.js';
import { Curve, stepSeries, type Point } from '../../../src/report/step-series.js';

const curve = (n: number, f: (i: number) => number): Point[] => Array.from({ length: n }, (_, i) => ({ x: i + 1, y: f(i + 1) }));

function step(id: string, loss: Point[], validation: Point[] = [], tput = 10, o: { kind?: StepReport['kind']; status?: StepReport['status'] } = {}): StepReport {
  const series = { ...stepSeries(''), loss: Curve.of(loss), validation: Curve.of(validation), throughput: Curve.of(loss.map((p) => ({ x: p.x, y: tput }))), throughputUnit: 'it/s' };
  return { id, kind: o.kind ?? 'cpt', backend: 'local', summary: '', status: o.status ?? 'completed', result: null, series };
}

function run(runId: string, steps: StepReport[], recipe: Record<string, unknown> = { precision: 'fp8' }, parity: ParitySpec | null = null, status: RunData['status'] = 'completed'): RunData {
  const plan = { version: 1, recipe: 'tiny', runId, runDir: `/r/${runId}`, precision: 'fp8', model: 'm', pools: {}, steps: steps.map((s) => ({ id: s.id, kind: s.kind, dependsOn: [] })) } as unknown as Plan;
  return { runDir: plan.runDir, plan, recipe, status, steps, evals: [], parity, problems: [] };
}

describe('compare', () => {
  it('smooths with an exponential moving average and takes the relative gap over common iterations', () => {
    expect(ema(Curve.of([{ x: 1, y: 1 }, { x: 2, y: 2 }]), 0.5).points()).toEqual([{ x: 1, y: 1 }, { x: 2, y: 1.5 }]);
    const a = Curve.of(curve(10, () => 2));
    const b = Curve.of(curve(12, () => 2.02)); // two more iterations: not compared
    const g = emaGap(a, b);
    expect(g.length).toBe(10);
    for (const p of g.points()) expect(p.y).toBeCloseTo(0.01, 12);
  });

  it('rows per shared step against the first run, and names what differs between the recipes', () => {
    const a = run('a', [step('cpt.stable', curve(200, (i) => 3 / i + 1), [{ x: 100, y: 1.2 }, { x: 200, y: 1.1 }], 10)], { precision: 'fp8', cpt: { seed: 1 } });
    const b = run('b', [step('cpt.stable', curve(200, (i) => (3 / i + 1) * 1.005), [{ x: 100, y: 1.21 }, { x: 200, y: 1.111 }], 8)], { precision: 'bf16', cpt: { seed: 1 } });
    const c = compareRuns([a, b]);
    const row = (m: string) => c.rows.find((r) => r.metric.startsWith(m))!;
    expect(row('final validation loss').values).toEqual([1.1, 1.111]);
    expect(row('final validation loss').vsRef).toEqual(['+1.00 %']);
    expect(row('EMA loss gap (0.9), at the end').vsRef).toEqual(['+0.50 %']);
    expect(row('throughput').vsRef).toEqual(['0.800×']);
    expect(c.warnings).toEqual(['b differs from a in precision fp8→bf16']);
    expect(c.charts.map((x) => x.id)).toEqual(['compare-cpt.stable', 'compare-cpt.stable-validation', 'compare-cpt.stable-throughput']);
    expect(c.charts[2]!.yName).toBe('it/s');
  });
});

describe('compare: how gaps are measured and shown (issue 34, item 11)', () => {
  const range = (from: number, to: number, f: (i: number) => number): Point[] => Array.from({ length: to - from + 1 }, (_, k) => ({ x: from + k, y: f(from + k) }));

  it('shows a gap in the vs column only: no raw fraction beside its percentage', () => {
    const a = run('a', [step('cpt.stable', curve(100, () => 2))]);
    const b = run('b', [step('cpt.stable', curve(100, () => 12.15))]);
    const c = compareRuns([a, b]);
    const gap = c.rows.find((r) => r.metric === 'EMA loss gap (0.9), at the end')!;
    expect(gap.values).toEqual([null, null]);
    expect(gap.delta[0]).toBeCloseTo(5.075, 12);
    expect(gap.vsRef).toEqual(['+507.50 %']);
    const line = comparisonTable(c).split('\n').find((l) => l.includes('EMA loss gap (0.9), at the end'))!;
    expect(line.trim().split(/\s{2,}/)).toEqual(['EMA loss gap (0.9), at the end', '–', '–', '+507.50 %']);
    expect(line).not.toMatch(/5\.07/);
  });

  it("takes RL's near-zero loss gaps as absolute differences, and says so", () => {
    const pg = (i: number) => 0.00005 * Math.cos(i / 7); // a policy-gradient loss: around zero, both signs
    const a = run('a', [step('rl.stage1', curve(60, pg), [], 10, { kind: 'rl' })]);
    const b = run('b', [step('rl.stage1', curve(60, (i) => pg(i) - 0.0117), [], 10, { kind: 'rl' })]);
    const c = compareRuns([a, b]);
    const end = c.rows.find((r) => r.metric.startsWith('EMA loss gap (0.9)'))!;
    expect(end.metric).toBe('EMA loss gap (0.9), absolute, at the end');
    expect(end.delta[0]).toBeCloseTo(-0.0117, 10);
    expect(end.vsRef).toEqual(['-0.0117']);
    expect(c.rows.find((r) => r.metric.startsWith('mean training loss'))!.vsRef).toEqual(['-0.0117']);
    expect(c.notes).toEqual(['rl.stage1: loss differences are absolute, not relative: an RL loss sits near zero and changes sign, where a relative gap divides by ~0']);
    // A cross-entropy that comes near zero is measured the same way; one that stays away from it, relatively.
    const sft = (f: (i: number) => number) => run('s', [step('sft.stage1', curve(60, f), [], 10, { kind: 'sft' })]);
    expect(compareRuns([sft((i) => 0.2 / i), sft((i) => 0.2 / i + 0.001)]).rows.find((r) => r.metric.startsWith('EMA'))!.metric).toContain('absolute');
    expect(compareRuns([sft((i) => 1 + 1 / i), sft((i) => 1.01 + 1 / i)]).rows.find((r) => r.metric.startsWith('EMA'))!.metric).toBe('EMA loss gap (0.9), at the end');
  });

  it("reads validation, never the test split, for the final validation loss (and parity's figure)", () => {
    const log = (val: number, test: number) =>
      [100, 200].map((i) => ` [2026-01-01 00:00:00] iteration ${String(i).padStart(8)}/     200 | elapsed time per iteration (ms): 50.0 | lm loss: 2.000000E+00 |`)
        .concat([` validation loss at iteration 200 on validation set | lm loss value: ${val.toExponential(6)} | `, ` validation loss at iteration 200 on test set | lm loss value: ${test.toExponential(6)} | `]).join('\n');
    const withLog = (id: string, text: string): StepReport => ({ id, kind: 'cpt', backend: 'local', summary: '', status: 'completed', result: null, series: stepSeries(text) });
    const c = compareRuns([run('a', [withLog('cpt.decay', log(1.5, 9))]), run('b', [withLog('cpt.decay', log(1.65, 1))])]);
    expect(c.rows.find((r) => r.metric === 'final validation loss')!.values).toEqual([1.5, 1.65]);
  });

  it('warns when a step covers other iterations (a fork from an earlier stable checkpoint)', () => {
    const a = run('a', [step('cpt.decay', range(481, 600, () => 2))]);
    const b = run('b', [step('cpt.decay', range(401, 520, () => 2.1))]);
    expect(compareRuns([a, b]).warnings).toEqual([`b's cpt.decay covers iterations 401–520, a's 481–600: its figures compare different stretches of training (only 481–520 in common)`]);
    const none = run('c', [step('cpt.decay', range(101, 220, () => 2.1))]);
    expect(compareRuns([a, none]).warnings).toEqual([`c's cpt.decay covers iterations 101–220, a's 481–600: its figures compare different stretches of training (no iteration in common)`]);
  });

  it('warns when a run is still running, naming where its steps stand, and does not call its shorter curve a different stretch', () => {
    const a = run('a', [step('cpt.decay', range(481, 600, () => 2))]);
    const b = run('b', [step('cpt.decay', range(481, 530, () => 2.1), [], 10, { status: 'running' })], undefined, null, 'running');
    b.steps[0]!.series!.totalIterations = 600;
    expect(compareRuns([a, b]).warnings).toEqual(['b is still running (cpt.decay at 530 of 600): its figures are not final']);
  });
});

describe('parity verdict', () => {
  const spec: ParitySpec = { stage: 'cpt', iterations: 100, variants: parityVariants([1, 2]) };
  const parity = (vals: Record<string, number>) =>
    parityVerdict(run('p', Object.entries(vals).map(([v, y]) => step(`${v}.cpt.stable`, curve(100, () => y + 0.5), [{ x: 100, y }])), {}, spec), spec);

  it('is within noise when the FP8 gap is no larger than the BF16 seed-to-seed difference', () => {
    const v = parity({ 'bf16-s1': 1.0, 'bf16-s2': 1.01, 'fp8-s1': 1.008, 'fp8-s2': 1.006 });
    expect(v.metric).toBe('validation loss at iteration 100');
    expect(v.gap).toBeCloseTo((1.007 - 1.005) / 1.005, 12);
    expect(v.noise).toBeCloseTo(0.01 / 1.005, 12);
    expect(v.verdict).toBe('within noise');
  });

  it('says by how many noise floors FP8 is worse, or that there is no verdict yet', () => {
    const v = parity({ 'bf16-s1': 1.0, 'bf16-s2': 1.002, 'fp8-s1': 1.011, 'fp8-s2': 1.009 });
    expect(v.verdict).toBe(`FP8 worse by ${((1.01 - 1.001) / 0.002).toFixed(1)} × the noise`);
    expect(parity({ 'bf16-s1': 1.0, 'bf16-s2': 1.002, 'fp8-s1': 1.011 }).verdict).toBe('no verdict yet: no figure for fp8-s2');
  });
});
