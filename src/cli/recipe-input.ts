/**
 * From what a user typed (a recipe file or preset name, `--set` overrides, a run id) to a compiled Plan, for
 * every verb that takes a recipe (`validate`, `plan`, `run`). Recipe problems become a UsageError (exit 2)
 * with one `<yaml.path>: <problem>` line each; warnings go to `onWarning` (stderr by default).
 */
import { compilePlan, type CompileOptions } from '../plan/compile.js';
import type { Fork } from '../plan/cpt-lineage.js';
import type { Plan } from '../plan/types.js';
import { formatIssue, RecipeError, type Issue } from '../recipe/issues.js';
import { loadRecipe, type LoadedRecipe } from '../recipe/load.js';
import { UsageError } from '../errors.js';

export interface RecipeInputOptions {
  sets?: string[];
  /** Default: a timestamp id (`20261122-031502`). */
  runId?: string;
  cwd?: string;
  fork?: Fork;
  /** Interpreter for the local trainer (default `<project>/.venv/bin/python`). */
  python?: string;
  projectRoot?: string;
  /** Receives `warning: <path>: <message>` lines; default: written to stderr. */
  onWarning?: (line: string) => void;
}

/** A sortable, readable run id: `20261122-031502` (local time). */
export function defaultRunId(now = new Date()): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${now.getFullYear()}${p(now.getMonth() + 1)}${p(now.getDate())}-${p(now.getHours())}${p(now.getMinutes())}${p(now.getSeconds())}`;
}

const toUsage = (issues: Issue[], warn: (line: string) => void) => {
  for (const w of issues.filter((i) => i.level === 'warning')) warn(formatIssue(w));
  return new UsageError(issues.filter((i) => i.level === 'error').map((i) => `${i.path}: ${i.message}`));
};

const stderrWarning = (line: string) => process.stderr.write(`${line}\n`);

export interface CompiledRecipe extends LoadedRecipe {
  plan: Plan;
}

/** Load, validate, lint and compile; warnings are reported through `onWarning`. */
export async function loadCompiled(ref: string, opts: RecipeInputOptions = {}): Promise<CompiledRecipe> {
  const warn = opts.onWarning ?? stderrWarning;
  try {
    const loaded = await loadRecipe(ref, { sets: opts.sets ?? [], cwd: opts.cwd });
    const compileOpts: CompileOptions = {
      runId: opts.runId ?? defaultRunId(),
      ...(opts.projectRoot ? { projectRoot: opts.projectRoot } : {}),
      ...(opts.python ? { python: opts.python } : {}),
      ...(opts.fork ? { fork: opts.fork } : {}),
    };
    const plan = compilePlan(loaded.recipe, compileOpts);
    for (const w of loaded.warnings) warn(formatIssue(w));
    return { ...loaded, plan };
  } catch (err) {
    if (err instanceof RecipeError) throw toUsage(err.issues, warn);
    throw err;
  }
}

/** The compiled Plan of a recipe (what `infir2 run` starts). */
export async function loadPlan(ref: string, opts: RecipeInputOptions = {}): Promise<Plan> {
  return (await loadCompiled(ref, opts)).plan;
}
