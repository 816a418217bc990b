/**
 * The report of a run whose step log is huge (issue 30, case 4: a log joined into one string failed past
 * ~512 MiB): time, CPU time and peak memory of `infir2 report <run dir>` (the compiled CLI, dist/: run
 * `bash scripts/build.sh` first) on a run with one CPT step log of REPORT_LOG_MB MiB (default 1024, the default
 * `logs.maxMB` cap). Its peak RSS is the CLI process's own, read at its exit. Goals: under 30 s and 300 MB.
 *
 * Two shapes (REPORT_LOG_SHAPE):
 *   chatty      a 7B CPT's 100 000 iterations (one Megatron `training_log` line each, a validation every 1 000, a
 *               crash and resume) and between them what a chatty job prints: NCCL INFO lines, Python and
 *               TransformerEngine warnings, ~80 lines an iteration; the default
 *   iterations  nothing but `training_log` lines, ~3.3 million of them: the curves' own bound (curve.ts) at work
 * `REPORT_LOG_SHAPE=both` runs each. Run: `npx tsx bench/report-big-log.ts` (writes the log under $TMPDIR first).
 */
import { spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compilePlan } from '../src/plan/compile.js';
import { loadRecipe } from '../src/recipe/load.js';

const MIB = 2 ** 20;

function trainingLog(i: number, total: number, t: number): string {
  const loss = 2 + 1.5 * Math.exp(-i / 10_000) + 0.02 * Math.sin(i * 1.7);
  const stamp = new Date(t).toISOString().slice(0, 19).replace('T', ' ');
  return ` [${stamp}] iteration ${String(i).padStart(8)}/${String(total).padStart(8)} | consumed samples: ${String(i * 512).padStart(12)} | elapsed time per iteration (ms): 8360.0 | throughput per GPU (TFLOP/s/GPU): ${(461 + Math.sin(i) * 3).toFixed(1)} | learning rate: 3.000000E-04 | global batch size:   512 | lm loss: ${loss.toExponential(6).toUpperCase()} | loss scale: 1.0 | grad norm: ${(0.25 + 0.01 * Math.cos(i)).toFixed(3)} | number of skipped iterations:   0 | number of nan iterations:   0 |\n`;
}

const NOISE = [
  'node-17:4242:4301 [3] NCCL INFO Channel 07/0 : 3[3] -> 4[4] via P2P/CUMEM/read\n',
  '/usr/local/lib/python3.12/dist-packages/transformer_engine/pytorch/module/base.py:914: UserWarning: FP8 block scaling recipe: falling back to BF16 for the wgrad GEMM of a 1x128 tile\n',
  '[rank3]:[W1125 11:18:22.913468218 ProcessGroupNCCL.cpp:4715] Guessing device ID based on global rank. This can cause a hang if rank to GPU mapping is heterogeneous.\n',
  'node-17:4242:4310 [3] NCCL INFO Connected all rings, use ring PXN 0 GDR 1\n',
];

/** Writes the step log; returns its size and the iterations it holds. */
function writeLog(file: string, targetBytes: number, shape: 'chatty' | 'iterations'): { bytes: number; iterations: number } {
  const fd = openSync(file, 'w');
  let bytes = 0;
  let buf: string[] = [];
  let pending = 0;
  const put = (s: string) => {
    buf.push(s);
    pending += s.length;
    if (pending >= 4 * MIB) flush();
  };
  const flush = () => {
    bytes += writeSync(fd, buf.join(''));
    buf = [];
    pending = 0;
  };
  const t0 = Date.parse('2026-01-01T00:00:00Z');
  const total = shape === 'chatty' ? 100_000 : 4_000_000;
  put(`[infir2 ${new Date(t0).toISOString()}] attempt 1 starting fresh: torchrun … pretrain_gpt.py\n`);
  // Bytes of noise per iteration so that the log reaches its size at about the last iteration.
  const perIteration = shape === 'chatty' ? Math.max(0, targetBytes / total - trainingLog(1, total, t0).length - 40) : 0;
  let k = 0;
  let i = 0;
  let resumed = false;
  while (bytes + pending < targetBytes && i < total) {
    i++;
    put(trainingLog(i, total, t0 + i * 8360));
    if (i % 1000 === 0) put(` validation loss at iteration ${i} | lm loss value: 2.500000E+00 | lm loss PPL: 1.218249E+01 | \n`);
    for (let n = 0; n < perIteration; ) {
      const line = NOISE[k++ % NOISE.length]!;
      put(line);
      n += line.length;
    }
    if (!resumed && i === Math.floor(total / 2)) {
      // A crash and a resume 700 iterations back: those iterations are logged twice, the later kept.
      resumed = true;
      put(`[infir2 ${new Date(t0 + i * 8360).toISOString()}] attempt 1 failed: crash: exit code 1\n`);
      put(`[infir2 ${new Date(t0 + i * 8360 + 60_000).toISOString()}] attempt 2 resuming from iteration ${i - 700}: torchrun … pretrain_gpt.py\n`);
      i -= 700;
    }
  }
  put(`[infir2 ${new Date(t0 + i * 8360).toISOString()}] attempt ${resumed ? 2 : 1} ended: exit code 0\n`);
  flush();
  closeSync(fd);
  return { bytes, iterations: i };
}

