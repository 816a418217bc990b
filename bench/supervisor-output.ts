/**
 * The supervisor's cost on a trainer's output (`npx tsx bench/supervisor-output.ts`): a step that prints 1 GB
 * as fast as the pipe takes it, through the built worker against a real dev server, in 200-byte lines (an NCCL
 * debug flood) and as one line with no newline (a tensor dump). Prints lines/s and MB/s (the step's wall time,
 * start-up included) and the worker's RSS before, at its peak and after: memory must stay flat whatever the
 * trainer prints (issue 20).
 */
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PlanStep } from '../src/plan/types.js';
import { fakePlan, fakeStep, PYTHON, ROOT, setupEnv, startPlan } from '../test/integration/harness.js';

const MB = Number(process.env.FLOOD_MB ?? 1024);
const FLOOD = join(ROOT, 'bench', 'fixtures', 'flood.py');

function vmMb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  return Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
}

const env = await setupEnv('supervisor-output');
try {
  const worker = await env.startWorker();
  const pid = worker.pid!;
  for (const [name, lineBytes] of [['200-byte lines', 200], ['one line, no newline', 0]] as const) {
    const runDir = join(env.dir, 'runs', `flood-${lineBytes}`);
    const base = fakeStep({ id: 'flood', runDir, files: true });
    const step: PlanStep = { ...base, command: { ...base.command, argv: [PYTHON, FLOOD, String(MB), String(lineBytes)] }, completion: { kind: 'files', paths: [] } };
    await new Promise((r) => setTimeout(r, 1000));
    try {
      writeFileSync(`/proc/${pid}/clear_refs`, '5'); // reset the peak (root only)
    } catch {
      /* the peak since start stays the baseline */
    }
    const before = vmMb(pid, 'VmRSS');
    const res = (await (await startPlan(env, fakePlan(runDir, `flood-${lineBytes}`, [step]))).result()) as { status: { steps: { result: { durationSec: number } }[] } };
    const sec = res.status.steps[0]!.result.durationSec;
    const peak = vmMb(pid, 'VmHWM');
    await new Promise((r) => setTimeout(r, 2000));
    const after = vmMb(pid, 'VmRSS');
    const lines = lineBytes ? (MB << 20) / lineBytes : 1;
    // The log on disk: its head and rotated part too, once past a tenth of the cap (logs.maxMB, 1024 by default).
    const logMb = readdirSync(join(runDir, 'logs')).filter((f) => f.startsWith('flood.log')).reduce((n, f) => n + statSync(join(runDir, 'logs', f)).size, 0) / 2 ** 20;
    console.log(
      `${MB} MB in ${name}: ${sec.toFixed(1)} s, ${(MB / sec).toFixed(0)} MB/s, ${lineBytes ? `${(lines / sec / 1e6).toFixed(2)} M lines/s` : '1 line'}; ` +
        `worker RSS ${before.toFixed(0)} MB before, peak ${peak.toFixed(0)} MB, ${after.toFixed(0)} MB after; log on disk ${logMb.toFixed(1)} MB`,
    );
  }
} finally {
  await env.teardown();
}
