/**
 * The report's charts as Apache ECharts options, built from a run's data (run-data.ts). Pure: no rendering here
 * (render.ts draws them to SVG and PNG). Every chart names its axes and lists the series it drew, so that a test
 * can check a chart against the logs without reading pixels.
 *
 * Axes: CPT's three phases share one iteration axis (one WSD schedule: warmup, stable and decay continue each
 * other's iteration count), with the phase boundaries marked. SFT stages each count from 0. RL stages are the
 * response-length curriculum: their rollouts are laid end to end, each stage's span marked with its cap.
 */
import type { SeriesOption } from 'echarts';
import { TIME_CATEGORIES } from '../plan/goodput.js';
import { lineChart, PALETTE, type ChartSpec, type Line } from './line-chart.js';
import { visible } from '../util/visible.js';
import { parityChart } from './parity.js';
import type { RunData, StepReport } from './run-data.js';
import { Curve } from './curve.js';

const training = (d: RunData, kind: StepReport['kind']) => d.steps.filter((s) => s.kind === kind && s.series);

/**
 * The held-out losses of steps, dashed: the validation split (periodic and final), each further validation set
 * of --multiple-validation-sets, and the test split apart (Megatron evaluates it once, at the end of training).
 */
function heldOut(steps: StepReport[], prefix: string): Line[] {
  const sets = [...new Set(steps.flatMap((s) => s.series!.otherValidation.map((v) => v.name)))];
  return [
    { name: `${prefix}validation`, points: Curve.concat(steps.map((s) => s.series!.validation)), dashed: true, symbol: true },
    ...sets.map((name) => ({ name: `${prefix}${name}`, points: Curve.concat(steps.flatMap((s) => s.series!.otherValidation.filter((v) => v.name === name).map((v) => v.points))), dashed: true, symbol: true })),
    { name: `${prefix}test`, points: Curve.concat(steps.map((s) => s.series!.test)), dashed: true, symbol: true },
  ];
}

/** CPT phases on one axis: each phase's points as the trainer numbered them (they continue each other). */
function cptCharts(d: RunData): ChartSpec[] {
  const cpt = training(d, 'cpt');
  if (!cpt.length) return [];
  const marks = cpt.slice(0, -1).flatMap((s) => {
    const last = s.series!.loss.at(-1)?.x ?? s.result?.iteration;
    return last !== undefined && last !== null ? [{ x: last, label: `${s.id.replace(/^cpt\./, '')} ends (${last})` }] : [];
  });
  const out = [
    lineChart({
      id: 'cpt-loss',
      title: 'CPT: training and validation loss',
      caption: `lm loss per iteration and validation loss at each evaluation, ${cpt.map((s) => s.id).join(', ')}${cpt.some((s) => s.series!.test.length) ? '; the test split\'s loss at the end of training apart' : ''}; phase boundaries dotted`,
      xName: 'iteration',
      yName: 'loss',
      lines: [
        ...cpt.map((s) => ({ name: `${s.id} train`, points: s.series!.loss })),
        ...heldOut(cpt, ''),
      ],
      marks,
    }),
    lineChart({
      id: 'cpt-lr',
      title: 'CPT: learning-rate schedule (warmup, stable, decay)',
      caption: 'learning rate per iteration as the trainer logged it; phase boundaries dotted',
      xName: 'iteration',
      yName: 'learning rate',
      lines: cpt.map((s) => ({ name: s.id, points: s.series!.lr })),
      marks,
    }),
  ];
  return out.filter((c): c is ChartSpec => c !== null);
}

function sftCharts(d: RunData): ChartSpec[] {
  const sft = training(d, 'sft');
  const steps = sft.filter((s) => s.series!.loss.length || s.series!.stepLoss.length);
  if (!steps.length) return [];
  const byStep = steps.some((s) => s.series!.stepLoss.length);
  return [
    lineChart({
      id: 'sft-loss',
      title: 'SFT: training loss per stage',
      caption: byStep ? 'train/loss per optimizer step (slime `step k` lines), each stage from its start' : 'lm loss per iteration, each stage from its start; validation dashed',
      xName: byStep ? 'step' : 'iteration',
      yName: 'loss',
      lines: steps.flatMap((s) => [{ name: s.id, points: s.series!.stepLoss.length ? s.series!.stepLoss : s.series!.loss }, ...heldOut([s], `${s.id} `)]),
    }),
    lineChart({
      id: 'sft-lr',
      title: 'SFT: learning rate per stage',
      caption: 'learning rate as the trainer logged it',
      xName: byStep ? 'step' : 'iteration',
      yName: 'learning rate',
      lines: steps.map((s) => ({ name: s.id, points: s.series!.stepLr.length ? s.series!.stepLr : s.series!.lr })),
    }),
  ].filter((c): c is ChartSpec => c !== null);
}

