/**
 * Cross-field checks of a valid recipe: the pitfalls of the InfiR2 scripts (docs/infir2-recipe.md §7) that a
 * config can show, and stages that do not fit together. Each message says what goes wrong and what to change.
 * Errors stop `validate`/`plan`/`run`; warnings and hints (goodput-advice.ts) are printed and the recipe still runs.
 */
import { fp8Enabled, sftSteps } from './derived.js';
import { intervalHints } from './goodput-advice.js';
import { error, warning, type Issue } from './issues.js';
import type { Arch, Recipe } from './schema.js';
import { STAGE_CHECKS, type Check } from './lint-stages.js';
import { ENV_REF_RE } from '../plan/notify-spec.js';

const ITER_DIR = /(^|\/)(iter_\d{7}|release)\/?$/;

const checkpointRoots: Check = (r) => {
  const out: Issue[] = [];
  const roots: [string, string | undefined][] = [
    ['model.base', r.model.base],
    ...(r.sft ?? []).map((s, i) => [`sft.${i}.refLoad`, s.refLoad] as [string, string | undefined]),
    ['rl.refLoad', r.rl?.refLoad],
  ];
  for (const [path, dir] of roots) {
    if (dir && ITER_DIR.test(dir)) {
      out.push(error(path, `${dir} is an iteration directory: Megatron looks for latest_checkpointed_iteration.txt inside it, finds none and trains from random init (docs/infir2-recipe.md §3.3); give the checkpoint root above it`));
    }
  }
  return out;
};

const SHAPE_KEYS: (keyof Arch)[] = ['numLayers', 'hiddenSize', 'ffnHiddenSize', 'numAttentionHeads', 'numQueryGroups', 'tieEmbeddings'];

/** The weights SFT/RL load were trained with `model.arch`; a stage's model arguments must agree with it. */
const archConsistency: Check = (r) => {
  const out: Issue[] = [];
  const base = r.model.arch;
  const stages: [string, Partial<Arch> | undefined][] = [...(r.sft ?? []).map((s, i) => [`sft.${i}.arch`, s.arch] as [string, Partial<Arch> | undefined]), ['rl.arch', r.rl?.arch]];
  for (const [path, arch] of stages) {
    if (!arch) continue;
    if (arch.rotaryBase !== undefined && arch.rotaryBase !== base.rotaryBase) {
      out.push(error(`${path}.rotaryBase`, `${arch.rotaryBase} differs from model.arch.rotaryBase ${base.rotaryBase}, the RoPE base the weights were trained with; slime asserts rope_theta == rotary_base against the HF config, or RoPE silently changes (docs/infir2-recipe.md §7): use ${base.rotaryBase}`));
    }
    if (arch.vocabSize !== undefined && arch.vocabSize !== base.vocabSize) {
      out.push(warning(`${path}.vocabSize`, `${arch.vocabSize} differs from model.arch.vocabSize ${base.vocabSize}: Megatron pads the tokenizer's size and ignores --vocab-size with HuggingFaceTokenizer (docs/infir2-recipe.md §7); check the embedding shapes of the checkpoint this stage loads`));
    }
    if (arch.maxContext !== undefined && arch.maxContext > base.maxContext) {
      out.push(warning(`${path}.maxContext`, `${arch.maxContext} is beyond model.arch.maxContext ${base.maxContext}`));
    }
    for (const k of SHAPE_KEYS) {
      if (arch[k] !== undefined && arch[k] !== base[k]) {
        out.push(error(`${path}.${k}`, `${String(arch[k])} differs from model.arch.${k} ${String(base[k])}: the checkpoint would not load`));
      }
    }
  }
  return out;
};

