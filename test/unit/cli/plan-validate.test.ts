/** `infir2 validate` and `infir2 plan` on valid recipes, and the shared recipe-input helper `run` uses. */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadPlan } from '../../../src/cli/recipe-input.js';
import { UsageError } from '../../../src/errors.js';
import type { Plan } from '../../../src/plan/types.js';
import { embeddedStateDir } from '../../../src/recipe/project-root.js';
import { ensureBuilt, ROOT, runInProcess, runSubprocess } from './run-cli.js';

describe('infir2 validate', () => {
  it.each(['recipes/tiny.yaml', 'recipes/qwen2.5-7b-fp8.yaml', 'recipes/qwen2.5-1.5b-fp8.yaml', 'infir2-7b', 'infir2-1.5b', 'tiny'])('accepts %s', async (ref) => {
    const r = await runInProcess(['validate', ref]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^ok: .+: recipe '[a-z0-9-]+' is valid, \d+ steps/);
    for (const line of r.stderr.split('\n').filter(Boolean)) expect(line).toMatch(/^warning: \S+: /);
  });

  it('prints warnings as `warning: <path>: ...` and still exits 0', async () => {
    const r = await runInProcess(['validate', 'infir2-7b']);
    expect(r.stderr).toMatch(/^warning: cpt\.profile: on, as in the InfiR2 scripts/m);
    expect(r.stdout).toMatch(/\(2 warnings\)/);
  });

  it('--check-paths: a run directory this machine can write passes, with the room left', async () => {
    const r = await runInProcess(['validate', 'tiny', '--check-paths', '--set', `runDir=${join(tmpdir(), 'infir2-check-paths', 'runs')}`]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^ok: .*; runDir ${join(tmpdir(), 'infir2-check-paths', 'runs')} is writable \\([\\d.]+ [kMG]B free\\)$`, 'm'));
  });

  it('--check-paths: a run directory under /proc or behind a file is exit 2, one line naming it', async () => {
    const proc = await runInProcess(['validate', 'tiny', '--check-paths', '--set', 'runDir=/proc/x']);
    expect(proc.code).toBe(2);
    expect(proc.stderr.trim()).toBe('error: runDir /proc/x: /proc is on the proc pseudo file system, which cannot hold a run');
    const file = await runInProcess(['validate', 'tiny', '--check-paths', '--set', `runDir=${join(ROOT, 'package.json', 'runs')}`]);
    expect(file.code).toBe(2);
    expect(file.stderr.trim()).toBe(`error: runDir ${join(ROOT, 'package.json', 'runs')}: ${join(ROOT, 'package.json')} is not a directory`);
  });

  it.each([
    [['validate'], /^error: validate: missing <recipe>$/m],
    [['validate', 'tiny', 'extra'], /^error: validate: unexpected argument 'extra'$/m],
    [['plan', 'tiny', '--bogus'], /^error: plan: unknown option '--bogus'/m],
  ])('rejects %j with a usage line', async (args, message) => {
    const r = await runInProcess(args);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).toMatch(/^usage: infir2 /m);
  });
});

describe('infir2 plan', () => {
  it('prints a stage table: id, backend, pool, GPUs, dependencies, iterations, command head', async () => {
    const r = await runInProcess(['plan', 'tiny', '--run-id', 'demo']);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('recipe tiny · tiny-qwen2 · fp8 · run demo');
    expect(lines[1]).toBe(`run dir ${join(embeddedStateDir(), 'runs/demo')}`);
    expect(lines[3]).toMatch(/^STEP\s+BACKEND\s+POOL\s+GPUS\s+DEPENDS ON\s+ITERATIONS\s+COMMAND$/);
    expect(lines[4]).toMatch(/^cpt\.warmup\s+local\s+local\s+0\s+-\s+→ 10\s+python main\.py pretrain$/);
    expect(lines.slice(4, 16).map((l) => l.split(/\s+/)[0])).toEqual([
      'cpt.warmup', 'cpt.stable', 'cpt.decay', 'sft.stage1', 'sft.stage2', 'convert.hf', 'convert.fp8', 'rl.stage1', 'rl.stage2', 'eval.fp8.arith', 'convert.rl', 'eval.rl.arith',
    ]);
    // Then the stall limits in force, steps with the same limits on one line.
    expect(lines.slice(16)).toEqual([
      '',
      'stall limits (silent longer than this: a hang, stopped and retried):',
      '  cpt.warmup, cpt.stable, cpt.decay: startup 5m, then max(20s, 10×p95 gap); save 5m, eval 5m; at most 5m',
      '  sft.stage1, sft.stage2: startup 5m, then max(20s, 10×p95 gap); save 5m; at most 5m',
      '  convert.hf, convert.fp8, eval.fp8.arith, convert.rl, eval.rl.arith: 5m fixed (no progress lines)',
      '  rl.stage1, rl.stage2: startup 5m, then max(10m, 3×max gap); save 5m; at most 5m',
      // The checkpoint-interval section: the tiny recipe trains on CPU, where a per-GPU-hour failure rate says nothing.
      '',
      'checkpoint intervals · failure rate 1.97e-5 per GPU-hour (Llama 3) · restart 10m · docs/operations.md',
      'no training stage runs on GPUs: the failure rate is per GPU-hour',
    ]);
  });

  it("shows each training stage's goodput and Young–Daly optimum under the table, or the estimates it needs", async () => {
    const r = await runInProcess([
      'plan', 'recipes/qwen2.5-7b-fp8.yaml', '--run-id', 'demo',
      '--set', 'cpt.estimates={iterationTime: 90s, saveTime: 1m}', '--set', 'rl.estimates={iterationTime: 10m, saveTime: 90s}',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines.slice(lines.findIndex((l) => l.startsWith('checkpoint intervals')))).toEqual([
      'checkpoint intervals · failure rate 1.97e-5 per GPU-hour (Llama 3) · restart 10m · docs/operations.md',
      'STAGE  GPUS  MTBF  SAVE EVERY       GOODPUT  YOUNG–DALY OPTIMUM',
      'cpt    8     264d  1000 iterations  99.7 %   581 (14.5h): 99.8 %; 625 divides the phase boundaries: 99.8 %',
      'sft.0  16    132d  1000 steps       -        needs sft.0.estimates: { iterationTime, saveTime }',
      'sft.1  16    132d  1000 steps       -        needs sft.1.estimates: { iterationTime, saveTime }',
      'rl     32    66d   20 rollouts      99.1 %   53 (8.8h): 99.4 %; 64 divides every curriculum stage: 99.4 %',
    ]);
  });

  it('hints on stderr when an interval costs over 3 points of goodput; validate counts hints apart from warnings', async () => {
    const sets = ['--set', 'cpt.estimates={iterationTime: 90s, saveTime: 1m}', '--set', 'goodput.failureRate=2e-3'];
    const plan = await runInProcess(['plan', 'recipes/qwen2.5-7b-fp8.yaml', ...sets]);
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stderr).toMatch(/^hint: cpt\.saveInterval: saving every 1000 iterations gives an estimated goodput of 79\.7 % on 8 GPUs; .*set cpt\.saveInterval: 50,/m);
    expect(plan.stdout).toMatch(/^cpt +8 +3d +1000 iterations +79\.7 % +58 \(87m\): 97\.4 %; 50 divides the phase boundaries: 97\.4 %$/m);
    const validate = await runInProcess(['validate', 'infir2-7b', ...sets]);
    expect(validate.code, validate.stderr).toBe(0);
    expect(validate.stdout).toMatch(/\(2 warnings, 1 hint\)$/m);
  });

  it('prints the whole Plan as JSON with --json, with --set applied', async () => {
    const r = await runInProcess(['plan', 'recipes/qwen2.5-7b-fp8.yaml', '--json', '--run-id', 'x1', '--set', 'cpt.iterations=50000']);
    expect(r.code, r.stderr).toBe(0);
    const plan = JSON.parse(r.stdout) as Plan;
    expect(plan).toMatchObject({ version: 1, recipe: 'qwen2-5-7b-fp8', runId: 'x1', runDir: '/shared/infir2/runs/x1', precision: 'fp8', model: 'Qwen2.5-7B' });
    expect(plan.steps.find((s) => s.id === 'cpt.decay')?.completion).toMatchObject({ iteration: 50000 });
    expect(plan.steps.find((s) => s.id === 'cpt.stable')?.completion).toMatchObject({ iteration: 45000 });
  });

  it('keeps the checkpoint advice out of --json: it prints the Plan, what the workflow receives, and nothing else', async () => {
    const sets = ['--set', 'cpt.estimates={iterationTime: 90s, saveTime: 1m}'];
    const withEstimates = await runInProcess(['plan', 'recipes/qwen2.5-7b-fp8.yaml', '--json', '--run-id', 'x1', ...sets]);
    const without = await runInProcess(['plan', 'recipes/qwen2.5-7b-fp8.yaml', '--json', '--run-id', 'x1']);
    expect(withEstimates.stdout).toBe(without.stdout);
    expect(withEstimates.stdout).not.toMatch(/goodput|estimates|Young/i);
  });

  it('makes up a readable run id when none is given', async () => {
    const plan = JSON.parse((await runInProcess(['plan', 'tiny', '--json'])).stdout) as Plan;
    expect(plan.runId).toMatch(/^\d{8}-\d{6}$/);
  });
});

describe('loadPlan (for `infir2 run`)', () => {
  it('returns the Plan and hands warnings to onWarning', async () => {
    const warnings: string[] = [];
    const plan = await loadPlan('infir2-7b', { runId: 'r9', onWarning: (l) => warnings.push(l) });
    expect(plan.runId).toBe('r9');
    expect(warnings[0]).toMatch(/^warning: cpt\.profile: /);
  });

  it('throws a UsageError with one `<path>: <problem>` line per problem', async () => {
    const err = await loadPlan('tiny', { sets: ['cpt.iterations=0', 'precision=fp4'], onWarning: () => undefined }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UsageError);
    expect((err as UsageError).lines).toEqual(["precision: expected one of fp8, bf16; got 'fp4'; did you mean 'fp8'?", 'cpt.iterations: must be at least 1, got 0']);
  });

  it('compiles recipes/tiny.yaml to exactly the plan of the tiny preset (the tuned values live in the preset only)', async () => {
    const warnings: string[] = [];
    const onWarning = (l: string) => warnings.push(l);
    const file = await loadPlan(join(ROOT, 'recipes/tiny.yaml'), { runId: 'same', onWarning });
    const preset = await loadPlan('tiny', { runId: 'same', onWarning });
    expect(file).toEqual(preset);
    expect(warnings).toEqual([]);
    // The tuned schedule, not a placeholder: one 600-iteration WSD CPT, 62 SFT steps per stage, 15 rollouts per RL stage.
    const iterations = (id: string) => preset.steps.find((s) => s.id === id)?.progress.totalIterations;
    expect(['cpt.warmup', 'cpt.stable', 'cpt.decay', 'sft.stage1', 'sft.stage2', 'rl.stage1', 'rl.stage2'].map(iterations)).toEqual([10, 480, 600, 62, 62, 15, 15]);
  });
});

describe('the built CLI', () => {
  beforeAll(() => ensureBuilt(), 120_000);

  it('plans the 7B recipe quickly, without network or GPU', async () => {
    const started = process.hrtime.bigint();
    const r = await runSubprocess(['plan', 'recipes/qwen2.5-7b-fp8.yaml']);
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^eval\.livecodebench\s+evalscope/m);
    // The target is under a second; the bound leaves room for a loaded test machine.
    expect(ms).toBeLessThan(3000);
  });

  it('resolves a recipe\'s relative paths against the recipe, not the working directory', async () => {
    const r = await runSubprocess(['plan', join(ROOT, 'recipes/tiny.yaml'), '--json', '--run-id', 'here'], tmpdir());
    expect(r.code, r.stderr).toBe(0);
    const plan = JSON.parse(r.stdout) as Plan;
    expect(plan.runDir).toBe(join(embeddedStateDir(), 'runs/here')); // $INFIR2_HOME/runs
    expect(plan.steps[0]!.inputs.data).toBe(join(ROOT, 'trainer/data/cpt.jsonl'));
  });

  it('plans a preset by name', async () => {
    const r = await runSubprocess(['plan', 'infir2-1.5b', '--run-id', 'p']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^recipe infir2-1-5b · Qwen2\.5-1\.5B · fp8 · run p$/m);
  });
});
