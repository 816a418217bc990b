/**
 * `infir2 replay-check` against a real dev server and real histories: a completed run and a running one replay
 * on this checkout's workflow bundle (exit 0); on a bundle built from a copy of the workflows with a
 * deliberately incompatible change (a timer before each step's first activity), every step workflow is named as
 * breaking, the running one first among them, and the command exits 1.
 *
 * And a hand-started worker's log through a server outage: plain lines (no ANSI colours, no Rust status dumps),
 * the outage and the server's return said once each, and a last line when it stops.
 */
import { bundleWorkflowCode } from '@temporalio/worker';
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakePlan, fakeStep, ROOT, setupEnv, sleep, startPlan, tmpRunDir, waitFor, type Env } from './harness.js';

const run = promisify(execFile);

let env: Env;
beforeAll(async () => {
  env = await setupEnv('replay-check');
});
afterAll(async () => env?.teardown());

async function infir2(args: string[], extraEnv: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(process.execPath, [join(ROOT, 'bin', 'infir2.js'), ...args], { env: { ...process.env, TEMPORAL_ADDRESS: env.server.address, ...extraEnv } });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** A bundle of a copy of src/ whose stageRun starts a timer before each attempt's activity: new commands in old histories. */
async function incompatibleBundle(): Promise<string> {
  // Under the checkout, so that the copy's imports find node_modules as the real workflows do.
  const copy = join(ROOT, '.tmp', `replay-check-${process.pid}`);
  rmSync(copy, { recursive: true, force: true });
  mkdirSync(copy, { recursive: true });
  cpSync(join(ROOT, 'src'), join(copy, 'src'), { recursive: true });
  const file = join(copy, 'src', 'workflows', 'stage-run.ts');
  const code = readFileSync(file, 'utf8');
  const call = '      const result = await runStep({';
  expect(code).toContain(call);
  writeFileSync(file, code.replace(call, `      await sleep(1);\n${call}`));
  const { code: bundle } = await bundleWorkflowCode({ workflowsPath: join(copy, 'src', 'workflows', 'index.ts'), logger: { trace() {}, debug() {}, info() {}, warn() {}, error() {}, log() {} } });
  const out = join(copy, 'workflow-bundle.js');
  writeFileSync(out, bundle);
  return out;
}

describe('infir2 replay-check', () => {
  it('passes on the current workflow code and names every run an incompatible change would break', async () => {
    await env.startWorker();
    const doneDir = tmpRunDir(env, 'replay-done');
    const done = await startPlan(env, fakePlan(doneDir, 'replay-done', [fakeStep({ id: 'cpt.warmup', runDir: doneDir, iters: 3 }), fakeStep({ id: 'cpt.stable', runDir: doneDir, iters: 4, dependsOn: ['cpt.warmup'] })]));
    await done.result();
    const liveDir = tmpRunDir(env, 'replay-live');
    const live = await startPlan(env, fakePlan(liveDir, 'replay-live', [fakeStep({ id: 'cpt.warmup', runDir: liveDir, iters: 400, sleep: 0.2 })]));
    const stepRunning = () =>
      env.client.workflow
        .getHandle('fake-replay-live/cpt.warmup')
        .describe()
        .then((d) => d.status.name === 'RUNNING')
        .catch(() => false); // not started yet
    await waitFor('the live step to train', stepRunning);
    await sleep(1000);

    const ok = await infir2(['replay-check']);
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
    const lines = ok.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^replaying 5 workflow histories \(running, or closed since .* UTC\) against .*workflow-bundle\.js \.\.\.$/);
    expect(lines.slice(1, -1).sort()).toEqual(
      [
        'ok  recipeRun  completed  fake-replay-done',
        'ok  recipeRun  running    fake-replay-live',
        'ok  stageRun   completed  fake-replay-done/cpt.stable',
        'ok  stageRun   completed  fake-replay-done/cpt.warmup',
        'ok  stageRun   running    fake-replay-live/cpt.warmup',
      ].sort(),
    );
    expect(lines.at(-1)).toBe('all 5 replay: this workflow code can take over the runs in flight');

    const bundle = await incompatibleBundle();
    const bad = await infir2(['replay-check', '--bundle', bundle, '--json']);
    expect(bad.code).toBe(1);
    const verdicts = (JSON.parse(bad.stdout) as { verdicts: { workflowId: string; type: string; status: string; error: string | null }[] }).verdicts;
    const broken = verdicts.filter((v) => v.error).map((v) => v.workflowId).sort();
    expect(broken).toEqual(['fake-replay-done/cpt.stable', 'fake-replay-done/cpt.warmup', 'fake-replay-live/cpt.warmup']);
    // The runs themselves (recipeRun) are unchanged code: they replay.
    expect(verdicts.filter((v) => v.type === 'recipeRun').every((v) => v.error === null)).toBe(true);
    for (const v of verdicts.filter((x) => x.error)) expect(v.error).toMatch(/[Nn]ondetermin|DeterminismViolation/);
    const text = await infir2(['replay-check', '--bundle', bundle]);
    expect(text.code).toBe(1);
    expect(text.stdout).toMatch(/^BREAKS {2}stageRun {3}running {4}fake-replay-live\/cpt\.warmup: .*$/m);
    expect(text.stdout.trimEnd().split('\n').at(-1)).toMatch(/^3 of 5 would break \(1 running\): a worker with this code would stall it at its next replay\. /);

    // A closed-only window leaves the finished run out; usage errors are one line, exit 2.
    expect((await infir2(['replay-check', '--bundle', join(bundle, 'nope')])).stderr).toBe(`error: --bundle: no file ${join(bundle, 'nope')} (a workflow bundle as scripts/build.sh writes it: dist/workflow-bundle.js)\n`);
    await live.cancel();
    rmSync(join(ROOT, '.tmp', `replay-check-${process.pid}`), { recursive: true, force: true });
  });
});

describe('a hand-started worker through a server outage', () => {
  it('logs the outage and the return once each, in plain lines, and a last line when it stops', async () => {
    const worker = await env.startWorker(['--no-workflows'], ['outage']);
    // Longer than two of the worker's 10 s identity checks, so that one of them finds it down.
    await env.restartServer(20_000);
    await waitFor('the worker to see the server again', () => env.outputOf(worker).includes('answers again'), 30_000).catch((err: unknown) => {
      throw new Error(`${String(err)}; the worker printed:\n${env.outputOf(worker)}`);
    });
    await env.stopWorker(worker);
    await waitFor('the last line', () => env.outputOf(worker).includes('worker stopped'), 10_000);
    const out = env.outputOf(worker);
    console.log(out);
    expect(out).not.toMatch(/\x1b\[/);
    expect(out).not.toMatch(/Status \{|tonic::|No workflows registered/);
    expect(out.match(/does not answer: running trainers go on/g)).toHaveLength(1);
    expect(out).toMatch(/^\S+Z the Temporal server at 127\.0\.0\.1:\d+ answers again \(silent for about \d+ s\)$/m);
    // Each kind of retry warning at most once in the outage (a minute's repeats are counted, not printed).
    const warnings = out.split('\n').filter((l) => / warn: gRPC call /.test(l)).map((l) => l.replace(/^\S+ warn: gRPC call (\w+) .*$/, '$1'));
    expect(new Set(warnings).size).toBe(warnings.length);
    expect(out.trimEnd().split('\n').at(-1)).toMatch(/^\S+Z worker stopped \(pid \d+, ran \d+ s\): SIGTERM received; /);
  });
});