const dataFiles: Check = (r) => {
  const out: Issue[] = [];
  const files: [string, string | undefined, string][] = [
    ...(r.sft ?? []).map((s, i) => [`sft.${i}.data`, s.data, s.backend] as [string, string, string]),
    ['rl.data', r.rl?.data, r.rl?.backend ?? ''],
    ['rl.evalData', r.rl?.evalData, r.rl?.backend ?? ''],
  ];
  for (const [path, file, backend] of files) {
    if (!file) continue;
    if (backend === 'slime' && !/\.(jsonl|parquet)$/.test(file)) {
      out.push(error(path, `slime reads only a .jsonl or .parquet file here (a directory raises ValueError, docs/infir2-recipe.md §2.2): point it at the file itself`));
    } else if (backend === 'local' && !file.endsWith('.jsonl')) {
      out.push(error(path, 'the local trainer reads a .jsonl file'));
    }
  }
  if (r.eval?.backend === 'local') {
    for (const [b, bench] of Object.entries(r.eval.benchmarks)) {
      if (!bench.data) out.push(error(`eval.benchmarks.${b}.data`, 'required by the local backend: the eval_<name>.jsonl file to score'));
    }
  }
  return out;
};

/** Generation lengths beyond the model's context are rejected by SGLang after hours of setup. */
const lengths: Check = (r) => {
  const out: Issue[] = [];
  const ctx = r.model.arch.maxContext;
  const over = (path: string, n: number | undefined) => {
    if (n !== undefined && n > ctx) out.push(error(path, `${n} exceeds the model's context (model.arch.maxContext = ${ctx})`));
  };
  r.rl?.curriculum.forEach((c, i) => over(`rl.curriculum.${i}.maxResponseLen`, c.maxResponseLen));
  over('rl.evalMaxResponseLen', r.rl?.evalMaxResponseLen);
  for (const [b, bench] of Object.entries(r.eval?.benchmarks ?? {})) over(`eval.benchmarks.${b}.maxTokens`, bench.maxTokens);
  return out;
};

const exports: Check = (r) => {
  const out: Issue[] = [];
  const c = r.convert;
  if (c && fp8Enabled(r)) {
    if (c.fp8.fmt === 'none') {
      const rlReads = r.rl && r.rl.backend === 'slime' && !r.rl.hfCheckpoint;
      const msg = `the FP8 config would have no quantization_config.fmt; slime asserts fmt == "e4m3" when it loads it (KeyError: 'fmt', docs/infir2-recipe.md §4.2): set convert.fp8.fmt: e4m3`;
      out.push(rlReads ? error('convert.fp8.fmt', msg) : warning('convert.fp8.fmt', msg));
    }
    const pool = r.pools[c.pool];
    if (c.backend === 'convert' && pool && (c.gpusPerNode ?? pool.gpusPerNode) === 0) {
      out.push(error('convert.pool', `bf16_cast_fp8.py quantises on a CUDA GPU, but pool '${c.pool}' has none: give convert a GPU pool`));
    }
    if (c.backend === 'convert' && c.fp8.blockSize !== 128) {
      out.push(error('convert.fp8.blockSize', `InfiR2's bf16_cast_fp8.py quantises 128×128 blocks only; use 128 (or the local backend)`));
    }
  }
  const training = [r.cpt?.backend, ...(r.sft ?? []).map((s) => s.backend), r.rl?.backend];
  if (r.fp8BlockSize !== 128 && training.some((b) => b === 'megatron' || b === 'slime')) {
    out.push(warning('fp8BlockSize', `${r.fp8BlockSize} applies to the local trainer only; TransformerEngine's blockwise recipe uses 128`));
  }
  const models = r.eval?.models ?? [];
  const seen = new Set<string>();
  models.forEach((m, i) => {
    const at = `eval.models.${i}`;
    if (seen.has(m)) out.push(error(at, `'${m}' is listed twice`));
    seen.add(m);
    if (m === 'base' && !r.model.hf) out.push(error(at, "'base' evaluates model.hf, which is not set"));
    if ((m === 'hf' || m === 'rl') && !r.convert) out.push(error(at, `'${m}' needs a convert stage to export an HF model`));
    if (m === 'fp8' && !fp8Enabled(r)) out.push(error(at, "'fp8' needs convert.fp8 enabled (precision fp8 or convert.fp8.enabled: true)"));
    if (m === 'rl' && !r.rl) out.push(error(at, "'rl' needs an rl stage"));
  });
  return out;
};

