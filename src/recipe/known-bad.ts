/**
 * Known-bad combinations of the software a step runs with: each entry is a combination that was seen to break
 * a training job, with where that was seen. The preflight (src/preflight/checks.ts) tests every entry against
 * what it found on the node before the trainer starts; a `fail` entry stops the step as a `config` failure, a
 * `warn` entry is shown in `status`, the report and the Web UI. A recipe turns one off by its id in
 * `software.skipChecks`, saying why.
 *
 * An entry applies when all the conditions of one of its `when` sets hold:
 * - `{ pkg, spec }`: the package (or system fact) is there and its version satisfies the requirement
 *   (version-spec.ts; `.dev0` bounds catch pre-releases: NumPy 2.0.0rc1 has no `np.product` either);
 * - `{ importError, matches }`: importing the package failed with a message matching the pattern;
 * - `{ finding }`: the probe found this in the installed source (`megatron.npProduct`: where Megatron calls
 *   `np.product`);
 * - `{ step }`: what the step runs: `teFp8` (Megatron or slime with `precision: fp8`: TransformerEngine's
 *   blockwise FP8), `localFp8Gpu` (the reference trainer in FP8 on a GPU).
 *
 * In `says` and `expected`, `{name}` is replaced by what was found: a package's version (Megatron's with its
 * commit), `{importError:name}` by the import's error, `{finding:key}` by the finding.
 */
import type { Package, Pinnable } from './software-checks.js';

export type Condition =
  | { pkg: Pinnable; spec: string }
  | { importError: Package; matches: string }
  | { finding: string }
  | { step: 'teFp8' | 'localFp8Gpu' };

export interface KnownBad {
  id: string;
  level: 'fail' | 'warn';
  when: Condition[][];
  says: string;
  expected: string;
  /** Where the combination was seen or its cause can be read (repository, commit or tag, file:line; issues). */
  sources: string[];
}

const NUMPY2 = { pkg: 'numpy', spec: '>=2.0.0.dev0' } as const;

