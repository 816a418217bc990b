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
  it('leads with the steps and what each does, then the training facts, the commands, retries and stall limits', async () => {
    const r = await runInProcess(['plan', 'tiny', '--run-id', 'demo']);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('recipe tiny · tiny-qwen2 · fp8 · run demo');
    expect(lines[1]).toBe(`run dir ${join(embeddedStateDir(), 'runs/demo')}`);
    expect(lines[3]).toMatch(/^STEP\s+POOL\s+GPUS\s+AFTER\s+WHAT$/);
    // Each step's one-line summary is its WHAT.
    expect(lines[4]).toMatch(/^cpt\.warmup\s+local\s+0\s+-\s+CPT warmup: iterations 0→10 of the 600-iteration WSD schedule \(linear LR warmup to 0\.005\)$/);
    expect(lines.slice(4, 16).map((l) => l.split(/\s+/)[0])).toEqual([
      'cpt.warmup', 'cpt.stable', 'cpt.decay', 'sft.stage1', 'sft.stage2', 'convert.hf', 'convert.fp8', 'rl.stage1', 'rl.stage2', 'eval.fp8.arith', 'convert.rl', 'eval.rl.arith',
    ]);
    const at = (head: RegExp) => lines.findIndex((l) => head.test(l));
    // Training facts: the training steps only, read from their argv.
    const facts = at(/^STEP\s+GPUS\s+TP·PP·CP·DP\s+MICRO\s+GLOBAL\s+SEQ\s+TOKENS\/STEP\s+ITERATIONS\s+TOKENS\s+PRECISION\s+LR SCHEDULE$/);
    expect(facts).toBeGreaterThan(16);
    expect(lines[facts + 2]).toMatch(/^cpt\.stable\s+CPU\s+1·1·1·1\s+16\s+16\s+64\s+1\.02k\s+10→480\s+481k\s+fp8 e4m3 blockwise 32×32\s+WSD 0\.005, warmup 10, cosine decay 120 → 5e-4$/);
    expect(lines[facts + 6]).toMatch(/^rl\.stage1\s+CPU\s+1·1·1·1\s+-\s+64 \(16×8\)\s+-\s+-\s+15 rollouts\s+-\s+fp8 e4m3 blockwise 32×32\s+constant 2e-4$/);
    expect(lines[facts + 8]).toBe('CPT in all: 614k tokens');
    // The commands in short, with how much the short form leaves out.
    const commands = at(/^STEP\s+BACKEND\s+COMMAND$/);
    expect(lines[commands + 1]).toMatch(/^cpt\.warmup\s+local\s+python main\.py pretrain  \+\d+ arguments$/);
    // Retry budgets and stall limits, steps with the same values on one line.
    expect(lines.slice(at(/^retry budgets/))).toEqual([
      'retry budgets (failures in a row without a new checkpoint, per class; a config failure is never retried):',
      '  cpt.warmup, cpt.stable, cpt.decay, sft.stage1, sft.stage2, rl.stage1, rl.stage2: crash 3, hang 2, oom 1, preempted 10, storage 12',
      '  convert.hf, convert.fp8, eval.fp8.arith, convert.rl, eval.rl.arith: crash 1, hang 1, oom 1, preempted 3, storage 6',
      '',
      'stall limits (silent longer than this: a hang, stopped and retried):',
      '  cpt.warmup, cpt.stable, cpt.decay: startup 5m, then max(20s, 10×p95 gap); save 5m (then 4×longest save), eval 5m; at most 5m',
      '  sft.stage1, sft.stage2: startup 5m, then max(20s, 10×p95 gap); save 5m (then 4×longest save); at most 5m',
      '  convert.hf, convert.fp8, eval.fp8.arith, convert.rl, eval.rl.arith: 5m fixed (no progress lines)',
      '  rl.stage1, rl.stage2: startup 5m, then max(10m, 3×max gap); save 5m (then 4×longest save); at most 5m',
      // The checkpoint-interval section: the tiny recipe trains on CPU, where a per-GPU-hour failure rate says nothing.
      '',
      'checkpoint intervals · failure rate 1.97e-5 per GPU-hour (Llama 3) · restart 10m · docs/operations.md#checkpoint-interval',
      'no training stage runs on GPUs: the failure rate is per GPU-hour',
    ]);
  });

  it("states the 7B recipe's parallel layout, batches and tokens as Megatron and slime will run them", async () => {
    const r = await runInProcess(['plan', 'recipes/qwen2.5-7b-fp8.yaml', '--run-id', 'demo']);
    expect(r.code, r.stderr).toBe(0);
    const row = (id: string) => r.stdout.split('\n').find((l) => l.startsWith(`${id} `) && /·/.test(l))?.split(/\s{2,}/);
    expect(row('cpt.warmup')).toEqual(['cpt.warmup', '8', '4·1·1·2', '1', '128', '32768', '4.19M', '0→5000', '21.0B', 'fp8 e4m3 blockwise param-gather', 'WSD 1e-4, warmup 5000, cosine decay 5000 → 1e-5']);
    expect(row('cpt.decay')?.slice(7, 9)).toEqual(['35000→40000', '21.0B']);
    expect(row('sft.stage2')).toEqual(['sft.stage2', '16', '4·1·1·4', 'dyn ≤32.8k tok/GPU', '64', '-', '-', '12890 steps', '-', 'fp8 e4m3 blockwise param-gather', 'cosine 2e-5 → 2e-6, warmup 5 %']);
    expect(row('rl.stage1')).toEqual(['rl.stage1', '32', '4·1·2·4', 'dyn ≤8.19k tok/GPU', '2048 (128×16)', '-', '-', '10240 rollouts', '-', 'fp8 e4m3 blockwise param-gather', 'constant 1e-6']);
    expect(r.stdout).toContain('\nCPT in all: 168B tokens\n');
  });

  it('bounds the disk per checkpoint directory: warmup and stable, which share one, are counted once', async () => {
    const r = await runInProcess(['plan', 'recipes/qwen2.5-7b-fp8.yaml', '--run-id', 'demo']);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines.slice(lines.indexOf('checkpoint retention (what stays on disk; the rest is deleted as newer checkpoints are saved):') + 1).slice(0, 8)).toEqual([
      '  cpt.warmup + cpt.stable (one directory): keep last 2, every 5000, boundaries 5000, 35000 → at most 12 checkpoints × 107 GB = 1279 GB with optimizer state (183 GB weights only)',
      '  cpt.decay: keep last 2, every 5000, boundaries 40000 → at most 5 checkpoints × 107 GB = 533 GB with optimizer state (76 GB weights only)',
      '  sft.stage1: keep last 2, boundaries 5624 → at most 4 checkpoints × 107 GB = 426 GB with optimizer state (61 GB weights only)',
      '  sft.stage2: keep last 2, boundaries 12889 → at most 4 checkpoints × 107 GB = 426 GB with optimizer state (61 GB weights only)',
      '  rl.stage1: keep last 2, boundaries 10239 → at most 4 checkpoints × 107 GB = 426 GB with optimizer state (61 GB weights only)',
      '  rl.stage2: keep last 2, boundaries 10239 → at most 4 checkpoints × 107 GB = 426 GB with optimizer state (61 GB weights only)',
      "  every directory together, at the run's end: at most 3518 GB",
      '',
    ]);
    // A step without `keep` is named as keeping everything.
    const none = await runInProcess(['plan', 'recipes/qwen2.5-7b-fp8.yaml', '--set', 'rl.keep={}']);
    expect(none.stdout).toMatch(/^ {2}every directory together, at the run's end: at most 2665 GB, besides rl\.stage1, rl\.stage2, which keep every checkpoint \(no keep\)$/m);
  });

  it("shows each training stage's goodput and Young–Daly optimum under the table, or the estimates it needs", async () => {
    const r = await runInProcess([
      'plan', 'recipes/qwen2.5-7b-fp8.yaml', '--run-id', 'demo',
      '--set', 'cpt.estimates={iterationTime: 90s, saveTime: 1m}', '--set', 'rl.estimates={iterationTime: 10m, saveTime: 90s}',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines.slice(lines.findIndex((l) => l.startsWith('checkpoint intervals')))).toEqual([
      'checkpoint intervals · failure rate 1.97e-5 per GPU-hour (Llama 3) · restart 10m · docs/operations.md#checkpoint-interval',
      'STAGE  GPUS  MTBF  SAVE EVERY       GOODPUT  YOUNG–DALY OPTIMUM',
      'cpt    8     264d  1000 iterations  99.7 %   581 (14.5h): 99.8 %; 625 divides the phase boundaries: 99.8 %',
      'sft.0  16    132d  1000 steps       -        needs sft.0.estimates: { iterationTime, saveTime }',
      'sft.1  16    132d  1000 steps       -        needs sft.1.estimates: { iterationTime, saveTime }',
      'rl     32    66d   20 rollouts      99.1 %   53 (8.8h): 99.4 %; 64 divides every curriculum stage: 99.4 %',
      // What the columns mean, and what a stage without estimates needs.
      "  MTBF: how often the stage's GPUs together are expected to be interrupted: 1 / (failure rate × GPUs), from",
      "  goodput.failureRate, by default Llama 3's pre-training (419 unexpected interruptions in 54 days on 16,384 H100s).",
      "  GOODPUT: the share of the stage's time expected to train kept iterations with this save interval, after saves",
      '  and the work redone after failures; YOUNG–DALY OPTIMUM: the interval where that share is highest, √(2 × save time × MTBF).',
      '  needs sft.0.estimates: your measured times, e.g. sft.0: { estimates: { iterationTime: 90s, saveTime: 1m } } in the recipe.',
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