/** Every stage needs something to start from. */
const inputs: Check = (r) => {
  const out: Issue[] = [];
  const hasTorchDist = !!r.cpt || !!r.model.base;
  (r.sft ?? []).forEach((s, i) => {
    if (i === 0 && !s.refLoad && !hasTorchDist) {
      out.push(error('sft.0.refLoad', 'nothing to start from: add a cpt stage, set model.base (a torch_dist checkpoint root) or sft.0.refLoad'));
    }
    if (s.backend === 'slime' && !s.hfCheckpoint && !r.model.hf) out.push(error(`sft.${i}.hfCheckpoint`, 'required by slime (config and tokenizer): set it or model.hf'));
    if (s.samples === undefined) {
      out.push(error(`sft.${i}.samples`, `required: the number of rows in ${s.data} (the step count depends on it); it is counted automatically when the file is a local .jsonl`));
    } else if (sftSteps(s) === 0) {
      out.push(error(`sft.${i}.samples`, `${s.samples} rows make no full batch of ${s.backend === 'slime' ? s.rolloutBatchSize : s.globalBatchSize}: the stage would train 0 steps`));
    }
  });
  if (r.convert && !r.cpt && !(r.sft?.length)) out.push(error('convert', 'nothing to export: convert turns the last SFT (or CPT) checkpoint into an HF model; add that stage'));
  if (r.convert?.backend === 'convert' && !r.model.hf) out.push(error('model.hf', "required by the HF export (`--origin-hf-dir`: config and tokenizer files)"));
  if (r.cpt?.backend === 'megatron' && !r.model.tokenizer && !r.model.hf) out.push(error('model.tokenizer', 'required by Megatron (`--tokenizer-model`): set it or model.hf'));
  if (r.rl) {
    if (!r.rl.refLoad && !hasTorchDist && !r.sft?.length) out.push(error('rl.refLoad', 'nothing to start from: add an sft or cpt stage, set model.base or rl.refLoad'));
    if (r.rl.backend === 'slime' && !r.rl.hfCheckpoint && !r.convert && !r.model.hf) out.push(error('rl.hfCheckpoint', 'required: set it, model.hf, or add a convert stage'));
    if (r.rl.backend === 'local' && !r.rl.hfCheckpoint && !r.convert) out.push(error('rl.hfCheckpoint', 'the local trainer needs an HF export to sample from: add a convert stage or set it'));
  }
  return out;
};

/** slime saves RL checkpoints only every saveInterval rollouts: the last one must fall on it. */
const rlSaves: Check = (r) => {
  const rl = r.rl;
  if (!rl) return [];
  const out: Issue[] = [];
  if (rl.backend === 'slime') {
    rl.curriculum.forEach((c, i) => {
      if (c.rollouts % rl.saveInterval !== 0) {
        out.push(error(`rl.curriculum.${i}.rollouts`, `${c.rollouts} is not a multiple of rl.saveInterval (${rl.saveInterval}): slime would not save the last rollout, so the stage could never be verified complete`));
      }
    });
    if ((rl.rolloutBatchSize * rl.samplesPerPrompt) % rl.globalBatchSize !== 0) {
      out.push(warning('rl.globalBatchSize', `rolloutBatchSize × samplesPerPrompt (${rl.rolloutBatchSize * rl.samplesPerPrompt}) is not a multiple of ${rl.globalBatchSize}: some samples of each rollout are not trained on`));
    }
  }
  return out;
};

