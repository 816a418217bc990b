/**
 * The 7B and 1.5B plans reproduce the InfiR2 scripts argument by argument and variable by variable, except
 * the documented FIXES. The expected arguments are hand-copied from docs/infir2-recipe.md into
 * test/fixtures/recipes/infir2/ (see its README); every difference found must be one listed here, each tied
 * to a FIXES entry, and every listed difference must actually occur.
 */
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { FIXES } from '../../../src/backends/fixes.js';
import { compilePlan } from '../../../src/plan/compile.js';
import type { Plan, PlanStep } from '../../../src/plan/types.js';
import { loadRecipe } from '../../../src/recipe/load.js';
import { diffFlags, fixtureText, flags, readArgs, readEnv } from './infir2-args.js';

const FIX_IDS = new Set(FIXES.map((f) => f.id));
const PROJECT = '/opt/infir2';

/** Expected differences of one step: flag → the FIXES id that explains it. */
type Allowed = Record<string, string>;

function step(plan: Plan, id: string): PlanStep {
  const s = plan.steps.find((x) => x.id === id);
  if (!s) throw new Error(`no step ${id} in ${plan.steps.map((x) => x.id).join(', ')}`);
  return s;
}

/** Every difference is allowed, and every allowed difference happens (so the list stays honest). */
function expectOnlyFixes(expectedTokens: string[], actualTokens: string[], allowed: Allowed): void {
  for (const fix of Object.values(allowed)) expect(FIX_IDS, `unknown FIXES id ${fix}`).toContain(fix);
  const diffs = diffFlags(flags(expectedTokens), flags(actualTokens));
  expect(diffs.filter((d) => !(d.flag in allowed))).toEqual([]);
  expect(diffs.map((d) => d.flag).sort()).toEqual(Object.keys(allowed).sort());
}

const value = (argv: string[], flag: string) => {
  const i = argv.lastIndexOf(flag);
  return i < 0 ? undefined : argv[i + 1];
};

