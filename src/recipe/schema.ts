/**
 * The recipe format: the single source of truth for the YAML keys, their defaults and their error messages.
 *
 * Keys are camelCase. Every object is strict (an unknown key is an error with a "did you mean"). Presets
 * (`src/recipe/presets/`) are recipes in this same schema; each key's `.describe()` text is its meaning in
 * `docs/recipe-reference.md`, which is generated from this file (`make docs`).
 * Cross-field rules (phases that add up, pools that exist, pitfalls of the InfiR2 scripts) live in `lint.ts`.
 */
import { z } from 'zod';
import { count, name, path, slug } from './fields.js';
import { PRECISIONS, goodput, logs, model, pool } from './schema-common.js';
import { software } from './schema-software.js';
import { notify } from './schema-notify.js';
import { convert, cpt, evalConfig, rl, sftStage } from './schema-stages.js';

// The parts' public names, so that the rest of the project imports the recipe format from this one module.
export { PRECISIONS, LAUNCHERS } from './schema-common.js';
export type { Arch, Keep, Pool, Parallel } from './schema-common.js';
export { EVAL_MODELS } from './schema-stages.js';
export type { SftStage, RlConfig, ConvertConfig, EvalModel, Benchmark, EvalConfig } from './schema-stages.js';

export const recipeSchema = z.strictObject({
  name: slug().describe('names workflows and directories: lowercase letters, digits, single dashes; at most 63 characters'),
  preset: z.string().optional().describe('the preset this recipe starts from (`infir2-7b`, `infir2-1.5b`, `tiny`)'),
  description: z.string().optional().describe('free text, shown in summaries'),
  precision: z
    .enum(PRECISIONS)
    .default('fp8')
    .describe('`fp8`: TransformerEngine blockwise E4M3 training and an FP8 export for RL and eval; `bf16`: neither'),
  runDir: path().describe(
    'directory of the runs: each lives in `<runDir>/<run id>/` (shared storage on a cluster). `$INFIR2_HOME/…` is under the embedded default\'s state directory (`INFIR2_HOME`, else `.infir2/` in the checkout), where the presets put their runs',
  ),
  fp8BlockSize: count().default(128).describe('block size of the local trainer\'s FP8: emulated at any size on CPU; real FP8 GEMMs on a Hopper GPU need 128, TransformerEngine\'s blockwise recipe'),
  software,
  logs,
  goodput,
  model,
  pools: z.record(name(), pool).describe('worker pools by name'),
  cpt: cpt.optional(),
  sft: z.array(sftStage).optional().describe('the SFT stages, in order'),
  convert: convert.optional(),
  rl: rl.optional(),
  eval: evalConfig.optional(),
  notify: notify.optional(),
});

export type Recipe = z.output<typeof recipeSchema>;
export type RecipeInput = z.input<typeof recipeSchema>;
export type CptConfig = NonNullable<Recipe['cpt']>;