/** Paths still holding the InfiR2 scripts' placeholders. */
const placeholders: Check = (r) => {
  const found: string[] = [];
  const walk = (v: unknown, path: string) => {
    if (typeof v === 'string') {
      if (v.includes('/path/to/') || v.startsWith('/your_')) found.push(path);
    } else if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${path}.${i}`));
    else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) if (k !== 'description') walk(x, path ? `${path}.${k}` : k);
  };
  walk(r, '');
  return found.length ? [warning('(recipe)', `still the InfiR2 scripts' placeholder paths: ${found.join(', ')}`)] : [];
};

/** A webhook URL written in the recipe travels in the plan and history, and usually holds the receiver's token. */
const webhookUrls: Check = (r) =>
  (r.notify?.webhooks ?? []).flatMap((w, i) =>
    ENV_REF_RE.test(w.url) ? [] : [warning(`notify.webhooks.${i}.url`, 'is written in the recipe, so it travels in the plan and the run\'s history: put it in a worker environment variable and write env:NAME')],
  );

/** `keep.boundaries: false` deletes boundaries and finals; refused where a later step loads one. */
const retention: Check = (r) => {
  const out: Issue[] = [];
  const refuse = (path: string, what: string) =>
    out.push(error(`${path}.keep.boundaries`, `false would let retention delete ${what}: expected true (or leave it out)`));
  if (r.cpt && !r.cpt.keep.boundaries) refuse('cpt', `the end of the stable phase, which cpt.decay loads`);
  const sft = r.sft ?? [];
  sft.forEach((s, i) => {
    const next = i + 1 < sft.length ? `sft.stage${i + 2}` : r.convert ? 'convert.hf' : r.rl && !r.rl.refLoad ? 'rl.stage1' : null;
    if (!s.keep.boundaries && next) refuse(`sft.${i}`, `its final checkpoint, which ${next} loads`);
  });
  const rl = r.rl;
  if (rl && !rl.keep.boundaries && (rl.curriculum.length > 1 || (r.convert && r.eval?.models?.includes('rl')))) {
    refuse('rl', `a curriculum stage's final checkpoint, which ${rl.curriculum.length > 1 ? 'the next stage' : 'convert.rl'} loads`);
  }
  // slime names a checkpoint by its rollout id, from 0: the saves are k × saveInterval − 1 (19, 39, …), so
  // `every: 1000` keeps none of them. Retention would then thin nothing the user meant to keep.
  const slimeEvery = (path: string, s: { backend: string; saveInterval: number; keep: { every?: number | undefined } }, span: number) => {
    const every = s.keep.every;
    if (s.backend !== 'slime' || !every) return;
    for (let id = s.saveInterval - 1; id < span; id += s.saveInterval) if (id % every === 0) return;
    out.push(warning(`${path}.keep.every`, `${every} keeps no checkpoint: slime names them by rollout id, ${s.saveInterval - 1}, ${2 * s.saveInterval - 1}, … (saveInterval ${s.saveInterval}), and none is a multiple of ${every}; use keep.last`));
  };
  sft.forEach((s, i) => slimeEvery(`sft.${i}`, s, sftSteps(s) ?? 0));
  if (rl) slimeEvery('rl', rl, Math.max(...rl.curriculum.map((c) => c.rollouts)));
  return out;
};

/** Evaluation while training reads saved checkpoints, exported by `convert` and scored by `eval`. */
const evalWhileTraining: Check = (r) => {
  const stages: [string, { evalEvery?: number | undefined; saveInterval: number }][] = [
    ...(r.cpt ? [['cpt', r.cpt] as [string, typeof r.cpt]] : []),
    ...(r.sft ?? []).map((s, i) => [`sft.${i}`, s] as [string, typeof s]),
    ...(r.rl ? [['rl', r.rl] as [string, typeof r.rl]] : []),
  ];
  return stages.flatMap(([path, s]) => {
    if (s.evalEvery === undefined) return [];
    if (!r.eval || !r.convert) return [error(`${path}.evalEvery`, `needs an eval stage (its benchmarks and pool) and a convert stage (the HF export): add ${!r.eval ? 'eval' : 'convert'}`)];
    if (s.evalEvery % s.saveInterval !== 0) {
      return [error(`${path}.evalEvery`, `${s.evalEvery} is not a multiple of saveInterval (${s.saveInterval}): only saved checkpoints can be evaluated`)];
    }
    return [];
  });
};

const CHECKS: Check[] = [retention, evalWhileTraining, ...STAGE_CHECKS, checkpointRoots, archConsistency, dataFiles, lengths, exports, inputs, rlSaves, placeholders, intervalHints, webhookUrls];

/** Every problem found; errors first, then warnings, then hints, each in recipe order. */
export function lintRecipe(r: Recipe): Issue[] {
  const issues = CHECKS.flatMap((check) => check(r));
  return (['error', 'warning', 'hint'] as const).flatMap((level) => issues.filter((i) => i.level === level));
}
