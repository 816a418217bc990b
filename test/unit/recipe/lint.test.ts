import { describe, expect, it } from 'vitest';
import { RecipeError, type Issue } from '../../../src/recipe/issues.js';
import { loadRecipe } from '../../../src/recipe/load.js';

/** The issues (errors, warnings and hints) of a preset with some --set overrides, as `path: message`. */
async function issuesOf(preset: string, sets: string[]): Promise<{ errors: string[]; warnings: string[]; hints: string[] }> {
  let issues: Issue[];
  try {
    issues = (await loadRecipe(preset, { sets })).warnings;
  } catch (err) {
    if (!(err instanceof RecipeError)) throw err;
    issues = err.issues;
  }
  const pick = (level: string) => issues.filter((i) => i.level === level).map((i) => `${i.path}: ${i.message}`);
  return { errors: pick('error'), warnings: pick('warning'), hints: pick('hint') };
}

describe('lint', () => {
  it.each([
    ['a multi-node torchrun pool', 'infir2-7b', ['pools.megatron.nodes=2', 'cpt.nodes=2'], /^cpt\.nodes: 2 nodes need the same torchrun on every node.*launcher: slurm/],
    ['a multi-node Slurm pool without a rendezvous host', 'infir2-7b', ['pools.megatron.nodes=2', 'pools.megatron.launcher=slurm', 'cpt.nodes=2'], /^pools\.megatron\.rdzvEndpoint: is localhost:29400/],
    ['Megatron on a CPU pool', 'infir2-7b', ['pools.megatron.gpusPerNode=0', 'cpt.gpusPerNode=null'], /^cpt\.pool: the megatron backend needs GPUs/],
    ['slime on a torchrun pool', 'infir2-7b', ['sft.0.pool=megatron', 'sft.0.nodes=1'], /^sft\.0\.pool: the slime backend cannot start on a 'torchrun' pool/],
    ['TP that does not divide the GPUs', 'infir2-7b', ['cpt.parallel.tensor=3'], /^cpt\.parallel: tensor × pipeline × context = 3 does not divide the 8 GPUs/],
    ['a global batch that data parallelism cannot split', 'infir2-7b', ['cpt.globalBatchSize=129'], /^cpt\.globalBatchSize: 129 is not a multiple of data-parallel size \(2\)/],
    ['a managed flag in extraArgs', 'infir2-7b', ['sft.0.extraArgs=[--load, /x]'], /^sft\.0\.extraArgs\.0: --load is set by infir2/],
    ['--rdzv-endpoint passed to slime (docs/RL.md)', 'infir2-7b', ['rl.extraArgs=[--rdzv-endpoint, "h:1"]'], /^rl\.extraArgs\.0: --rdzv-endpoint is not a slime argument/],
    ['a Megatron data path with its .bin extension', 'infir2-7b', ['cpt.data=/d/text_document.bin'], /^cpt\.data: Megatron takes the indexed-dataset prefix/],
    ['a layer count that differs from the trained model', 'infir2-7b', ['rl.arch.numLayers=24'], /^rl\.arch\.numLayers: 24 differs from model\.arch\.numLayers 28/],
    ['evaluating an FP8 export that is switched off', 'infir2-7b', ['convert.fp8.enabled=false', 'eval.models=[fp8]'], /^eval\.models\.0: 'fp8' needs convert\.fp8 enabled/],
    ['evaluating the RL model without an RL stage', 'infir2-7b', ['rl=null', 'eval.models=[rl]'], /^eval\.models\.0: 'rl' needs an rl stage/],
    ['a local eval without data', 'tiny', ['eval.benchmarks.arith.data=null'], /^eval\.benchmarks\.arith\.data: required by the local backend/],
    ['an SFT stage with nothing to start from', 'tiny', ['cpt=null'], /^sft\.0\.refLoad: nothing to start from/],
    ['an export with no training stage', 'tiny', ['cpt=null', 'sft=null', 'rl=null', 'eval.models=[fp8]'], /^convert: nothing to export/],
    ['a block size bf16_cast_fp8.py does not have', 'infir2-7b', ['convert.fp8.blockSize=64'], /^convert\.fp8\.blockSize: InfiR2's bf16_cast_fp8\.py quantises 128×128 blocks only/],
    ['retention that would delete a boundary a later phase loads', 'tiny', ['cpt.keep.last=2', 'cpt.keep.boundaries=false'], /^cpt\.keep\.boundaries: false would let retention delete the end of the stable phase, which cpt\.decay loads/],
    ['retention that would delete the checkpoint the next SFT stage loads', 'tiny', ['sft.0.keep.boundaries=false'], /^sft\.0\.keep\.boundaries: false would let retention delete its final checkpoint, which sft\.stage2 loads/],
    ['an evaluation interval that is not a multiple of the save interval', 'tiny', ['sft.0.saveInterval=20', 'sft.0.evalEvery=30'], /^sft\.0\.evalEvery: 30 is not a multiple of saveInterval \(20\): only saved checkpoints can be evaluated/],
    ['evaluation while training without an eval stage', 'tiny', ['rl.evalEvery=4', 'eval=null'], /^rl\.evalEvery: needs an eval stage/],
    ['a webhook URL that is not http(s)', 'tiny', ['notify.webhooks=[{url: "ftp://x/y"}]'], /^notify\.webhooks\.0\.url: expected env:NAME \(the worker's environment variable that holds the URL\) or an http\(s\) URL/],
    ['a webhook event that does not exist', 'tiny', ['notify.webhooks=[{url: "env:HOOK", events: [run.done]}]'], /^notify\.webhooks\.0\.events\.0: /],
    ['an SFT file smaller than one batch', 'infir2-7b', ['sft.0.samples=10'], /^sft\.0\.samples: 10 rows make no full batch of 64/],
    ['more ranks than GPUs', 'infir2-7b', ['pools.megatron.ranksPerNode=16'], /^pools\.megatron\.ranksPerNode: 16 ranks on 8 GPUs per node: expected at most one rank per GPU/],
    ['a local global batch two ranks cannot share', 'tiny', ['pools.local.launcher=torchrun', 'pools.local.ranksPerNode=2'], /^cpt\.globalBatchSize: 16 is not a multiple of ranks \(2\) × microBatchSize \(16\)/],
    ['a multi-node local CPT on a torchrun pool', 'tiny', ['pools.local.launcher=torchrun', 'pools.local.nodes=2', 'cpt.microBatchSize=8'], /^cpt\.nodes: 2 nodes need the same torchrun on every node/],
  ])('rejects %s', async (_what, preset, sets, message) => {
    const { errors } = await issuesOf(preset, sets);
    expect(errors.some((e) => message.test(e)), errors.join('\n')).toBe(true);
  });

  it.each([
    ['a save interval that does not divide a phase boundary', 'tiny', ['cpt.saveInterval=4'], /^cpt\.saveInterval: 4 does not divide the warmup boundary 10/],
    ['a phase shorter than the save interval', 'tiny', ['cpt.saveInterval=20'], /^cpt\.saveInterval: 20 is longer than the warmup phase \(10 iterations\)/],
    ['CPT profiling left on', 'infir2-7b', [], /^cpt\.profile: on, as in the InfiR2 scripts/],
    ['the InfiR2 placeholder paths', 'infir2-7b', [], /^\(recipe\): still the InfiR2 scripts' placeholder paths: model\.hf, /],
    ['a vocab that differs between CPT and SFT', 'infir2-1.5b', [], /^sft\.0\.arch\.vocabSize: 151936 differs from model\.arch\.vocabSize 152064/],
    ['an FP8 export without fmt that RL does not read', 'infir2-1.5b', ['convert.fp8.fmt=none'], /^convert\.fp8\.fmt: the FP8 config would have no quantization_config\.fmt/],
    ['a webhook URL written in the recipe', 'tiny', ['notify.webhooks=[{url: "https://hooks.example/T/B/token"}]'], /^notify\.webhooks\.0\.url: is written in the recipe, so it travels in the plan and the run's history/],
    ['a CPT that starts from random weights', 'infir2-7b', ['model.base=null'], /^model\.base: not set: CPT starts from random weights/],
    ['an RL keep.every that no slime checkpoint (a rollout id, 19, 39, …) is a multiple of', 'infir2-7b', ['rl.keep.every=1000'], /^rl\.keep\.every: 1000 keeps no checkpoint: slime names them by rollout id, 19, 39, … \(saveInterval 20\), and none is a multiple of 1000; use keep\.last$/],
    ['a local SFT stage on a torchrun pool, which stays one process', 'tiny', ['pools.local.launcher=torchrun', 'pools.local.ranksPerNode=2', 'cpt.microBatchSize=8'], /^sft\.0\.pool: the local trainer is data-parallel in pretraining only/],
  ])('warns about %s', async (_what, preset, sets, message) => {
    const { errors, warnings } = await issuesOf(preset, sets);
    expect(errors).toEqual([]);
    expect(warnings.some((w) => message.test(w)), warnings.join('\n')).toBe(true);
  });

  it('finds nothing to say about the tiny preset', async () => {
    expect(await issuesOf('tiny', [])).toEqual({ errors: [], warnings: [], hints: [] });
  });
});

describe('lint: checkpoint-interval hints', () => {
  const TIMINGS = ['cpt.estimates={iterationTime: 90s, saveTime: 1m}', 'rl.estimates={iterationTime: 10m, saveTime: 90s}', 'sft.0.estimates={iterationTime: 20s, saveTime: 1m}'];
  const FLAKY = 'goodput.failureRate=2e-3';

  it('hints, never errs, when an interval loses over 3 points of goodput, and names the interval to set', async () => {
    const { errors, hints } = await issuesOf('recipes/qwen2.5-7b-fp8.yaml', [...TIMINGS, FLAKY]);
    expect(errors).toEqual([]);
    expect(hints).toEqual([
      'cpt.saveInterval: saving every 1000 iterations gives an estimated goodput of 79.7 % on 8 GPUs; the Young–Daly optimum is ~58 (97.4 %): set cpt.saveInterval: 50, the best that divides the phase boundaries (97.4 %)',
      'sft.0.saveInterval: saving every 1000 steps gives an estimated goodput of 90.3 % on 16 GPUs; the Young–Daly optimum is ~184 (96.2 %): set sft.0.saveInterval: 184 (96.2 %)',
      'rl.saveInterval: saving every 20 rollouts gives an estimated goodput of 87.5 % on 32 GPUs; the Young–Daly optimum is ~5 (93.3 %): set rl.saveInterval: 5 (93.3 %)',
    ]);
  });

  it("is quiet at Llama 3's failure rate, and without estimates", async () => {
    expect((await issuesOf('recipes/qwen2.5-7b-fp8.yaml', TIMINGS)).hints).toEqual([]);
    expect((await issuesOf('recipes/qwen2.5-7b-fp8.yaml', [FLAKY])).hints).toEqual([]);
  });

  it('is quiet once its advice is taken, which no other check objects to', async () => {
    const { errors, warnings, hints } = await issuesOf('recipes/qwen2.5-7b-fp8.yaml', [...TIMINGS, FLAKY, 'cpt.saveInterval=50', 'sft.0.saveInterval=184', 'rl.saveInterval=5']);
    expect(errors).toEqual([]);
    expect(warnings.filter((w) => w.includes('saveInterval'))).toEqual([]);
    expect(hints).toEqual([]);
  });
});
