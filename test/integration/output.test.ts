/**
 * Bounded memory on any output (issue 20): a trainer that prints one 200 MB line without a newline used to cost
 * the worker gigabytes and block the trainer for minutes (the unfinished line was re-joined on every chunk).
 * Through the built worker against a real dev server: the worker's peak RSS grows by less than 100 MB, the
 * next iteration is parsed within seconds, and the log keeps the line's head with a marker.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakePlan, fakeStep, processesMentioning, setupEnv, startPlan, tmpRunDir, type Env } from './harness.js';

let env: Env;
beforeAll(async () => {
  env = await setupEnv('output');
});
afterAll(async () => env?.teardown());

/** kB of a /proc status field (VmRSS, VmHWM) of `pid`. */
function vm(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]);
}

describe('trainer output', () => {
  it('a 200 MB line without a newline: the worker\'s peak RSS grows by < 100 MB and the next iteration arrives within seconds', async () => {
    const worker = await env.startWorker();
    const runDir = tmpRunDir(env, 'long-line');
    const plan = fakePlan(runDir, 'long-line', [
      fakeStep({ id: 'cpt.stable', runDir, iters: 12, saveInterval: 4, sleep: 0.2, faults: ['longline@6'], env: { FAKE_LONG_LINE_MB: '200' } }),
    ]);
    // Let the worker settle, then reset its peak (root may; else the peak since start is the baseline).
    await new Promise((r) => setTimeout(r, 1000));
    try {
      writeFileSync(`/proc/${worker.pid}/clear_refs`, '5');
    } catch {
      /* not root: VmHWM keeps the start-up peak, which only makes the check stricter */
    }
    const before = Math.max(vm(worker.pid!, 'VmRSS'), 0);
    const h = await startPlan(env, plan);
    const log = join(runDir, 'logs', 'cpt.stable.log');
    const res = (await h.result()) as { status: { steps: { result: { durationSec: number } }[] } };
    // 12 iterations of 0.2 s: the attempt's whole time beyond them is what the 200 MB line cost.
    const lineCost = res.status.steps[0]!.result.durationSec - 12 * 0.2;
    const peakGrowthMb = (vm(worker.pid!, 'VmHWM') - before) / 1024;
    console.log(`200 MB line: the attempt took ${lineCost.toFixed(1)} s more than its iterations; worker RSS ${(before / 1024).toFixed(0)} MB before, peak +${peakGrowthMb.toFixed(0)} MB`);
    expect(peakGrowthMb).toBeLessThan(100);
    expect(lineCost).toBeLessThan(20);
    expect(readFileSync(log, 'utf8')).toMatch(/iteration\s+6\/\s+12 \|/);
    const text = readFileSync(log, 'utf8');
    expect(text).toContain(' [infir2: line cut at 1048576 characters; the rest is not kept] [infir2: 208666624 characters dropped]\n');
    expect(text.length).toBeLessThan(2 * 1024 * 1024);
    expect(processesMentioning(runDir)).toEqual([]);
  });
});