describe.each([
  { size: '7B', preset: 'infir2-7b', cpt: 'cpt-7b', untie: true, tokenizer: '/your_model_path/Qwen2.5-7B', base: '/your_checkpoint_path/Qwen2.5-7B_torch_dist', hf: '/path/to/base_models_hf/qwen2.5-7B-Instruct', vocab: '152064' },
  { size: '1.5B', preset: 'infir2-1.5b', cpt: 'cpt-1.5b', untie: false, tokenizer: '/your_model_path/Qwen2.5-7B', base: '/your_checkpoint_path/Qwen2.5-1.5B_torch_dist', hf: '/path/to/base_models_hf/qwen2.5-1.5B-Instruct', vocab: '151936' },
])('InfiR2 $size', (c) => {
  let plan: Plan;
  let RUN: string;
  beforeAll(async () => {
    const { recipe } = await loadRecipe(c.preset);
    plan = compilePlan(recipe, { runId: 'repro', projectRoot: PROJECT });
    RUN = plan.runDir;
  });
  const cptVars = (id: string) => ({
    RUN,
    STEP: join(RUN, id),
    EXP: `${plan.recipe}-${id}`,
    CPT_ROOT: join(RUN, 'cpt/checkpoints'),
    DECAY_ROOT: join(RUN, 'cpt.decay/checkpoints'),
    DATA_PATH: '/your_data_path',
    DATA_CACHE_PATH: '/your_cache_path',
    TOKENIZER_MODEL: c.tokenizer,
  });
  const cptFixes: Allowed = {
    '--exit-signal-handler': 'cpt-save-on-sigterm',
    ...(c.untie ? { '--untie-embeddings-and-output-weights': 'cpt-untie-once' } : {}),
  };

  describe('CPT (scripts/CPT)', () => {
    const LAUNCH = ['torchrun', '--nnodes=1', '--nproc_per_node=8', '--rdzv_endpoint=localhost:29400', '--rdzv_backend=c10d', '/root/Megatron-LM/pretrain_gpt.py'];
    const cases: { id: string; fixture: string; allowed: Allowed; extra: (v: ReturnType<typeof cptVars>) => Record<string, string> }[] = [
      {
        id: 'cpt.warmup',
        fixture: `${c.cpt}.args`,
        allowed: { '--no-load-optim': 'cpt-keep-optimizer', '--no-load-rng': 'cpt-keep-optimizer', '--pretrained-checkpoint': 'cpt-bootstrap', '--exit-interval': 'cpt-phase-boundaries', ...cptFixes },
        extra: () => ({ '--pretrained-checkpoint': c.base, '--exit-interval': '5000', '--load': cptVars('').CPT_ROOT }),
      },
      {
        id: 'cpt.stable',
        fixture: `${c.cpt}.args`,
        allowed: { '--no-load-optim': 'cpt-keep-optimizer', '--no-load-rng': 'cpt-keep-optimizer', '--ckpt-step': 'cpt-phase-boundaries', '--exit-on-missing-checkpoint': 'cpt-phase-boundaries', '--exit-interval': 'cpt-phase-boundaries', ...cptFixes },
        extra: (v) => ({ '--ckpt-step': '5000', '--exit-interval': '35000', '--load': v.CPT_ROOT }),
      },
      {
        id: 'cpt.decay',
        fixture: `${c.cpt}-decay.args`,
        allowed: { '--no-load-rng': 'cpt-keep-optimizer', '--load': 'cpt-decay-load', '--ckpt-step': 'cpt-decay-load', '--exit-on-missing-checkpoint': 'cpt-decay-load', ...cptFixes },
        extra: (v) => ({ '--ckpt-step': '35000', '--load': v.CPT_ROOT, '--save': v.DECAY_ROOT }),
      },
    ];

    it.each(cases)('$id reproduces the script but for the documented fixes', ({ id, fixture, allowed, extra }) => {
      const s = step(plan, id);
      expect(s.command.argv.slice(0, LAUNCH.length)).toEqual(LAUNCH);
      const args = s.command.argv.slice(LAUNCH.length);
      const vars = cptVars(id);
      expectOnlyFixes(readArgs(fixture, vars), args, allowed);
      for (const [flag, v] of Object.entries(extra(vars))) expect(value(args, flag), flag).toBe(v);
    });

    it.each(['cpt.warmup', 'cpt.stable', 'cpt.decay'])('%s carries every environment variable of the script', (id) => {
      expect(step(plan, id).command.env).toEqual(readEnv('cpt.env', { MEGATRON: '/root/Megatron-LM' }));
    });

    it.each([
      ['cpt.warmup', 'cpt/checkpoints'],
      ['cpt.stable', 'cpt/checkpoints'],
      ['cpt.decay', 'cpt.decay/checkpoints'],
    ])('%s resumes its own lineage from the newest complete checkpoint, keeping the optimizer', (id, root) => {
      const s = step(plan, id);
      const loading = new Set(['--load', '--ckpt-step', '--pretrained-checkpoint', '--exit-on-missing-checkpoint']);
      const rest = (argv: string[]) => [...flags(argv.slice(LAUNCH.length))].filter(([f]) => !loading.has(f));
      expect(rest(s.resume!.argv)).toEqual(rest(s.command.argv));
      expect(value(s.resume!.argv, '--load')).toBe(join(RUN, root));
      expect(value(s.resume!.argv, '--ckpt-step')).toBe('{iteration}');
      expect(s.resume!.argv).toContain('--exit-on-missing-checkpoint');
      expect(s.resume!.argv).not.toContain('--no-load-optim');
    });

    it('ends each phase on its boundary checkpoint of one 40000-iteration WSD schedule', () => {
      const ends = ['cpt.warmup', 'cpt.stable', 'cpt.decay'].map((id) => step(plan, id).completion);
      expect(ends).toEqual([
        { kind: 'checkpoint', dir: join(RUN, 'cpt/checkpoints'), iteration: 5000 },
        { kind: 'checkpoint', dir: join(RUN, 'cpt/checkpoints'), iteration: 35000 },
        { kind: 'checkpoint', dir: join(RUN, 'cpt.decay/checkpoints'), iteration: 40000 },
      ]);
    });
  });

  describe('SFT (scripts/SFT)', () => {
    it.each([1, 2])('stage %i reproduces the script but for the documented fixes', (k) => {
      const id = `sft.stage${k}`;
      const s = step(plan, id);
      const saveDir = join(RUN, id, 'checkpoints');
      const argv = s.command.argv;
      expect(argv.slice(0, 4)).toEqual(['ray', 'job', 'submit', '--address=http://127.0.0.1:8265']);
      expect(argv[4]).toBe(`--submission-id=infir2-repro-sft-stage${k}-a{attempt}-{launch}`); // FIXES slime-submission-id
      expect(argv[5]!.startsWith('--runtime-env-json=')).toBe(true);
      expect(argv.slice(6, 9)).toEqual(['--', 'python3', 'train_async.py']);
      const vars = {
        STEP: join(RUN, id),
        HF_CHECKPOINT: c.hf,
        REF_LOAD: k === 1 ? join(RUN, 'cpt.decay/checkpoints') : join(RUN, 'sft.stage1/checkpoints'),
        LOAD_DIR: '/path/to/load_dir/',
        SAVE_DIR: saveDir,
        DATA_DIR: `/path/to/stage${k}_data`,
      };
      const allowed: Allowed = { '--load': 'slime-load-equals-save', '--prompt-data': 'sft-data-file' };
      if (c.size === '1.5B') allowed['--rotary-base'] = 'sft-1.5b-rotary-base';
      const args = argv.slice(9);
      expectOnlyFixes(readArgs(`sft-${c.size.toLowerCase()}-stage${k}.args`, vars), args, allowed);
      expect(value(args, '--load')).toBe(saveDir);
      expect(value(args, '--prompt-data')).toMatch(/\.jsonl$/);
      if (c.size === '1.5B') expect(value(args, '--rotary-base')).toBe('1000000');

      const runtimeEnv = JSON.parse(argv[5]!.slice('--runtime-env-json='.length));
      expect(runtimeEnv).toEqual({ working_dir: '/root/slime', env_vars: readEnv('sft.env', {}) });
      // `export PYTHONBUFFERED=16` and the emptied proxies are what the script's ray client runs with.
      expect(s.command.env).toEqual({ PYTHONBUFFERED: '16', http_proxy: '', https_proxy: '' });
    });

    it('resumes with --load = --save and --start-rollout-id (slime 8359c9a)', () => {
      const s = step(plan, 'sft.stage1');
      expect(s.resume!.argv.slice(-2)).toEqual(['--start-rollout-id', '{nextIteration}']);
      expect(s.resume!.argv[4]).toBe('--submission-id=infir2-repro-sft-stage1-a{attempt}-{launch}');
      expect(s.onStop?.argv).toEqual(['ray', 'job', 'stop', '--address=http://127.0.0.1:8265', 'infir2-repro-sft-stage1-a{attempt}-{launch}']);
      expect(s.resume!.argv.slice(5, -2)).toEqual(s.command.argv.slice(5));
    });

    it('finishes on the last rollout id: 5 epochs of 72k and 165k rows (docs/infir2-recipe.md §2.2)', () => {
      expect(step(plan, 'sft.stage1').completion).toMatchObject({ iteration: 5624 });
      expect(step(plan, 'sft.stage2').completion).toMatchObject({ iteration: 12889 });
      expect(step(plan, 'sft.stage2').progress).toEqual({ format: 'slime', totalIterations: 12890 });
    });
  });

  describe('conversion (tools/)', () => {
    it('convert.hf exports the final SFT iteration with --vocab-size', () => {
      const s = step(plan, 'convert.hf');
      expect(s.command.argv.slice(0, 2)).toEqual(['python3', '/root/InfiR2/tools/convert_torch_dist_to_hf.py']);
      const vars = { ITER_DIR: join(RUN, 'sft.stage2/checkpoints/iter_0012889'), OUT_DIR: join(RUN, 'convert.hf/hf'), ORIGIN_HF: c.hf };
      expectOnlyFixes(readArgs('convert.args', vars), s.command.argv.slice(2), { '--vocab-size': 'convert-vocab-size', '--force': 'convert-handoff' });
      expect(value(s.command.argv, '--vocab-size')).toBe(c.vocab);
      expect(s.command.env).toEqual({ PYTHONPATH: '/root/Megatron-LM:/root/slime' });
    });

    it('convert.fp8 runs bf16_cast_fp8.py with pow-2 scales and adds fmt', () => {
      const s = step(plan, 'convert.fp8');
      expect(s.command.argv.slice(0, 4)).toEqual(['python3', `${PROJECT}/src/backends/tools/fp8-cast.py`, '--tool', '/root/InfiR2/tools/bf16_cast_fp8.py']);
      const vars = { IN_DIR: join(RUN, 'convert.hf/hf'), OUT_DIR: join(RUN, 'convert.fp8/hf') };
      expectOnlyFixes(readArgs('fp8.args', vars), s.command.argv.slice(4), { '--force-pow-2-scale': 'fp8-fmt', '--fmt': 'fp8-fmt' });
      // `--force-pow-2-scale False` is True for the tool; the wrapper takes the value it means.
      expect(value(s.command.argv, '--force-pow-2-scale')).toBe('true');
      expect(value(s.command.argv, '--fmt')).toBe('e4m3');
    });
  });

  describe('evaluation (scripts/eval)', () => {
    const expected = JSON.parse(fixtureText('eval.json')) as {
      server: Record<string, string | number>;
      benchmarks: Record<string, { dataset: string; batch: number; generationConfig: unknown; datasetArgs: unknown }>;
    };
    it.each(Object.keys(expected.benchmarks))('%s: the script\'s server, generation config and dataset args', (name) => {
      const b = expected.benchmarks[name]!;
      const index = Object.keys(expected.benchmarks).indexOf(name);
      const s = step(plan, `eval.${name}`);
      expect(s.command.argv.slice(0, 2)).toEqual(['bash', `${PROJECT}/src/backends/tools/evalscope-runner.sh`]);
      const argv = s.command.argv;
      const srv = expected.server;
      expect(value(argv, '--port')).toBe(String(Number(srv.port) + index)); // FIXES eval-port
      expect(value(argv, '--tp')).toBe(String(srv.tp));
      expect(value(argv, '--warmups')).toBe(String(srv.warmups));
      expect(value(argv, '--max-running-requests')).toBe(String(srv.maxRunningRequests));
      expect(value(argv, '--chunked-prefill-size')).toBe(String(srv.chunkedPrefillSize));
      expect(value(argv, '--timeout')).toBe(String(srv.timeout));
      expect(value(argv, '--api-key')).toBe(srv.apiKey);
      expect(value(argv, '--dataset')).toBe(b.dataset);
      expect(value(argv, '--eval-batch-size')).toBe(String(b.batch));
      expect(JSON.parse(value(argv, '--generation-config')!)).toEqual(b.generationConfig);
      expect(JSON.parse(value(argv, '--dataset-args')!)).toEqual(b.datasetArgs);
      expect(s.completion).toEqual({ kind: 'files', paths: [join(RUN, s.id, 'report.json')] });
    });
  });
});

