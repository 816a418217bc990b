/**
 * The names of the preflight's checks, one list for the recipe schema (`software.versions`,
 * `software.skipChecks`), the plan, the preflight and `infir2 doctor`: the packages a step's interpreter is
 * asked about, the system facts that can be pinned like versions, the other checks, and the known-bad
 * combinations (known-bad.ts, by id).
 */
import { KNOWN_BAD } from './known-bad.js';

/** Python packages the preflight reports, by their recipe key. */
export const PACKAGES = ['torch', 'transformerEngine', 'numpy', 'flashAttn', 'megatron', 'slime', 'sglang', 'ray'] as const;
export type Package = (typeof PACKAGES)[number];

/**
 * Facts of the node that read as versions: the CUDA torch was built for (`torch.version.cuda`), the cuBLASLt
 * torch loads, the NVIDIA driver, and the GPUs' compute capability (`9.0` for Hopper).
 */
export const SYSTEM_VERSIONS = ['cuda', 'cublasLt', 'driver', 'computeCapability'] as const;

/** What can be pinned in `software.versions`. */
export const PINNABLE = [...PACKAGES, ...SYSTEM_VERSIONS] as const;
export type Pinnable = (typeof PINNABLE)[number];

/**
 * The other checks: the interpreter starts, the GPUs the step needs are visible, the checkpoint root has room
 * for the plan's checkpoints, the paths the step reads can be read.
 */
export const OTHER_CHECKS = ['python', 'gpu', 'disk', 'paths'] as const;

/** Every check by name: what `software.skipChecks` may name. */
export const CHECK_NAMES: readonly string[] = [...PINNABLE, ...OTHER_CHECKS, ...KNOWN_BAD.map((k) => k.id)];

/** How a package is said to a person: its PyPI or repository name. */
export const PACKAGE_LABEL: Record<Pinnable, string> = {
  torch: 'torch',
  transformerEngine: 'TransformerEngine',
  numpy: 'numpy',
  flashAttn: 'flash-attn',
  megatron: 'Megatron',
  slime: 'slime',
  sglang: 'SGLang',
  ray: 'Ray',
  cuda: 'CUDA',
  cublasLt: 'cuBLASLt',
  driver: 'NVIDIA driver',
  computeCapability: 'compute capability',
};
