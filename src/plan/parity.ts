/**
 * `infir2 parity`'s plan: a short prefix of a recipe's CPT run in FP8 and in BF16, each with K seeds, as one run
 * (one recipeRun over independent lines of steps, in parallel where the pool has slots). Each variant is the
 * recipe compiled with its precision and seed, its schedule unchanged (the same warmup and the same
 * `--train-iters` offset, so its first N iterations are the real run's first N), and only the phases before the
 * decay kept, the stable phase ending at N. Its steps are renamed `<variant>.<step>` and its files live under
 * `<run>/variants/<variant>/`. Pure: compiled plans in, one plan out.
 */
import { BOTH_PRECISIONS, type Plan, type Precision } from './types.js';

export const PARITY_FILE = 'parity.json';

export interface ParityVariant {
  /** `bf16-s1234`: the step ids' prefix and the variant's directory under `<run>/variants/`. */
  name: string;
  precision: Precision;
  seed: number;
}

/** What `parity.json` records: enough to judge the run again from its files (`infir2 report`). */
export interface ParitySpec {
  stage: 'cpt';
  iterations: number;
  variants: ParityVariant[];
}

/** BF16 first (the reference and its noise floor), then FP8, each over the same seeds. */
export function parityVariants(seeds: number[]): ParityVariant[] {
  return (['bf16', 'fp8'] as const).flatMap((precision) => seeds.map((seed) => ({ name: `${precision}-s${seed}`, precision, seed })));
}

/** The step a variant's prefix ends with: its verdict reads this step's series. */
export const PREFIX_END = 'cpt.stable';

export function mergeParityPlans(runId: string, runDir: string, parts: { variant: ParityVariant; plan: Plan }[]): Plan {
  const first = parts[0]!.plan;
  const steps = parts.flatMap(({ variant, plan }) => {
    const kept = plan.steps.filter((s) => s.kind === 'cpt' && s.id !== 'cpt.decay');
    const ids = new Set(kept.map((s) => s.id));
    return kept.map((s) => ({
      ...s,
      id: `${variant.name}.${s.id}`,
      dependsOn: s.dependsOn.filter((d) => ids.has(d)).map((d) => `${variant.name}.${d}`),
      summary: `${variant.precision.toUpperCase()}, seed ${variant.seed}: ${s.summary}`,
    }));
  });
  // Both: `list`, the Web UI's TrainPrecision and the report say so (not the first variant's compile).
  return { ...first, runId, runDir, precision: BOTH_PRECISIONS, steps };
}