describe('InfiR2 7B RL (scripts/RL)', () => {
  let plan: Plan;
  beforeAll(async () => {
    plan = compilePlan((await loadRecipe('infir2-7b')).recipe, { runId: 'repro', projectRoot: PROJECT });
  });

  it.each([1, 2])('stage %i reproduces the script but for the documented fixes', (k) => {
    const RUN = plan.runDir;
    const id = `rl.stage${k}`;
    const s = step(plan, id);
    const argv = s.command.argv;
    expect(argv.slice(0, 5)).toEqual(['ray', 'job', 'submit', '--address=http://127.0.0.1:8265', `--submission-id=infir2-repro-rl-stage${k}-a{attempt}-{launch}`]);
    expect(argv.slice(6, 9)).toEqual(['--', 'python3', 'train.py']);
    const vars = {
      STEP: join(RUN, id),
      // HF_CHECKPOINT = the FP8 export (S6) for both stages; REF_LOAD = SFT stage 2, then RL stage 1 (docs/infir2-recipe.md §1).
      HF_CHECKPOINT: join(RUN, 'convert.fp8/hf'),
      REF_LOAD: join(RUN, k === 1 ? 'sft.stage2/checkpoints' : 'rl.stage1/checkpoints'),
      LOAD_DIR: '/path/to/load_dir/',
      SAVE_DIR: join(RUN, id, 'checkpoints'),
      DATA_DIR: '/path/to/data/dapo-math-17k.jsonl',
      EVAL_DATA: '/path/to/data/aime-2024.jsonl',
    };
    expectOnlyFixes(readArgs(`rl-7b-stage${k}.args`, vars), argv.slice(9), { '--load': 'slime-load-equals-save' });
    const runtimeEnv = JSON.parse(argv[5]!.slice('--runtime-env-json='.length));
    expect(runtimeEnv).toEqual({ working_dir: '/root/slime', env_vars: readEnv('rl.env', { STEP: join(RUN, id) }) });
    expect(s.completion).toEqual({ kind: 'checkpoint', dir: join(RUN, id, 'checkpoints'), iteration: 10239 });
    expect(s.dependsOn).toEqual(k === 1 ? ['sft.stage2', 'convert.fp8'] : ['rl.stage1', 'convert.fp8']);
  });
});

describe('FIXES', () => {
  it('names each deviation once, with what the scripts do, what infir2 does and why', () => {
    expect(new Set(FIXES.map((f) => f.id)).size).toBe(FIXES.length);
    for (const f of FIXES) {
      expect(f.original.length).toBeGreaterThan(10);
      expect(f.fix.length).toBeGreaterThan(5);
      expect(f.why.length).toBeGreaterThan(10);
    }
  });
});
