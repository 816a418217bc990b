/**
 * `infir2 parity tiny`: the tiny recipe's first 100 CPT iterations in BF16 and FP8, two seeds each, as one run
 * on a real dev server and worker, with the reference trainer. The verdict it prints is checked against the
 * validation losses the trainers logged, and the run's report carries the same verdict.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, setupEnv, type Env } from '../integration/harness.js';

const exec = promisify(execFile);
let env: Env;

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await exec(process.execPath, [join(ROOT, 'bin', 'infir2.js'), ...args], { env: { ...process.env, TEMPORAL_ADDRESS: env.server.address, CI: '1' }, timeout: 600_000 });
    return { code: 0, ...r };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

beforeAll(async () => {
  env = await setupEnv('parity');
  await env.startWorker(['--pool', 'local']);
});
afterAll(async () => {
  await env?.teardown();
});

describe('infir2 parity', () => {
  it('runs BF16 and FP8 with two seeds each and judges the gap against the BF16 seed-to-seed noise', async () => {
    const runs = join(env.dir, 'runs');
    const r = await cli(['parity', 'tiny', '--iterations', '100', '--seeds', '2', '--run-id', 'p1', '--set', `runDir=${runs}`]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    // Each variant's validation loss at iteration 100, from its own log.
    const val = (v: string) => Number(/validation loss at iteration 100(?: on validation set)? \| lm loss value: (\S+)/.exec(readFileSync(join(runs, 'p1', 'logs', `${v}.cpt.stable.log`), 'utf8'))![1]);
    const [b1, b2, f1, f2] = ['bf16-s1234', 'bf16-s1235', 'fp8-s1234', 'fp8-s1235'].map(val) as [number, number, number, number];
    const bf16 = (b1 + b2) / 2;
    const gap = ((f1 + f2) / 2 - bf16) / bf16;
    const noise = Math.abs(b1 - b2) / bf16;
    const verdict = Math.abs(gap) <= noise ? 'within noise' : `FP8 ${gap > 0 ? 'worse' : 'better'} by ${(Math.abs(gap) / noise).toFixed(1)} × the noise`;
    const line = `parity (validation loss at iteration 100): FP8 vs BF16 ${gap >= 0 ? '+' : ''}${(gap * 100).toFixed(2)} %, BF16 seed-to-seed noise ${(noise * 100).toFixed(2)} % → ${verdict}`;
    expect(r.stdout).toContain(line);
    console.log(`[parity] ${line}`);
    const steps = JSON.parse((await cli(['status', 'tiny-p1', '--json'])).stdout) as { steps: { id: string; status: string; attempts: number }[]; report: string };
    expect(steps.steps.map((s) => s.id)).toEqual(['bf16-s1234.cpt.warmup', 'bf16-s1234.cpt.stable', 'bf16-s1235.cpt.warmup', 'bf16-s1235.cpt.stable', 'fp8-s1234.cpt.warmup', 'fp8-s1234.cpt.stable', 'fp8-s1235.cpt.warmup', 'fp8-s1235.cpt.stable']);
    expect(steps.steps.every((s) => s.status === 'completed' && s.attempts === 1)).toBe(true);
    // The FP8 variants ran with FP8, the BF16 ones without; the seeds are the recipe's and the next.
    const plan = JSON.parse(readFileSync(join(runs, 'p1', 'plan.json'), 'utf8')) as { steps: { id: string; command: { argv: string[] } }[] };
    for (const s of plan.steps) {
      expect(s.command.argv.includes('--fp8-format'), s.id).toBe(s.id.startsWith('fp8'));
      expect(s.command.argv[s.command.argv.indexOf('--seed') + 1], s.id).toBe(/-s(\d+)\./.exec(s.id)![1]);
    }
    const page = readFileSync(steps.report, 'utf8');
    expect(page).toContain(`data-verdict="${verdict}"`);
    expect(page).toContain('id="chart-parity-loss"');
    // After `parity --detach` the verdict is read with `report` or `status`; the run holds both precisions.
    expect((await cli(['report', 'tiny-p1', '--no-png'])).stdout).toContain(line);
    expect((await cli(['status', 'tiny-p1'])).stdout).toContain(line);
    expect((await cli(['list'])).stdout).toMatch(/^tiny-p1\s.*\sbf16\+fp8\s/m);
  }, 600_000);

  it('refuses bad input with one line and exit 2', async () => {
    for (const [args, msg] of [
      [['--seeds', '1'], "error: --seeds: expected a whole number of at least 2, got '1'"],
      [['--iterations', '5'], 'error: --iterations: 5 ends inside the warmup (cpt.warmupIters=10): expected more, so that the stable phase is compared too'],
      [['--stage', 'sft'], "error: --stage: expected cpt (a prefix of the pre-training schedule), got 'sft'"],
      [['--iterations', '481'], "error: --iterations: 481 goes past the recipe's stable phase, which ends at 480 (cpt.iterations − cpt.decayIters): expected at most 480"],
    ] as const) {
      const r = await cli(['parity', 'tiny', ...args]);
      expect([r.code, r.stderr]).toEqual([2, `${msg}\n`]);
    }
  });
});