/** Printed by the CLI process as it exits: its peak RSS (KiB) and CPU time (µs). */
const AT_EXIT = `data:text/javascript,process.on('exit',()=>{const u=process.resourceUsage();process.stderr.write('\\nINFIR2_BENCH '+JSON.stringify({maxRSS:u.maxRSS,cpu:u.userCPUTime+u.systemCPUTime})+'\\n')})`;

/** `infir2 report <runDir>`, timed. */
function report(runDir: string): { s: number; cpuS: number; maxRssMB: number; stdout: string } {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, ['--import', AT_EXIT, 'bin/infir2.js', 'report', runDir, '--out', join(runDir, 'report')], { encoding: 'utf8', maxBuffer: 16 * MIB });
  const s = (performance.now() - t0) / 1000;
  const m = /INFIR2_BENCH (\{.*\})/.exec(r.stderr);
  if (r.status !== 0 || !m) throw new Error(`infir2 report failed (${r.status}): ${r.stderr.slice(-2000)}`);
  const u = JSON.parse(m[1]!) as { maxRSS: number; cpu: number };
  return { s, cpuS: u.cpu / 1e6, maxRssMB: u.maxRSS / 1024, stdout: r.stdout };
}

async function main(): Promise<void> {
  const mb = Number(process.env.REPORT_LOG_MB ?? 1024);
  const shapes = (process.env.REPORT_LOG_SHAPE ?? 'chatty') === 'both' ? (['chatty', 'iterations'] as const) : ([process.env.REPORT_LOG_SHAPE ?? 'chatty'] as ('chatty' | 'iterations')[]);
  for (const shape of shapes) {
    const dir = mkdtempSync(join(tmpdir(), 'infir2-report-big-'));
    try {
      const { recipe } = await loadRecipe('infir2-7b', { sets: [`runDir=${dir}`] });
      const plan = compilePlan(recipe, { runId: 'big', projectRoot: process.cwd() });
      plan.steps = plan.steps.filter((s) => s.id === 'cpt.stable');
      mkdirSync(join(plan.runDir, 'logs'), { recursive: true });
      writeFileSync(join(plan.runDir, 'plan.json'), JSON.stringify(plan));
      writeFileSync(join(plan.runDir, 'recipe.json'), JSON.stringify(recipe));
      const t0 = performance.now();
      // logs.maxMB 0: one file, as a run with no cap (or a cap above the log) leaves it.
      const log = writeLog(join(plan.runDir, 'logs', 'cpt.stable.log'), mb * MIB, shape);
      const wroteS = (performance.now() - t0) / 1000;
      const res = report(plan.runDir);
      console.log(`[report-big-log] ${shape}: a ${(log.bytes / MIB).toFixed(0)} MiB step log, ${log.iterations} iterations (written in ${wroteS.toFixed(1)} s)`);
      console.log(`  infir2 report: ${res.s.toFixed(1)} s (goal under 30 s; CPU ${res.cpuS.toFixed(1)} s), peak RSS ${res.maxRssMB.toFixed(0)} MB (goal under 300 MB)`);
      for (const line of res.stdout.trim().split('\n')) console.log(`  | ${line}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
}

// The bench measures the compiled CLI: refuse a dist/ older than the sources it would measure.
if ((statSync('dist/report/run-data.js', { throwIfNoEntry: false })?.mtimeMs ?? 0) < statSync('src/report/run-data.ts').mtimeMs) {
  console.error('[report-big-log] dist/ is missing or older than src/: run `bash scripts/build.sh` first');
  process.exit(2);
}
await main();