/** RL stages end to end: stage k's rollout r at x = (rollouts before it) + r. */
function rlCharts(d: RunData): ChartSpec[] {
  const rl = training(d, 'rl');
  if (!rl.length) return [];
  const caps = ((d.recipe?.rl as { curriculum?: { maxResponseLen?: number; rollouts?: number }[] } | undefined)?.curriculum ?? []);
  let offset = 0;
  const spans: { from: number; to: number; label: string }[] = [];
  const shifted = rl.map((s, i) => {
    const n = Math.max(caps[i]?.rollouts ?? 0, (s.series!.reward.at(-1)?.x ?? -1) + 1, s.series!.responseLength.length);
    const out = { id: s.id, reward: s.series!.reward.shifted(offset), length: s.series!.responseLength.shifted(offset), evals: s.series!.rolloutEvals.map((e) => ({ ...e, rollout: e.rollout + offset })) };
    spans.push({ from: offset, to: offset + Math.max(n - 1, 0), label: `${s.id.replace(/^rl\./, '')}: ≤ ${caps[i]?.maxResponseLen ?? '?'} tokens` });
    offset += n;
    return out;
  });
  const evalNames = [...new Set(shifted.flatMap((s) => s.evals.flatMap((e) => Object.keys(e.scores))))];
  return [
    lineChart({
      id: 'rl-reward',
      title: 'RL: reward per rollout (response-length curriculum)',
      caption: 'mean reward of each rollout; the curriculum stages shaded with their response-length cap' + (evalNames.length ? '; in-training evaluations as points' : ''),
      xName: 'rollout',
      yName: 'reward',
      lines: [
        ...shifted.map((s) => ({ name: s.id, points: s.reward })),
        ...evalNames.map((n) => ({ name: `eval ${n}`, points: Curve.of(shifted.flatMap((s) => s.evals.flatMap((e) => (e.scores[n] !== undefined ? [{ x: e.rollout, y: e.scores[n]! }] : [])))), symbol: true, dashed: true })),
      ],
      spans,
    }),
    lineChart({
      id: 'rl-length',
      title: 'RL: mean response length per rollout',
      caption: 'mean response length (tokens) of each rollout; the curriculum stages shaded with their cap',
      xName: 'rollout',
      yName: 'tokens',
      lines: shifted.map((s) => ({ name: s.id, points: s.length })),
      spans,
    }),
  ].filter((c): c is ChartSpec => c !== null);
}

function trainingSteps(d: RunData): StepReport[] {
  return d.steps.filter((s) => (s.kind === 'cpt' || s.kind === 'sft' || s.kind === 'rl') && s.series);
}

function throughputCharts(d: RunData): ChartSpec[] {
  const byUnit = new Map<string, Line[]>();
  for (const s of trainingSteps(d)) {
    const pts = s.series!.throughput.length ? s.series!.throughput : s.series!.rolloutThroughput;
    const unit = s.series!.throughputUnit;
    if (!pts.length || !unit) continue;
    byUnit.set(unit, [...(byUnit.get(unit) ?? []), { name: s.id, points: pts }]);
  }
  return [...byUnit].flatMap(([unit, lines], i) => {
    const c = lineChart({
      id: `throughput${i ? `-${i}` : ''}`,
      title: `Throughput (${unit})`,
      caption: unit === 'it/s' ? 'iterations per second (1000 / the logged ms per iteration): the CPU trainer counts no FLOPs' : `${unit} as the trainer logged it`,
      xName: lines.some((l) => /^rl\./.test(l.name)) && unit.startsWith('tokens') ? 'rollout' : 'iteration',
      yName: unit,
      lines,
    });
    return c ? [c] : [];
  });
}

function gradNormChart(d: RunData): ChartSpec[] {
  const lines = trainingSteps(d).map((s) => ({ name: s.id, points: s.series!.gradNorm.length ? s.series!.gradNorm : s.series!.stepGradNorm }));
  const c = lineChart({ id: 'grad-norm', title: 'Gradient norm', caption: 'grad norm per iteration (or optimizer step) where the trainer logs it', xName: 'iteration', yName: 'grad norm', lines, logY: false });
  return c ? [c] : [];
}

/** Outcome of an attempt as the timeline colours it. */
export const OUTCOME_COLOURS: Record<string, string> = { ok: '#009E73', running: '#56B4E9', failed: '#D55E00', stopped: '#999999' };

