/**
 * The InfiR2 conversion tools (docs/infir2-recipe.md §4): torch_dist → HF (`tools/convert_torch_dist_to_hf.py`)
 * and BF16 → FP8 blocks (`tools/bf16_cast_fp8.py`, run through `tools/fp8-cast.py` for its fixes). Pure.
 */
import { join } from 'node:path';
import type { Recipe } from '../recipe/schema.js';
import { opt } from './argv.js';
import type { StepBody } from './types.js';

/** The wrapper that runs bf16_cast_fp8.py and then mends its output (FIXES fp8-fmt). */
export const FP8_CAST_TOOL = 'src/backends/tools/fp8-cast.py';

export interface HfExportSpec {
  stepDir: string;
  software: Recipe['software'];
  /** The `iter_XXXXXXX` directory to convert (the tool reads `common.pt` in it). */
  iterDir: string;
  outDir: string;
  /** HF directory whose config and tokenizer files are copied (`--origin-hf-dir`). */
  originHf: string;
  vocabSize: number;
  what: string;
}

export function hfExportStep(s: HfExportSpec): StepBody {
  return {
    command: {
      argv: [
        s.software.python,
        join(s.software.infir2, 'tools', 'convert_torch_dist_to_hf.py'),
        '--input-dir', s.iterDir,
        '--output-dir', s.outDir,
        '--origin-hf-dir', s.originHf,
        ...opt('--vocab-size', s.vocabSize),
        '--force',
      ],
      // The README's invocation: PYTHONPATH=training/Megatron-LM:training/slime.
      env: { PYTHONPATH: `${s.software.megatron}:${s.software.slime}` },
      cwd: s.stepDir,
    },
    resume: null,
    progress: { format: 'none', totalIterations: null },
    checkpoint: null,
    completion: { kind: 'files', paths: [join(s.outDir, 'config.json'), join(s.outDir, 'model.safetensors.index.json')] },
    inputs: { checkpoint: s.iterDir, originHf: s.originHf },
    outputs: { hfDir: s.outDir },
    gpus: 0,
    nodes: 1,
    summary: `export ${s.what} to HF safetensors (BF16), vocab trimmed to ${s.vocabSize}`,
  };
}

export interface Fp8CastSpec {
  stepDir: string;
  software: Recipe['software'];
  projectRoot: string;
  inDir: string;
  outDir: string;
  pow2Scales: boolean;
  fmt: 'e4m3' | null;
  blockSize: number;
}

export function fp8CastStep(s: Fp8CastSpec): StepBody {
  return {
    command: {
      argv: [
        s.software.python,
        join(s.projectRoot, FP8_CAST_TOOL),
        '--tool', join(s.software.infir2, 'tools', 'bf16_cast_fp8.py'),
        '--input-bf16-hf-path', s.inDir,
        '--output-fp8-hf-path', s.outDir,
        '--force-pow-2-scale', s.pow2Scales ? 'true' : 'false',
        ...opt('--fmt', s.fmt),
      ],
      env: {},
      cwd: s.stepDir,
    },
    resume: null,
    progress: { format: 'none', totalIterations: null },
    checkpoint: null,
    completion: { kind: 'files', paths: [join(s.outDir, 'config.json'), join(s.outDir, 'model.safetensors.index.json')] },
    inputs: { hf: s.inDir },
    outputs: { hfDir: s.outDir },
    // bf16_cast_fp8.py quantises on a CUDA device with Triton.
    gpus: 1,
    nodes: 1,
    summary: `cast to FP8 E4M3, ${s.blockSize}×${s.blockSize} blocks, ${s.pow2Scales ? 'power-of-2' : 'FP32'} scales${s.fmt ? `, fmt ${s.fmt}` : ''}`,
  };
}
