/**
 * The InfiR2 evaluation scripts (`scripts/eval/{aime24,aime25,gpqa,livecodebenchv5}_eval.sh`, docs/infir2-recipe.md §5): one
 * SGLang server per benchmark, evalscope in service mode, the scripts' default generation configs.
 */
import type { RecipeInput } from '../schema.js';

const THINK_FILTER = { remove_until: '</think>' };

/** The AIME scripts' prompt: a Qwen chat turn that opens the assistant's `<think>` block. */
const AIME_ARGS = {
  filters: THINK_FILTER,
  prompt_template: '<|im_start|>user\n{query}<|im_end|>\n<|im_start|>assistant\n<think>\n',
  // `{{}}` because evalscope formats the prompt with str.format.
  system_prompt: '<|im_start|>system\nPlease reason step by step, and put your final answer within \\boxed{{}}.<|im_end|>\n',
};

const SAMPLING = { temperature: 0.65, topP: 0.95, timeout: 18000 };

export const INFIR2_EVAL: NonNullable<RecipeInput['eval']> = {
  backend: 'evalscope',
  pool: 'gpu',
  server: { port: 8801, tensorParallel: 1, warmups: 1, maxRunningRequests: 8, chunkedPrefillSize: 4096, readyTimeout: '30m' },
  apiKey: 'EMPTY',
  benchmarks: {
    aime24: { dataset: 'aime24', ...SAMPLING, samples: 32, maxTokens: 31000, batchSize: 32, datasetArgs: AIME_ARGS },
    aime25: { dataset: 'aime25', ...SAMPLING, samples: 32, maxTokens: 31000, batchSize: 32, datasetArgs: AIME_ARGS },
    gpqa: {
      dataset: 'gpqa',
      ...SAMPLING,
      samples: 8,
      maxTokens: 26000,
      batchSize: 32,
      datasetArgs: { filters: THINK_FILTER, subset_list: ['gpqa_diamond'] },
    },
    livecodebench: {
      dataset: 'live_code_bench',
      ...SAMPLING,
      samples: 8,
      maxTokens: 27000,
      maxTokensKey: 'max_new_tokens',
      batchSize: 8,
      datasetArgs: { filters: THINK_FILTER, extra_params: { start_date: '2024-08-01', end_date: '2025-02-01' } },
    },
  },
};
