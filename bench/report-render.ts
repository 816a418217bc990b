/**
 * How long a long run's report takes, and how big its page is (run: `npx tsx bench/report-render.ts`, or
 * `make bench`). A 100 000-iteration CPT is written as Megatron logs a 7B run's three WSD phases (one
 * `training_log` line per iteration, a validation every 1 000), with two loss spikes of one iteration each and a
 * crash and resume in the stable phase; the 7B plan with those phase lengths is its plan. It prints the time to
 * read and render the report with and without its PNGs (goal: under 2 s), the page's size (goal: under 2 MB),
 * the points drawn per series, and whether each spike is still on the chart after downsampling.
 *
 * Knobs: REPORT_ITERS (100000).
 */
import { mkdirSync, mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compilePlan } from '../src/plan/compile.js';
import { loadRecipe } from '../src/recipe/load.js';
import { reportCharts } from '../src/report/charts.js';
import { readRunData } from '../src/report/run-data.js';
import { writeReport } from '../src/report/write-report.js';

const ITERS = Number(process.env.REPORT_ITERS ?? 100_000);
const WARMUP = Math.round(ITERS / 20);
const DECAY = Math.round(ITERS / 8);
const SPIKES = [Math.round(ITERS * 0.37) + 1, Math.round(ITERS * 0.81) + 3];

function line(i: number, total: number, t: number): string {
  const loss = SPIKES.includes(i) ? 9.5 : 2 + 1.5 * Math.exp(-i / (ITERS / 10)) + 0.02 * Math.sin(i * 1.7);
  const lr = i <= WARMUP ? (3e-4 * i) / WARMUP : i <= ITERS - DECAY ? 3e-4 : 3e-4 * (1 - (i - ITERS + DECAY) / DECAY) + 3e-5;
  const stamp = new Date(t).toISOString().slice(0, 19).replace('T', ' ');
  return ` [${stamp}] iteration ${String(i).padStart(8)}/${String(total).padStart(8)} | consumed samples: ${String(i * 512).padStart(12)} | elapsed time per iteration (ms): 8360.0 | throughput per GPU (TFLOP/s/GPU): ${(461 + Math.sin(i) * 3).toFixed(1)} | learning rate: ${lr.toExponential(6).toUpperCase()} | global batch size:   512 | lm loss: ${loss.toExponential(6).toUpperCase()} | loss scale: 1.0 | grad norm: ${(0.25 + 0.01 * Math.cos(i)).toFixed(3)} | number of skipped iterations:   0 | number of nan iterations:   0 |`;
}

function phaseLog(first: number, last: number, t0: number, crashAt?: number, resumeFrom?: number): string {
  const out: string[] = [`[infir2 ${new Date(t0).toISOString()}] attempt 1 starting fresh: torchrun … pretrain_gpt.py`];
  let t = t0;
  const run = (from: number, to: number) => {
    for (let i = from; i <= to; i++) {
      t += 8360;
      out.push(line(i, last, t));
      if (i % 1000 === 0) out.push(` validation loss at iteration ${i} | lm loss value: 2.500000E+00 | lm loss PPL: 1.218249E+01 | `);
    }
  };
  if (crashAt !== undefined && resumeFrom !== undefined) {
    run(first + 1, crashAt - 1);
    out.push(`[infir2 ${new Date(t).toISOString()}] attempt 1 failed: crash: exit code 1`);
    out.push(`[infir2 ${new Date(t + 60_000).toISOString()}] attempt 2 resuming from iteration ${resumeFrom}: torchrun … pretrain_gpt.py`);
    run(resumeFrom + 1, last);
    out.push(`[infir2 ${new Date(t).toISOString()}] attempt 2 ended: exit code 0`);
  } else {
    run(first + 1, last);
    out.push(`[infir2 ${new Date(t).toISOString()}] attempt 1 ended: exit code 0`);
  }
  return out.join('\n') + '\n';
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'infir2-report-bench-'));
  try {
    const { recipe } = await loadRecipe('infir2-7b', { sets: [`runDir=${dir}`, `cpt.warmupIters=${WARMUP}`, `cpt.iterations=${ITERS}`, `cpt.decayIters=${DECAY}`, 'cpt.saveInterval=1000'] });
    const plan = compilePlan(recipe, { runId: 'bench', projectRoot: process.cwd() });
    // Only the CPT phases ran: the report says the other steps have no log yet.
    plan.steps = plan.steps.filter((s) => s.kind === 'cpt');
    mkdirSync(join(plan.runDir, 'logs'), { recursive: true });
    writeFileSync(join(plan.runDir, 'plan.json'), JSON.stringify(plan));
    writeFileSync(join(plan.runDir, 'recipe.json'), JSON.stringify(recipe));
    const stableEnd = ITERS - DECAY;
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    let bytes = 0;
    for (const [id, text] of [
      ['cpt.warmup', phaseLog(0, WARMUP, t0)],
      ['cpt.stable', phaseLog(WARMUP, stableEnd, t0 + WARMUP * 8360, Math.round(ITERS / 2), Math.round(ITERS / 2) - 700)],
      ['cpt.decay', phaseLog(stableEnd, ITERS, t0 + stableEnd * 8400)],
    ] as const) {
      writeFileSync(join(plan.runDir, 'logs', `${id}.log`), text);
      bytes += text.length;
    }
    const runs: { png: boolean; ms: number; size: number; charts: number }[] = [];
    for (const png of [false, true, false, true]) {
      const w = writeReport(plan.runDir, { out: join(dir, `out-${png}`), png });
      runs.push({ png, ms: w.ms, size: w.bytes, charts: w.charts });
    }
    const best = (png: boolean) => Math.min(...runs.filter((r) => r.png === png).map((r) => r.ms));
    const charts = reportCharts(readRunData(plan.runDir));
    const loss = charts.find((c) => c.id === 'cpt-loss')!;
    const drawn = (loss.option.series as { name: string; data: [number, number][] }[]);
    const spikesKept = SPIKES.map((s) => drawn.some((se) => se.data.some(([x, y]) => x === s && y === 9.5)));
    console.log(`[report-render] ${ITERS} CPT iterations in 3 phases (${(bytes / 2 ** 20).toFixed(1)} MiB of Megatron logs), a crash and resume, ${charts.length} charts`);
    console.log(`  read + render, HTML only:    ${best(false).toFixed(0)} ms (best of 2; goal under 2000 ms)`);
    console.log(`  read + render, with PNGs:    ${best(true).toFixed(0)} ms (best of 2)`);
    console.log(`  page size: ${(runs[0]!.size / 1024).toFixed(0)} KiB (goal under 2 MB)`);
    console.log(`  CPT loss series: ${loss.series.map((s) => `${s.name} ${s.points} → ${s.drawn} points`).join(', ')}`);
    console.log(`  one-iteration loss spikes at ${SPIKES.join(', ')} still drawn after downsampling: ${spikesKept.map((k) => (k ? 'yes' : 'NO')).join(', ')}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
