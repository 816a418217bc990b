/**
 * The checkpoint-interval section of `infir2 plan`: per training stage, the goodput its `saveInterval` is
 * expected to give and the Young–Daly optimum (src/recipe/goodput-advice.ts). Advice about the recipe, so it is
 * printed under the stage table and never enters the Plan (`plan --json` prints the Plan alone).
 */
import { jobMtbfSec, LLAMA3_FAILURES_PER_GPU_HOUR } from '../recipe/checkpoint-interval.js';
import type { StageAdvice } from '../recipe/goodput-advice.js';
import type { Recipe } from '../recipe/schema.js';

/** A rough human duration: `45s`, `12m`, `14.4h`, `264d`. */
export function roughly(sec: number): string {
  if (!Number.isFinite(sec)) return '∞';
  if (sec < 120) return `${Math.round(sec)}s`;
  if (sec < 2 * 3600) return `${Math.round(sec / 60)}m`;
  if (sec < 48 * 3600) return `${(sec / 3600).toFixed(1)}h`;
  return `${Math.round(sec / 86400)}d`;
}

const pct = (x: number) => `${(100 * x).toFixed(1)} %`;

function optimumCell(s: StageAdvice): string {
  const a = s.advice;
  if (s.missing === 'gpus') return 'no GPUs: the failure rate is per GPU-hour';
  if (!a) return `needs ${s.path}.estimates: { iterationTime, saveTime }`;
  const opt = `${a.optimum.iterations} (${roughly(a.optimum.sec)}): ${pct(a.optimum.goodput)}`;
  return a.suggested.iterations === a.optimum.iterations ? opt : `${opt}; ${a.suggested.iterations} divides ${s.alignedWith}: ${pct(a.suggested.goodput)}`;
}

export function formatCheckpointAdvice(stages: StageAdvice[], model: Recipe['goodput']): string {
  if (stages.length === 0) return '';
  const rate = `${model.failureRate.toExponential(2)} per GPU-hour${model.failureRate === LLAMA3_FAILURES_PER_GPU_HOUR ? ' (Llama 3)' : ''}`;
  const title = `checkpoint intervals · failure rate ${rate} · restart ${roughly(model.restartTime)} · docs/operations.md#checkpoint-interval`;
  if (stages.every((s) => s.missing === 'gpus')) return `${title}\nno training stage runs on GPUs: the failure rate is per GPU-hour`;
  const header = ['STAGE', 'GPUS', 'MTBF', 'SAVE EVERY', 'GOODPUT', 'YOUNG–DALY OPTIMUM'];
  const rows = stages.map((s) => [
    s.path,
    String(s.gpus),
    s.gpus > 0 ? roughly(jobMtbfSec(model.failureRate, s.gpus)) : '-',
    `${s.saveInterval} ${s.unit}`,
    s.advice ? pct(s.advice.current.goodput) : '-',
    optimumCell(s),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
  return [title, line(header), ...rows.map(line), ...legend(stages, model)].join('\n');
}

/** What the columns mean, said once under the table; the estimates line only while a stage lacks them. */
function legend(stages: StageAdvice[], model: Recipe['goodput']): string[] {
  const llama = model.failureRate === LLAMA3_FAILURES_PER_GPU_HOUR;
  const missing = stages.find((s) => s.missing === 'estimates');
  return [
    "  MTBF: how often the stage's GPUs together are expected to be interrupted: 1 / (failure rate × GPUs), from",
    llama
      ? "  goodput.failureRate, by default Llama 3's pre-training (419 unexpected interruptions in 54 days on 16,384 H100s)."
      : "  the recipe's goodput.failureRate.",
    "  GOODPUT: the share of the stage's time expected to train kept iterations with this save interval, after saves",
    '  and the work redone after failures; YOUNG–DALY OPTIMUM: the interval where that share is highest, √(2 × save time × MTBF).',
    ...(missing ? [`  needs ${missing.path}.estimates: your measured times, e.g. ${missing.path}: { estimates: { iterationTime: 90s, saveTime: 1m } } in the recipe.`] : []),
  ];
}
