/**
 * Problems found in a recipe, each tied to the YAML path it is about. The CLI prints one line per issue:
 * `error: sft.0.lr: must be greater than 0`, `warning: cpt.saveInterval: ...` or `hint: rl.saveInterval: ...`.
 * Errors stop the recipe; a warning is probably a mistake; a hint is advice (a cheaper setting, say).
 */
export type Level = 'error' | 'warning' | 'hint';

export interface Issue {
  level: Level;
  /** Dotted YAML path (`sft.0.lr`), a file position (`recipe.yaml:3:7`) or a `--set` argument. */
  path: string;
  message: string;
}

export const error = (path: string, message: string): Issue => ({ level: 'error', path, message });
export const warning = (path: string, message: string): Issue => ({ level: 'warning', path, message });
export const hint = (path: string, message: string): Issue => ({ level: 'hint', path, message });

/** `sft.0.lr` from `['sft', 0, 'lr']`; the recipe itself is `(recipe)`. */
export function dotted(path: readonly PropertyKey[]): string {
  return path.length === 0 ? '(recipe)' : path.map(String).join('.');
}

export function formatIssue(i: Issue): string {
  return `${i.level}: ${i.path}: ${i.message}`;
}

/** The recipe cannot be used; `issues` holds every error found (and the warnings found alongside). */
export class RecipeError extends Error {
  readonly issues: Issue[];
  constructor(issues: Issue[]) {
    const errors = issues.filter((i) => i.level === 'error');
    super(errors.map(formatIssue).join('\n') || 'invalid recipe');
    this.name = 'RecipeError';
    this.issues = issues;
  }
}

/** A short, quoted rendering of a user's value for messages. */
export function show(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (typeof value === 'string') return `'${value.length > 60 ? value.slice(0, 57) + '...' : value}'`;
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  return String(value);
}
