/**
 * Has the recipe a run started from changed since? `run` and `fork` record where the recipe came from (the
 * file or preset, the `--set` overrides, the directory they were typed in) as `<run dir>/recipe-source.json`,
 * beside the resolved `recipe.json`. `resume` reads the source again the same way and, when it now resolves to
 * something else, says which keys differ: the run itself always goes on with its recorded plan.
 */
import { existsSync, readFileSync } from 'node:fs';
import { isAbsolute, join, relative } from 'node:path';
import { RecipeError } from '../recipe/issues.js';
import { loadRecipe } from '../recipe/load.js';
import { shownChange } from '../plan/notify-spec.js';
import { describeChanges, diffValues } from '../util/json-diff.js';

export const ORIGIN_FILE = 'recipe-source.json';
export const RECIPE_FILE = 'recipe.json';

/** What `run` (or `fork`) resolved the recipe from. */
export interface RecipeOrigin {
  /** The absolute path of the file read, or `preset:<name>`. */
  source: string;
  /** The `--set` overrides, as typed. */
  sets: string[];
  /** The directory relative `--set` paths resolved against. */
  cwd: string;
}

function readOrigin(runDir: string): RecipeOrigin | null {
  const file = join(runDir, ORIGIN_FILE);
  if (!existsSync(file)) return null;
  const o = JSON.parse(readFileSync(file, 'utf8')) as Partial<RecipeOrigin>;
  if (typeof o.source !== 'string' || typeof o.cwd !== 'string' || !Array.isArray(o.sets)) throw new Error(`${file}: not a recipe source record`);
  return { source: o.source, sets: o.sets.map(String), cwd: o.cwd };
}

/** `recipes/tiny.yaml` under the current directory, else the absolute path; `the tiny preset`. */
export function sourceName(source: string, cwd = process.cwd()): string {
  if (source.startsWith('preset:')) return `the ${source.slice('preset:'.length)} preset`;
  const rel = relative(cwd, source);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : source;
}

/**
 * One `note: …` line when the run's recipe source now resolves to another recipe than the one it recorded (or
 * can no longer be read); null when it resolves to the same, or the run recorded no source (started before
 * runs recorded it, or not through `run`/`fork`).
 */
export async function recipeChangeNote(runDir: string, cwd = process.cwd()): Promise<string | null> {
  let origin: RecipeOrigin | null;
  let recorded: unknown;
  try {
    origin = readOrigin(runDir);
    if (!origin) return null;
    const recipeFile = join(runDir, RECIPE_FILE);
    if (!existsSync(recipeFile)) return `note: ${recipeFile} is missing; cannot tell whether the recipe changed since this run started`;
    recorded = JSON.parse(readFileSync(recipeFile, 'utf8'));
  } catch (err) {
    return `note: cannot tell whether the recipe changed since this run started: ${err instanceof Error ? err.message : String(err)}`;
  }
  const name = sourceName(origin.source, cwd);
  const ref = origin.source.startsWith('preset:') ? origin.source.slice('preset:'.length) : origin.source;
  const going = 'resuming with the recorded recipe';
  let now: unknown;
  try {
    // As `run` read it: the same file, the same overrides, relative paths against the same directory.
    const loaded = await loadRecipe(ref, { sets: origin.sets, cwd: origin.cwd });
    now = JSON.parse(JSON.stringify(loaded.recipe));
  } catch (err) {
    if (!(err instanceof RecipeError)) return `note: cannot read ${name} again (${err instanceof Error ? err.message : String(err)}); ${going}`;
    const first = err.issues.find((i) => i.level === 'error') ?? err.issues[0];
    if (first?.message === 'no such file') return `note: ${name}, the recipe this run started from, is gone; ${going}`;
    const more = err.issues.length > 1 ? ` and ${err.issues.length - 1} more` : '';
    const where = first?.path.startsWith(origin.source) ? name + first.path.slice(origin.source.length) : first?.path;
    return `note: ${name} no longer loads (${first ? `${where}: ${first.message}` : 'invalid'}${more}); ${going}`;
  }
  const changes = diffValues(recorded, now);
  if (changes.length === 0) return null;
  const runIt = origin.source.startsWith('preset:') ? ref : name;
  return (
    `note: ${name} changed since this run started; ${going} (changed: ${describeChanges(changes.map(shownChange))}). ` +
    `To train with the new recipe, start a run (\`infir2 run ${runIt}\`) or fork this one with --set (\`infir2 fork\`).`
  );
}
