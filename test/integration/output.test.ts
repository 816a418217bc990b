/**
 * Bounded memory on any output (issue 20): a trainer that prints one 200 MB line without a newline used to cost
 * the worker gigabytes and block the trainer for minutes (the unfinished line was re-joined on every chunk).
 * Through the built worker against a real dev server: the worker's peak RSS grows by less than 100 MB, the
 * next iteration is parsed within seconds, and the log keeps the line's head with a marker.
 * Bounded disk too: a flood past the step's log cap leaves about the cap on disk, and `infir2 logs` (once and
 * `--follow`) shows the log's head, one marker and the newest part, across attempts.
 */
import { execFile, spawn } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakePlan, fakeStep, processesMentioning, ROOT, setupEnv, startPlan, tmpRunDir, type Env } from './harness.js';

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

  it('a flood past the log cap: about the cap on disk; logs and logs --follow show the head, one marker and the newest part', async () => {
    if (!env.workers.length) await env.startWorker(); // alone (-t), the first test's worker is not there
    const runDir = tmpRunDir(env, 'flood');
    // 8 MB through a 1 MiB cap, then a crash: the second attempt appends to the rotated log.
    const plan = fakePlan(runDir, 'flood', [
      fakeStep({ id: 'cpt.stable', runDir, iters: 8, saveInterval: 3, sleep: 0.2, faults: ['flood@3', 'crash@6'], env: { FAKE_FLOOD_MB: '8' }, logMaxMB: 1 }),
    ]);
    const cliArgs = (args: string[]) => [join(ROOT, 'bin', 'infir2.js'), ...args];
    const cliEnv = { ...process.env, TEMPORAL_ADDRESS: env.server.address };
    const h = await startPlan(env, plan);
    const follower = spawn(process.execPath, cliArgs(['logs', h.workflowId, '--stage', 'cpt.stable', '--follow']), { env: cliEnv });
    let followed = '';
    follower.stdout.on('data', (d: Buffer) => (followed += d.toString('utf8')));
    const followerDone = new Promise((r) => follower.once('exit', r));
    await h.result();
    await followerDone;

    const log = join(runDir, 'logs', 'cpt.stable.log');
    const files = [`${log}.head`, `${log}.1`, log];
    expect(files.reduce((n, f) => n + statSync(f).size, 0)).toBeLessThanOrEqual(2 ** 20);
    expect(readFileSync(`${log}.head`, 'utf8')).toMatch(/^\[infir2 \S+\] attempt 1 starting fresh: /m);
    expect(readFileSync(log, 'utf8')).toMatch(/attempt 2 ended: exit code 0\n$/);

    const { stdout } = await promisify(execFile)(process.execPath, cliArgs(['logs', h.workflowId, '--stage', 'cpt.stable']), { env: cliEnv, maxBuffer: 16 << 20 });
    expect(stdout.startsWith(readFileSync(`${log}.head`, 'utf8'))).toBe(true);
    expect(stdout.match(/log rotated: \d+ MB dropped between here and the newest part \(cap logs\.maxMB=1\)\n/g)).toHaveLength(1);
    expect(stdout).not.toContain('log continues at byte');
    expect(stdout).toMatch(/flood 000041942 \.+\n/); // the flood's last line
    expect(stdout).toMatch(/attempt 1 failed: crash: [^\n]*\n[^]*attempt 2 resuming from iteration 3[^]*attempt 2 ended: exit code 0\n$/);

    // --follow read the same log as it rotated: from its first line to its last, nothing twice.
    const floods = (text: string) => [...text.matchAll(/^flood (\d{9}) /gm)].map((m) => Number(m[1]));
    const seen = floods(followed);
    expect(followed.startsWith(readFileSync(`${log}.head`, 'utf8'))).toBe(true);
    expect(seen.every((n, i) => i === 0 || n > seen[i - 1]!)).toBe(true);
    expect(seen.at(-1)).toBe(41942);
    expect(followed).toMatch(/attempt 2 ended: exit code 0\n$/);
    expect(processesMentioning(runDir)).toEqual([]);
  });
});
