/**
 * The whole tiny recipe, for real: `infir2 run recipes/tiny.yaml` through the built CLI, against a real dev
 * server and worker, with the Python reference trainer training every stage on CPU. Then `infir2 fork` starts
 * a new decay from one of its stable checkpoints without touching a byte of the source run.
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inspectCheckpointDir } from '../../src/rundir/checkpoints.js';
import { deletions } from '../../src/rundir/retention.js';
import { ROOT, setupEnv, TEMPORAL_BIN, type Env } from '../integration/harness.js';
import { HAVE_CHROMIUM, OUT, openLocalPage, SKIP_REASON } from './browser.js';

const exec = promisify(execFile);
let env: Env;
let runs: string;
const SECRET = `s3cr3t-${randomBytes(12).toString('hex')}`;

async function cli(args: string[], timeout = 600_000): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await exec(process.execPath, [join(ROOT, 'bin', 'infir2.js'), ...args], {
      env: { ...process.env, TEMPORAL_ADDRESS: env.server.address, CI: '1' },
      timeout,
      maxBuffer: 64 << 20,
    });
    return { code: 0, ...r };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** Every file under `dir` with its content digest: what "byte-identical" is checked against. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (p: string) => {
    if (statSync(p).isDirectory()) return readdirSync(p).forEach((n) => walk(join(p, n)));
    out[relative(dir, p)] = createHash('sha256').update(readFileSync(p)).digest('hex');
  };
  walk(dir);
  return out;
}

interface Status {
  status: string;
  steps: { id: string; status: string; attempts: number; progress: { loss: number | null } | null; result: { loss: number | null; metrics: Record<string, number> } | null }[];
}

beforeAll(async () => {
  env = await setupEnv('tiny');
  runs = join(env.dir, 'runs');
  // The worker holds a secret the recipe names by reference (a W&B or HF token on a real cluster).
  await env.startWorker(['--pool', 'local'], undefined, { INFIR2_E2E_SECRET: SECRET });
});

afterAll(async () => {
  await env?.teardown();
});

describe('the tiny recipe end to end', () => {
  it('completes every stage: CPT loss falls, the models are converted to FP8 and evaluated', async () => {
    const secrets = ['cpt', 'rl'].flatMap((stage) => ['--set', `${stage}.secrets.INFIR2_DEMO_TOKEN=INFIR2_E2E_SECRET`]);
    // Retention: CPT keeps its last 2 checkpoints, every 100th and its boundaries; SFT and RL their last 2.
    const keep = ['cpt.keep.last=2', 'cpt.keep.every=100', 'sft.0.keep.last=2', 'sft.1.keep.last=2', 'rl.keep.last=2'].flatMap((k) => ['--set', k]);
    // Evaluation while training: SFT stage 1's checkpoints 20, 40, 60 and its last (62), RL's every 5th rollout.
    const evals = ['sft.0.saveInterval=20', 'sft.0.evalEvery=20', 'rl.evalEvery=5'].flatMap((k) => ['--set', k]);
    const r = await cli(['run', 'recipes/tiny.yaml', '--run-id', 'e2e', '--set', `runDir=${runs}`, ...secrets, ...keep, ...evals]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('tiny-e2e: completed');
    const st = JSON.parse((await cli(['status', 'tiny-e2e', '--json'])).stdout) as Status;
    expect(st.status).toBe('completed');
    expect(st.steps.map((s) => s.id)).toEqual([
      'cpt.warmup', 'cpt.stable', 'cpt.decay', 'sft.stage1', 'sft.stage2', 'convert.hf', 'convert.fp8',
      'rl.stage1', 'rl.stage2', 'eval.fp8.arith', 'convert.rl', 'eval.rl.arith',
    ]);
    expect(st.steps.every((s) => s.status === 'completed' && s.attempts === 1)).toBe(true);
    // Only what retention keeps is on disk: warmup end 10, every 100th, the last 2 and the stable end 480; the
    // decay's 500, its last 2 and its end; and what it deleted is recorded.
    const run = join(runs, 'e2e');
    // The held-out accuracy of SFT and RL checkpoints as they were written: a series per step.
    const series = (id: string) => (st.steps.find((s) => s.id === id) as unknown as { evals?: { iteration: number; scores: { arith?: { accuracy: number } }; error?: string }[] }).evals ?? [];
    expect(series('sft.stage1').map((e) => e.iteration)).toEqual([20, 40, 60, 62]);
    expect(series('rl.stage1').map((e) => e.iteration)).toEqual([5, 10, 15]);
    expect(series('rl.stage2').map((e) => e.iteration)).toEqual([5, 10, 15]);
    for (const e of [...series('sft.stage1'), ...series('rl.stage1'), ...series('rl.stage2')]) {
      expect(e.error).toBeUndefined();
      expect(e.scores.arith!.accuracy).toBeGreaterThanOrEqual(0);
    }
    const sft = series('sft.stage1').map((e) => e.scores.arith!.accuracy);
    console.log(`[e2e] held-out accuracy while training: sft.stage1 ${sft.map((a, i) => `${(a * 100).toFixed(1)} %@${[20, 40, 60, 62][i]}`).join(', ')}; rl.stage2 ${series('rl.stage2').map((e) => `${(e.scores.arith!.accuracy * 100).toFixed(1)} %@${e.iteration}`).join(', ')}`);
    // While the stage trained: checkpoint 20's evaluation began before the trainer's last iteration (the tiny
    // stage trains for ~5 s, less than one evaluation takes, so it can begin but not end inside it here).
    const firstLine = (file: string, re: RegExp) => readFileSync(join(run, 'logs', file), 'utf8').split('\n').find((l) => re.test(l))!;
    const evalBegan = Date.parse(/^\[infir2 (\S+)\]/.exec(firstLine('sft.stage1.eval20.export.log', /^\[infir2 \S+\] attempt 1 starting/))![1]!);
    const trainedUntil = new Date(/\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] iteration\s+62\//.exec(readFileSync(join(run, 'logs', 'sft.stage1.log'), 'utf8'))![1]!.replace(' ', 'T')).getTime();
    expect(evalBegan).toBeLessThan(trainedUntil + 1000); // the trainer's clock shows whole seconds
    expect((await cli(['status', 'tiny-e2e'])).stdout).toMatch(/sft\.stage1 .*arith acc [\d.]+ %@20, [\d.]+ %@40, [\d.]+ %@60, [\d.]+ %@62/);
    expect(inspectCheckpointDir(join(run, 'cpt', 'checkpoints')).complete).toEqual([10, 100, 200, 300, 400, 470, 480]);
    expect(inspectCheckpointDir(join(run, 'cpt.decay', 'checkpoints')).complete).toEqual([500, 590, 600]);
    expect(deletions(join(run, 'cpt', 'checkpoints')).length).toBe(48 - 7);
    const loss = (id: string) => st.steps.find((s) => s.id === id)!.result!.loss!;
    expect(loss('cpt.decay')).toBeLessThan(loss('cpt.warmup'));
    // The model measurably learns: the SFT model (evaluated from its FP8 export) solves most held-out problems,
    // and RL raises that further (measured: 0.857 → 0.993).
    const acc = (id: string) => st.steps.find((s) => s.id === id)!.result!.metrics.accuracy!;
    expect(acc('eval.fp8.arith')).toBeGreaterThan(0.5);
    expect(acc('eval.rl.arith')).toBeGreaterThan(acc('eval.fp8.arith'));
    const fp8 = JSON.parse(readFileSync(join(runs, 'e2e', 'convert.fp8', 'hf', 'config.json'), 'utf8')) as { quantization_config: Record<string, unknown> };
    expect(fp8.quantization_config).toMatchObject({ quant_method: 'fp8', fmt: 'e4m3', activation_scheme: 'dynamic' });
  }, 900_000);

  it('writes the run report at its end: each chart drawn in Chromium, its tables equal to the logs', async () => {
    const run = join(runs, 'e2e');
    const st = JSON.parse((await cli(['status', 'tiny-e2e', '--json'])).stdout) as { report?: string };
    expect(st.report).toBe(join(run, 'report', 'index.html'));
    expect((await cli(['status', 'tiny-e2e'])).stdout).toContain(`report: ${st.report}`);
    // On demand, elsewhere: the same page from the run's files and its final status.
    const out = join(env.dir, 'report-out');
    const r = await cli(['report', 'tiny-e2e', '--out', out]);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/^report: .*report-out\/index\.html \(10 charts, \d+ KiB; PNGs in .*report-out\/charts\)\n$/);
    if (!HAVE_CHROMIUM) return console.warn(`skipped the browser part: ${SKIP_REASON}`);
    const { browser, page } = await openLocalPage();
    try {
      await page.goto(pathToFileURL(join(out, 'index.html')).href);
      const charts = await page.$$eval('figure.chart', (figs) =>
        figs.map((f) => ({
          id: f.id,
          x: f.getAttribute('data-x')!,
          y: f.getAttribute('data-y')!,
          series: JSON.parse(f.getAttribute('data-series')!) as { name: string; points: number }[],
          texts: [...f.querySelectorAll('svg text')].map((t) => t.textContent ?? ''),
          // Drawn marks: line paths with many segments, or bars.
          marks: [...f.querySelectorAll('svg path')].filter((p) => (p.getAttribute('d') ?? '').split(/[LC]/).length > 3).length + f.querySelectorAll('svg rect').length,
          box: f.querySelector('svg')!.getBoundingClientRect().height,
        })),
      );
      expect(charts.map((c) => c.id)).toEqual(['chart-cpt-loss', 'chart-cpt-lr', 'chart-sft-loss', 'chart-sft-lr', 'chart-rl-reward', 'chart-rl-length', 'chart-throughput', 'chart-grad-norm', 'chart-timeline', 'chart-time-split']);
      for (const c of charts) {
        expect(c.series.some((s) => s.points > 0), c.id).toBe(true);
        expect(c.texts, c.id).toContain(c.x); // both axes labelled
        expect(c.texts, c.id).toContain(c.y);
        expect(c.marks, c.id).toBeGreaterThan(0);
        expect(c.box, c.id).toBeGreaterThan(150);
      }
      // The tables' numbers are the logs' and the results': the last logged loss of each CPT phase, the scores.
      const cell = (step: string, k: string) => page.$eval(`tr[data-step="${step}"] td[data-k="${k}"]`, (td) => td.textContent);
      for (const id of ['cpt.warmup', 'cpt.stable', 'cpt.decay']) {
        const losses = [...readFileSync(join(run, 'logs', `${id}.log`), 'utf8').matchAll(/lm loss: (\S+) \|/g)].map((m) => Number(m[1]));
        expect(Number(await cell(id, 'loss'))).toBe(Number(losses.at(-1)!.toPrecision(7)));
      }
      const score = (id: string) => (JSON.parse(readFileSync(join(run, 'results', `${id}.json`), 'utf8')) as { metrics: { accuracy: number } }).metrics.accuracy;
      const shown = await page.$$eval('td[data-bench]', (tds) => tds.map((td) => [td.getAttribute('data-model'), Number(td.getAttribute('data-value')), td.textContent]));
      expect(shown).toContainEqual(['fp8', score('eval.fp8.arith'), `acc ${(score('eval.fp8.arith') * 100).toFixed(1)} %`]);
      expect(shown).toContainEqual(['rl', score('eval.rl.arith'), `acc ${(score('eval.rl.arith') * 100).toFixed(1)} %`]);
      expect(shown).toContainEqual(['sft.stage1@20', score('sft.stage1.eval20.arith'), `acc ${(score('sft.stage1.eval20.arith') * 100).toFixed(1)} %`]);
      expect(shown).toHaveLength(2 + 4 + 3 + 3); // the final models, SFT stage 1 at 20, 40, 60, 62, each RL stage at 5, 10, 15
      await page.screenshot({ path: join(OUT, 'report-tiny.png'), fullPage: true });
    } finally {
      await browser.close();
    }
    // Bad input: one line, exit 2.
    const missing = await cli(['report', 'no-such-run']);
    expect([missing.code, missing.stderr]).toEqual([2, "error: no run 'no-such-run' (give the id `infir2 run` printed; `infir2 list` shows them)\n"]);
    const blocked = await cli(['report', 'tiny-e2e', '--out', join(run, 'plan.json', 'x')]);
    expect([blocked.code, blocked.stderr]).toEqual([2, `error: --out: ${join(run, 'plan.json')} is not a directory: expected a directory the report can be written to\n`]);
  }, 120_000);

  it("keeps the secret's value out of every workflow's history, plan.json, status and the logs", async () => {
    const ids: string[] = [];
    for await (const wf of env.client.workflow.list({ query: "RecipeRunId = 'e2e'" })) ids.push(wf.workflowId);
    expect(ids.length).toBeGreaterThanOrEqual(13); // the run and its 12 steps
    const seen: string[] = [];
    for (const id of ids) {
      const { stdout } = await exec(TEMPORAL_BIN, ['workflow', 'show', '--output', 'json', '--address', env.server.address, '--workflow-id', id], { maxBuffer: 256 << 20 });
      seen.push(stdout);
    }
    const plan = readFileSync(join(runs, 'e2e', 'plan.json'), 'utf8');
    expect(plan).toContain('INFIR2_E2E_SECRET'); // the reference is there...
    seen.push(plan, readFileSync(join(runs, 'e2e', 'recipe.json'), 'utf8'));
    seen.push((await cli(['status', 'tiny-e2e', '--json'])).stdout, (await cli(['logs', 'tiny-e2e'])).stdout);
    for (const f of readdirSync(join(runs, 'e2e', 'logs'))) seen.push(readFileSync(join(runs, 'e2e', 'logs', f), 'utf8'));
    seen.push(readFileSync(join(runs, 'e2e', 'report', 'index.html'), 'utf8')); // its parameters table too
    for (const text of seen) expect(text.includes(SECRET)).toBe(false); // ...its value nowhere
  }, 120_000);

  it('forks a decay from a stable checkpoint and leaves the source run byte-identical', async () => {
    const source = join(runs, 'e2e');
    const before = tree(source);
    const r = await cli([
      'fork', 'tiny-e2e', '--stage', 'cpt.decay', '--from-iteration', '100', '--run-id', 'e2e-fork100',
      // Only the decay: the later stages are the same machinery the first test ran.
      '--set', 'sft=null', '--set', 'convert=null', '--set', 'rl=null', '--set', 'eval=null',
    ]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const st = JSON.parse((await cli(['status', 'tiny-e2e-fork100', '--json'])).stdout) as Status;
    expect(st.steps.map((s) => [s.id, s.status])).toEqual([['cpt.decay', 'completed']]);
    const plan = JSON.parse(readFileSync(join(runs, 'e2e-fork100', 'plan.json'), 'utf8')) as { steps: { command: { argv: string[] } }[] };
    const argv = plan.steps[0]!.command.argv;
    expect(argv[argv.indexOf('--load') + 1]).toBe(join(source, 'cpt', 'checkpoints'));
    expect(argv[argv.indexOf('--ckpt-step') + 1]).toBe('100');
    expect(readFileSync(join(runs, 'e2e-fork100', 'logs', 'cpt.decay.log'), 'utf8')).toMatch(/loading .*checkpoint.* 100|iteration\s+101\//);
    expect(tree(source)).toEqual(before);
  }, 300_000);

  it('compares the FP8 run with a BF16 decay forked from the same stable checkpoint: a table per stage, a warning naming what differs', async () => {
    const f = await cli(['fork', 'tiny-e2e', '--stage', 'cpt.decay', '--from-iteration', '480', '--run-id', 'e2e-bf16', '--set', 'precision=bf16', '--set', 'sft=null', '--set', 'convert=null', '--set', 'rl=null', '--set', 'eval=null']);
    expect(f.code).toBe(0);
    const out = join(env.dir, 'compare-out');
    const c = await cli(['compare', 'tiny-e2e', 'tiny-e2e-bf16', '--out', out]);
    expect(c.code).toBe(0);
    expect(c.stderr).toMatch(/^warning: e2e-bf16 differs from e2e in precision fp8→bf16, sft removed .*\n$/);
    // The decay's final validation loss of each run, as its log says it, and their relative difference.
    const val = (run: string) => Number([...readFileSync(join(runs, run, 'logs', 'cpt.decay.log'), 'utf8').matchAll(/validation loss at iteration \d+(?: on validation set)? \| lm loss value: (\S+)/g)].at(-1)![1]);
    const [a, b] = [val('e2e'), val('e2e-bf16')];
    const rowOf = (name: string) => c.stdout.split('\n').find((l) => l.trim().startsWith(name))!.trim().split(/\s{2,}/);
    const row = rowOf('final validation loss');
    expect(Number(row[1])).toBeCloseTo(a, 4);
    expect(Number(row[2])).toBeCloseTo(b, 4);
    expect(row[3]).toBe(`${b >= a ? '+' : ''}${(((b - a) / a) * 100).toFixed(2)} %`);
    expect(c.stdout).toMatch(/^cpt\.decay$/m);
    for (const metric of ['mean training loss, last 50', 'EMA loss gap (0.9), at the end', 'EMA loss gap, largest after warm-up', 'throughput (it/s), median']) expect(rowOf(metric)).toHaveLength(4);
    expect(c.stdout).toContain(`charts: ${join(out, 'index.html')}`);
    expect(readFileSync(join(out, 'index.html'), 'utf8')).toContain('cpt.decay: training loss');
    console.log(`[e2e] FP8 vs BF16 decay from 480: final validation loss ${a} vs ${b} (${row[3]}), EMA gap ${rowOf('EMA loss gap (0.9), at the end')[3]}`);
    const bad = await cli(['compare', 'tiny-e2e', 'no-such-run']);
    expect([bad.code, bad.stderr]).toEqual([2, "error: no run 'no-such-run' (give the id `infir2 run` printed; `infir2 list` shows them)\n"]);
    const one = await cli(['compare', 'tiny-e2e']);
    expect([one.code, one.stderr]).toEqual([2, `error: compare: expected at least two runs, got 1 (usage: infir2 compare <runA> <runB> [<runC>...] [--out DIR] [--last N] [--json])\n`]);
    // A path is never taken for a run id (those hold no '/'): a directory without a run, named, with no server asked.
    const notRun = await cli(['compare', 'tiny-e2e', dirname(out)]);
    expect([notRun.code, notRun.stderr]).toEqual([2, `error: ${dirname(out)}: not a run directory (it has no plan.json): expected a run id or the directory of a run\n`]);
  }, 300_000);

  it('refuses a fork from a checkpoint that does not exist, or that retention deleted, and says which', async () => {
    const r = await cli(['fork', 'tiny-e2e', '--stage', 'cpt.decay', '--from-iteration', '7']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/no complete checkpoint 7 \(complete: 10, 100, 200, 300, 400, 470, 480\)/);
    const gone = await cli(['fork', 'tiny-e2e', '--stage', 'cpt.decay', '--from-iteration', '50']);
    expect(gone.code).toBe(2);
    expect(gone.stderr).toMatch(/checkpoint 50 was deleted by the run's retention policy \(keep last 2, every 100, boundaries 10, 480\) at \d{4}-/);
    // And resume's dry run names what each step's retention deleted.
    const dry = await cli(['resume', 'tiny-e2e', '--from', 'eval.rl.arith', '--dry-run']);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toMatch(/^cpt\.stable: retention \(keep last 2, every 100, boundaries 10, 480\) deleted 41 checkpoints \(20 … 460\); complete on disk: 10, 100, 200, 300, 400, 470, 480$/m);
  });
});
