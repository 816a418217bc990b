/** The Plan's preflight part (types.ts holds the rest): what a step's probe checks before its trainer starts (preflight-spec.ts builds it). */
import type { PlanStep } from './types.js';

/**
 * The preflight of a step: its own environment (the trainer's interpreter, `PYTHONPATH` and variables, on every
 * node it uses) asked for the versions of what it imports, its GPUs and the room its checkpoints need, before its
 * trainer starts; checked against the recipe's `software.versions` and the known-bad combinations
 * (recipe/known-bad.ts). Package and check names are the recipe's (recipe/software-checks.ts).
 */
export interface PreflightSpec {
  /**
   * What runs the probe on every node the step uses: `srun … --ntasks-per-node=1` on a slurm pool, with the
   * command's `{attempt}`/`{launch}` placeholders; empty: on the worker's node.
   */
  launch: string[];
  /** The interpreter the trainer runs under. */
  python: string;
  /** A launcher whose interpreter the trainer's is (torchrun's `#!` line, read on the worker); `python` if it names none. */
  via?: string;
  /**
   * The trainer's environment variables where they are not its command's: a Ray job's runtime env (slime). Absent:
   * the step's `command.env`, which the plan does not copy here (a large env would count twice against Temporal's
   * payload limit); `preflightOf` fills it in.
   */
  env?: Record<string, string>;
  /** Put first on the interpreter's `sys.path`, as the trainer's launcher does (a Ray job's working directory). */
  pythonPath: string[];
  /** Packages the step cannot run without: one that is missing or does not import fails it. */
  needs: string[];
  /** Packages it also imports when they are there (an import that fails is a warning). */
  uses: string[];
  /** The recipe's `software.versions`. */
  versions: Record<string, string>;
  /** The recipe's `software.skipChecks`. */
  skip: { check: string; why: string }[];
  /** What the step runs, for the known-bad entries that depend on it: `teFp8`, `localFp8Gpu`. */
  traits: string[];
  /** GPUs per node it needs. */
  gpus: number;
  /** Paths the step reads, by role (its inputs). */
  reads: Record<string, string>;
  /**
   * Where it saves, the plan's estimate of one checkpoint (with optimizer state), and of what the step keeps on
   * disk at most (`bound`, in words); null: it saves no checkpoints.
   */
  saves: { dir: string; checkpointBytes: number; boundBytes: number; bound: string } | null;
}

/** A preflight with the environment its probe runs in: the step's own, unless the plan names another (slime's Ray job). */
export type ResolvedPreflight = PreflightSpec & { env: Record<string, string> };

/** The step's preflight, its environment filled in from the step's command (null: a plan recorded before the preflight). */
export function preflightOf(step: Pick<PlanStep, 'preflight' | 'command'>): ResolvedPreflight | null {
  return step.preflight ? { ...step.preflight, env: step.preflight.env ?? step.command.env } : null;
}
