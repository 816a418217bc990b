/**
 * How fast the read-only verbs answer for a 20-step run (`npx tsx bench/cli-latency.ts`): wall time of
 * `infir2 status --json` and `infir2 list --json` as a user runs them (a fresh node process each time),
 * and of `infir2 plan` for the 7B recipe (no server involved). Prints the median of 5.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { fakePlan, fakeStep, ROOT, setupEnv, startPlan } from '../test/integration/harness.js';

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function timeCli(args: string[], env: NodeJS.ProcessEnv): number {
  const t0 = process.hrtime.bigint();
  execFileSync(process.execPath, [join(ROOT, 'bin', 'infir2.js'), ...args], { env, stdio: 'ignore' });
  return Number(process.hrtime.bigint() - t0) / 1e9;
}

const env = await setupEnv('cli-latency');
try {
  await env.startWorker();
  const runDir = join(env.dir, 'runs', 'twenty');
  // 20 steps: a running CPT-like step that several others wait on, so status has live progress to merge.
  const steps = [fakeStep({ id: 'cpt.stable', runDir, iters: 100000, sleep: 0.05 })];
  for (let i = 0; i < 19; i++) steps.push(fakeStep({ id: `eval.b${i}`, runDir, files: true, dependsOn: ['cpt.stable'] }));
  const h = await startPlan(env, fakePlan(runDir, 'twenty', steps));
  await new Promise((r) => setTimeout(r, 3000));
  const cenv = { ...process.env, TEMPORAL_ADDRESS: env.server.address };
  const status = Array.from({ length: 5 }, () => timeCli(['status', h.workflowId, '--json'], cenv));
  const list = Array.from({ length: 5 }, () => timeCli(['list', '--json'], cenv));
  const plan = Array.from({ length: 5 }, () => timeCli(['plan', join(ROOT, 'recipes', 'qwen2.5-7b-fp8.yaml'), '--json'], cenv));
  console.log(`status --json (20 steps, one running): median ${median(status).toFixed(3)} s`);
  console.log(`list --json: median ${median(list).toFixed(3)} s`);
  console.log(`plan recipes/qwen2.5-7b-fp8.yaml --json: median ${median(plan).toFixed(3)} s`);
  await h.cancel();
} finally {
  await env.teardown();
}