export const KNOWN_BAD: readonly KnownBad[] = [
  {
    id: 'numpy2-megatron-np-product',
    level: 'fail',
    when: [[NUMPY2, { finding: 'megatron.npProduct' }]],
    says: 'numpy {numpy} with Megatron {megatron}: {finding:megatron.npProduct} calls np.product, which NumPy 2.0 removed: the first checkpoint save (distributed optimizer) dies with AttributeError',
    expected: 'numpy < 2 (Megatron core_v0.14.0 itself pins numpy<2.0.0), or Megatron core ≥ 0.16.0 (np.prod)',
    sources: [
      'NVIDIA/Megatron-LM core_v0.14.0 (23e00ed): megatron/core/dist_checkpointing/validation.py:512 `expected_size = np.product(local_shape)`; also exchange_utils.py:66, mapping.py:202; its pyproject.toml: numpy<2.0.0',
      'NVIDIA/Megatron-LM 40ef044 "Reapply build: Upgrade deps" (#2408): np.product → np.prod; first tag with it core_v0.16.0 (core_v0.10.0 – core_v0.15.0 all call np.product)',
      'numpy/numpy#23314: np.product deprecated in 1.25 and removed in NumPy 2.0 (NumPy 2.0 migration guide)',
      'seen: infir2 issue 32, Megatron core_v0.14.0 with NumPy 2.5.2 on an H100: `AttributeError: module \'numpy\' has no attribute \'product\'` at the first save',
    ],
  },
  {
    id: 'torch-numpy2-abi',
    level: 'fail',
    when: [[{ pkg: 'torch', spec: '<2.3.0.dev0' }, NUMPY2]],
    says: 'torch {torch} was built against NumPy 1.x and numpy is {numpy}: tensor↔NumPy conversion (torch.from_numpy, .numpy(), data loaders) fails with "A module that was compiled using NumPy 1.x cannot be run in NumPy 2"',
    expected: 'numpy < 2 with this torch, or torch ≥ 2.3',
    sources: [
      'pytorch/pytorch#107302 (support matrix: torch releases built before NumPy 2 convert to and from NumPy only with numpy < 2)',
      'pytorch/vision#8460: PyTorch added NumPy 2.0 support in 2.3.0',
    ],
  },
  {
    id: 'te-torch-abi',
    level: 'fail',
    when: [[{ importError: 'transformerEngine', matches: 'undefined symbol' }]],
    says: 'TransformerEngine {transformerEngine} does not load with torch {torch}: its torch extension was built against another torch ({importError:transformerEngine})',
    expected: 'a TransformerEngine built for torch {torch} (rebuild it, or install the torch it was built for)',
    sources: [
      'NVIDIA/TransformerEngine#1684 (TE 2.1.0 with torch 2.5.1: `undefined symbol` on `from transformer_engine import pytorch`), NVIDIA/TransformerEngine#1192',
      'NVIDIA/TransformerEngine 3cd6870 (v2.4.0) transformer_engine/__init__.py: `import transformer_engine` swallows the ImportError of its pytorch module, so the preflight imports transformer_engine.pytorch',
    ],
  },
  {
    id: 'flash-attn-torch-abi',
    level: 'fail',
    when: [[{ importError: 'flashAttn', matches: 'undefined symbol' }]],
    says: 'flash-attn {flashAttn} does not load with torch {torch}: flash_attn_2_cuda was built against another torch ({importError:flashAttn})',
    expected: 'a flash-attn wheel built for torch {torch}, or one built from source against it',
    sources: [
      'Dao-AILab/flash-attention#931 (flash-attn 2.5.7/2.5.8 wheels with torch 2.2.0 and 2.3.0: `undefined symbol: _ZN3c104cuda9SetDeviceEi`; the maintainer: "Wheels are built for torch 2.2.2 and torch 2.3.0")',
      'Dao-AILab/flash-attention#919, #1717 (2.8.0.post2 wheel: undefined symbol where 2.7.4.post1 loaded)',
    ],
  },
  {
    id: 'sgl-kernel-torch-abi',
    level: 'fail',
    when: [[{ importError: 'sglang', matches: 'undefined symbol' }]],
    says: 'SGLang {sglang}\'s kernels (sgl_kernel) do not load with torch {torch}: they were built against another torch ({importError:sglang})',
    expected: 'the torch SGLang {sglang} pins, or an sgl-kernel built for torch {torch}',
    sources: [
      'sgl-project/sglang#5247 ("sgl-kernel needs to be pinned to the PyTorch version used to build it": the PyPI wheel, built with torch 2.5.1, fails with torch 2.7)',
      'sgl-project/sglang#5100 (`common_ops.abi3.so: undefined symbol`)',
    ],
  },
  {
    id: 'te-flash-attn-range',
    level: 'warn',
    when: [
      [{ pkg: 'transformerEngine', spec: '>=2.3.0.dev0, <2.6.0.dev0' }, { pkg: 'flashAttn', spec: '>2.7.4.post1' }],
      [{ pkg: 'transformerEngine', spec: '>=2.6.0.dev0, <2.10.0.dev0' }, { pkg: 'flashAttn', spec: '>2.8.1' }],
      [{ pkg: 'transformerEngine', spec: '>=2.3.0.dev0, <2.10.0.dev0' }, { pkg: 'flashAttn', spec: '<2.1.1' }],
    ],
    says: 'flash-attn {flashAttn} is outside the versions TransformerEngine {transformerEngine} accepts: TE does not use it and runs attention with its other backends',
    expected: 'flash-attn 2.1.1 – 2.7.4.post1 with TE 2.3 – 2.5 (InfiR2 pins 2.7.4.post1 with TE 2.4.0), 2.1.1 – 2.8.1 with TE 2.6 – 2.9',
    sources: [
      'NVIDIA/TransformerEngine 3cd6870 (v2.4.0) transformer_engine/pytorch/attention/dot_product_attention/utils.py:106-108 (version_required 2.1.1, max_version 2.7.4.post1), backends.py:68-77 (outside the range: is_installed stays False); the same range at v2.3 and v2.5, max_version 2.8.1 at v2.6 – v2.9',
    ],
  },
  {
    id: 'te-blockwise-fp8-gpu',
    level: 'fail',
    when: [
      [{ step: 'teFp8' }, { pkg: 'computeCapability', spec: '<9.0' }],
      [{ step: 'teFp8' }, { pkg: 'transformerEngine', spec: '<2.9.0.dev0' }, { pkg: 'computeCapability', spec: '>=10.0' }],
    ],
    says: 'FP8 blockwise training (--fp8-recipe blockwise) needs a Hopper GPU; this GPU is compute capability {computeCapability}',
    expected: 'compute capability 9.x (H100, H200, H800; TE ≥ 2.9 also takes 10.x)',
    sources: [
      'NVIDIA/TransformerEngine 3cd6870 (v2.4.0) transformer_engine/pytorch/fp8.py:53-62 check_fp8_block_scaling_support: "FP8 block scaled GEMM requires Hopper and CUDA >= 12.9." (capability 9.x only up to v2.8; ≥ 9.0 from v2.9)',
      'NVIDIA/Megatron-LM core_v0.14.0 megatron/core/fp8_utils.py:442: --fp8-recipe blockwise is TE\'s Float8BlockScaling',
    ],
  },
  {
    id: 'te-blockwise-fp8-cuda',
    level: 'fail',
    when: [[{ step: 'teFp8' }, { pkg: 'cuda', spec: '<12.9' }]],
    says: 'FP8 blockwise training needs CUDA ≥ 12.9 and torch {torch} is built for CUDA {cuda}',
    expected: 'a torch built for CUDA ≥ 12.9',
    sources: [
      'NVIDIA/TransformerEngine 3cd6870 (v2.4.0) transformer_engine/pytorch/fp8.py:59: `float(torch.version.cuda) >= 12.9`',
      'THUDM/slime#34 (FP8 training in Megatron needs CUDA 12.9); docs/gpu.md',
    ],
  },
  {
    id: 'local-fp8-emulated',
    level: 'warn',
    when: [
      [{ step: 'localFp8Gpu' }, { pkg: 'computeCapability', spec: '<9.0' }],
      [{ step: 'localFp8Gpu' }, { pkg: 'computeCapability', spec: '>=10.0' }],
    ],
    says: 'the reference trainer\'s real FP8 GEMMs need a Hopper GPU; on compute capability {computeCapability} it emulates FP8 (the same numbers, none of the speed)',
    expected: 'compute capability 9.x for real FP8 GEMMs',
    sources: ['trainer/infir2_trainer/fp8_gemm.py: real blockwise FP8 GEMMs need float8 dtypes, torch._scaled_mm, Triton and sm_90; docs/gpu.md'],
  },
  {
    id: 'local-fp8-cublaslt',
    level: 'warn',
    when: [[{ step: 'localFp8Gpu' }, { pkg: 'cublasLt', spec: '<12.9' }]],
    says: 'torch._scaled_mm\'s 1x128 / 128x128 block scaling needs cuBLASLt ≥ 12.9; torch loads cuBLASLt {cublasLt}',
    expected: 'cuBLASLt ≥ 12.9 (a torch built for CUDA ≥ 12.9)',
    sources: ['requirements-gpu.txt and docs/gpu.md: checked on an H100 (driver 580, CUDA 13.0), torch._scaled_mm block scaling needs cuBLASLt >= 12.9'],
  },
];