/** The stage timeline: one row per step, one bar per attempt, coloured by how it ended. */
function timelineChart(d: RunData): ChartSpec[] {
  const rows = d.steps.filter((s) => s.series?.attempts.length);
  if (!rows.length) return [];
  const data: { value: [number, number, number]; name: string; outcome: string }[] = [];
  rows.forEach((s, row) => {
    for (const a of s.series!.attempts) {
      const start = Date.parse(a.start);
      const endIso = a.end ?? s.series!.lastTime ?? a.start;
      const end = Math.max(Date.parse(endIso), start + 1);
      const outcome = a.failure ? 'failed' : a.end ? 'ok' : s.status === 'running' ? 'running' : 'stopped';
      const label = visible(`attempt ${a.attempt}${a.resumedFrom !== null ? ` (resumed from ${a.resumedFrom})` : ''}${a.failure ? `: ${a.failure.class}` : ''}`);
      data.push({ value: [row, start, end], name: label, outcome });
    }
  });
  const t0 = Math.min(...data.map((x) => x.value[1]));
  const secs = data.map((x) => ({ ...x, value: [x.value[0], (x.value[1] - t0) / 1000, (x.value[2] - t0) / 1000] as [number, number, number] }));
  const failures = data.filter((x) => x.outcome === 'failed').length;
  return [
    {
      id: 'timeline',
      title: 'Stage timeline: attempts, failures, resumes',
      caption: `each bar an attempt, from its start to its end (logs' [infir2 …] lines): green ended well, red failed (${failures} here), grey stopped, blue running`,
      xName: 'seconds since the first step began',
      yName: 'step',
      series: [{ name: 'attempts', points: secs.length, drawn: secs.length }],
      height: Math.max(220, 70 + rows.length * 26),
      option: {
        animation: false,
        title: { text: 'Stage timeline: attempts, failures, resumes', left: 'center', textStyle: { fontSize: 14 } },
        grid: { left: 110, right: 40, top: 40, bottom: 48 },
        xAxis: { type: 'value', name: 'seconds since the first step began', nameLocation: 'middle', nameGap: 28, min: 0 },
        yAxis: { type: 'category', name: 'step', nameLocation: 'start', nameGap: 10, inverse: true, data: rows.map((s) => visible(s.id)), axisLabel: { fontSize: 10 } },
        series: [
          {
            type: 'custom',
            name: 'attempts',
            renderItem: (_params, api) => {
              const row = api.value(0) as number;
              const from = api.coord([api.value(1), row]);
              const to = api.coord([api.value(2), row]);
              const h = (api.size!([0, 1]) as number[])[1]! * 0.6;
              return {
                type: 'rect',
                shape: { x: from[0]!, y: from[1]! - h / 2, width: Math.max(to[0]! - from[0]!, 1.5), height: h },
                style: { fill: OUTCOME_COLOURS[secs[_params.dataIndex]!.outcome], stroke: '#fff', lineWidth: 0.5 },
              };
            },
            encode: { x: [1, 2], y: 0 },
            data: secs.map((x) => ({ value: x.value, name: x.name })),
          },
        ],
      },
    },
  ];
}

/** Where each step's kept attempt spent its time (the supervisor's accounting), and what failed attempts cost. */
function timeSplitChart(d: RunData): ChartSpec[] {
  const rows = d.steps.filter((s) => s.result?.time || s.series?.attempts.some((a) => a.failure));
  if (!rows.length) return [];
  const lostIn = (s: StepReport) =>
    (s.series?.attempts ?? []).filter((a) => a.failure && a.end).reduce((t, a) => t + (Date.parse(a.end!) - Date.parse(a.start)) / 1000, 0);
  const cats = [...TIME_CATEGORIES.filter((c) => rows.some((s) => (s.result?.time?.secs[c] ?? 0) > 0)), 'failed attempts'];
  const series: SeriesOption[] = cats.map((c) => ({
    type: 'bar',
    name: c,
    stack: 'time',
    data: rows.map((s) => Number((c === 'failed attempts' ? lostIn(s) : (s.result?.time?.secs[c as (typeof TIME_CATEGORIES)[number]] ?? 0)).toFixed(2))),
    ...(c === 'failed attempts' ? { itemStyle: { color: '#D55E00' } } : {}),
  }));
  return [
    {
      id: 'time-split',
      title: 'Where the time went, per step',
      caption: 'seconds of the completed attempt by category (productive training, start-up, saves, waits, …) and the wall time of failed attempts: the lost time',
      xName: 'seconds',
      yName: 'step',
      series: cats.map((c) => ({ name: c, points: rows.length, drawn: rows.length })),
      height: Math.max(240, 90 + rows.length * 24),
      option: {
        animation: false,
        color: PALETTE,
        title: { text: 'Where the time went, per step', left: 'center', textStyle: { fontSize: 14 } },
        legend: { top: 34 },
        grid: { left: 110, right: 40, top: 74, bottom: 48 },
        tooltip: { trigger: 'axis' },
        xAxis: { type: 'value', name: 'seconds', nameLocation: 'middle', nameGap: 28 },
        yAxis: { type: 'category', name: 'step', nameLocation: 'start', nameGap: 10, inverse: true, data: rows.map((s) => visible(s.id)), axisLabel: { fontSize: 10 } },
        series,
      },
    },
  ];
}

export function reportCharts(d: RunData): ChartSpec[] {
  // A parity run's variants overlaid on one chart (their CPT steps are lines of a comparison, not one schedule).
  if (d.parity) {
    const p = parityChart(d, d.parity);
    return [...(p ? [p] : []), ...throughputCharts(d), ...gradNormChart(d), ...timelineChart(d), ...timeSplitChart(d)];
  }
  return [...cptCharts(d), ...sftCharts(d), ...rlCharts(d), ...throughputCharts(d), ...gradNormChart(d), ...timelineChart(d), ...timeSplitChart(d)];
}
