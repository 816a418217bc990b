/**
 * Reading a recipe: a YAML file or a preset name, layered over its preset, with `--set` overrides, relative
 * paths made absolute, validated and linted. This is the only recipe code that touches the filesystem.
 */
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { parseDocument } from 'yaml';
import { dotted, error, RecipeError, warning, type Issue } from './issues.js';
import { lintRecipe } from './lint.js';
import { assign, deepMerge, FORBIDDEN_KEY_MESSAGE, forbiddenKeyPaths, isMapping, parseAssignment, type Assignment, type Raw } from './merge.js';
import { parseRecipe } from './parse.js';
import { PRESET_NAMES, PRESETS } from './presets/index.js';
import { projectRoot } from './project-root.js';
import { resolvePaths, schemaAt } from './schema-walk.js';
import { recipeSchema, type Recipe } from './schema.js';
import { didYouMean } from './suggest.js';

/** Recipes are hand-written configuration; anything bigger is a mistake (a dataset passed by accident). */
export const MAX_RECIPE_BYTES = 1024 * 1024;
/** A local `.jsonl` up to this size is counted to learn an SFT stage's sample count. */
const MAX_COUNTED_BYTES = 256 * 1024 * 1024;

export interface LoadOptions {
  /** `--set key.path=value` overrides, applied last. */
  sets?: string[];
  /** Directory that relative `--set` paths and recipe paths resolve against (default: process.cwd()). */
  cwd?: string;
}

export interface LoadedRecipe {
  recipe: Recipe;
  /** Lint warnings (errors throw). */
  warnings: Issue[];
  /** The file read, or `preset:<name>`. */
  source: string;
}

/**
 * Load, validate and lint a recipe. Throws RecipeError with every problem found (never a bare exception for
 * anything a user can cause).
 */
export async function loadRecipe(ref: string, opts: LoadOptions = {}): Promise<LoadedRecipe> {
  const cwd = opts.cwd ?? process.cwd();
  const { raw, source, baseDir } = await readSource(ref, cwd);
  const layered = layerPreset(raw, baseDir);

  const setIssues: Issue[] = [];
  const assignments: Assignment[] = [];
  for (const text of opts.sets ?? []) {
    const a = parseAssignment(text);
    const where = `--set ${text}`;
    if (typeof a === 'string') {
      setIssues.push(error(where, a));
      continue;
    }
    const target = schemaAt(recipeSchema, a.path);
    const value = target ? resolvePaths(a.value, target, cwd) : a.value;
    const problem = assign(layered, { ...a, value });
    if (problem) setIssues.push(error(where, problem));
    assignments.push(a);
  }
  if (setIssues.length > 0) throw new RecipeError(setIssues);

  const parsed = parseRecipe(layered);
  if (!parsed.ok) throw new RecipeError(parsed.issues);
  const recipe = parsed.recipe;
  const countIssues = await countSamples(recipe, statedSamples(raw, assignments));
  const issues = [...countIssues, ...lintRecipe(recipe)];
  if (issues.some((i) => i.level === 'error')) throw new RecipeError(issues);
  return { recipe, warnings: issues, source };
}

async function readSource(ref: string, cwd: string): Promise<{ raw: Raw; source: string; baseDir: string }> {
  const file = resolve(cwd, ref);
  const st = await stat(file).catch(() => undefined);
  if (!st) {
    if (ref in PRESETS) return { raw: { preset: ref }, source: `preset:${ref}`, baseDir: projectRoot() };
    const looksLikeFile = /[/\\]|\.ya?ml$/i.test(ref);
    throw new RecipeError([
      error(
        ref,
        looksLikeFile
          ? 'no such file'
          : `neither a file nor a preset${didYouMean(ref, PRESET_NAMES) || `; presets: ${PRESET_NAMES.join(', ')}`}`,
      ),
    ]);
  }
  if (st.isDirectory()) throw new RecipeError([error(ref, 'is a directory; expected a recipe YAML file')]);
  if (!st.isFile()) throw new RecipeError([error(ref, 'is not a regular file')]);
  if (st.size > MAX_RECIPE_BYTES) {
    throw new RecipeError([error(ref, `is ${st.size} bytes; a recipe may be at most ${MAX_RECIPE_BYTES} bytes (1 MiB)`)]);
  }
  const bytes = await readFile(file).catch((err: NodeJS.ErrnoException) => {
    throw new RecipeError([error(ref, `cannot read it (${err.code ?? err.message})`)]);
  });
  return { raw: parseYaml(bytes, ref), source: file, baseDir: dirname(file) };
}

/** YAML text → a mapping, or every syntax problem with its line and column. */
export function parseYaml(bytes: Buffer, name: string): Raw {
  if (bytes.includes(0)) throw new RecipeError([error(name, 'is a binary file; expected a YAML text file')]);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new RecipeError([error(name, 'is not UTF-8 text; expected a YAML text file')]);
  }
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length > 0) {
    throw new RecipeError(
      doc.errors.map((e) => {
        const pos = e.linePos?.[0];
        const msg =
          e.code === 'DUPLICATE_KEY'
            ? 'duplicate key: each key may appear once in a mapping'
            : e.code === 'MULTIPLE_DOCS'
              ? 'a recipe is a single YAML document: remove the second `---`'
              : e.message.split('\n')[0]!;
        return error(pos ? `${name}:${pos.line}:${pos.col}` : name, msg.replace(/ at line \d+, column \d+:?$/, ''));
      }),
    );
  }
  let raw: unknown;
  try {
    raw = doc.toJS({ maxAliasCount: 100 });
  } catch (err) {
    throw new RecipeError([error(name, `invalid YAML: ${(err as Error).message.split('\n')[0]}`)]);
  }
  if (raw === null || raw === undefined) throw new RecipeError([error(name, 'is empty; expected a mapping with at least `name`')]);
  if (!isMapping(raw)) throw new RecipeError([error(name, `expected a mapping of recipe keys at the top level, got ${Array.isArray(raw) ? 'a list' : 'a scalar'}`)]);
  // yaml keeps `__proto__:` as an own key; zod's record would then drop it silently (an env entry vanished from
  // the plan) and a merge would set a prototype with it. Refused here, one line per key, before any of that.
  const forbidden = forbiddenKeyPaths(raw);
  if (forbidden.length) throw new RecipeError(forbidden.map((p) => error(dotted(p), FORBIDDEN_KEY_MESSAGE)));
  return raw;
}

/** The recipe over its preset, each with its relative paths resolved against the file that wrote them. */
function layerPreset(raw: Raw, baseDir: string): Raw {
  const own = resolvePaths(raw, recipeSchema, baseDir) as Raw;
  if (raw.preset === undefined) return own;
  if (typeof raw.preset !== 'string') throw new RecipeError([error('preset', `expected a preset name; presets: ${PRESET_NAMES.join(', ')}`)]);
  const preset = PRESETS[raw.preset];
  if (!preset) {
    throw new RecipeError([
      error('preset', `unknown preset '${raw.preset}'${didYouMean(raw.preset, PRESET_NAMES) || `; presets: ${PRESET_NAMES.join(', ')}`}`),
    ]);
  }
  const base = resolvePaths(structuredClone(stripUndefined(preset)), recipeSchema, projectRoot()) as Raw;
  return deepMerge(base, own) as Raw;
}

const stripUndefined = (o: object): Raw => JSON.parse(JSON.stringify(o)) as Raw;

/**
 * SFT step counts depend on the number of rows: count them in a local `.jsonl`. The count wins over the
 * recipe's `samples` (the file is what the trainer reads), with a warning when the user stated another number.
 */
async function countSamples(recipe: Recipe, stated: Set<number>): Promise<Issue[]> {
  const issues: Issue[] = [];
  for (const [i, stage] of (recipe.sft ?? []).entries()) {
    if (!stage.data.endsWith('.jsonl')) continue;
    const st = await stat(stage.data).catch(() => undefined);
    if (!st?.isFile() || st.size > MAX_COUNTED_BYTES) continue;
    const rows = await countLines(stage.data);
    if (stated.has(i) && stage.samples !== undefined && stage.samples !== rows) {
      issues.push(warning(`sft.${i}.samples`, `${stage.samples}, but ${stage.data} has ${rows} rows; using ${rows}`));
    }
    stage.samples = rows;
  }
  return issues;
}

/** SFT stages whose `samples` the user wrote (in the recipe or a --set), as opposed to inherited from a preset. */
function statedSamples(raw: Raw, sets: Assignment[]): Set<number> {
  const out = new Set<number>();
  const fromList = (v: unknown) => Array.isArray(v) && v.forEach((st, i) => isMapping(st) && st.samples !== undefined && out.add(i));
  fromList(raw.sft);
  for (const { path, value } of sets) {
    if (path[0] !== 'sft') continue;
    if (path.length === 1) fromList(value);
    else if (typeof path[1] === 'number' && (path[2] === 'samples' || (path.length === 2 && isMapping(value) && value.samples !== undefined))) out.add(path[1]);
  }
  return out;
}

function countLines(file: string): Promise<number> {
  return new Promise((ok, fail) => {
    let n = 0;
    let midLine = false;
    createReadStream(file)
      .on('data', (chunk) => {
        const buf = chunk as Buffer;
        for (let j = 0; j < buf.length; j++) {
          if (buf[j] === 10) {
            if (midLine) n++;
            midLine = false;
          } else if (buf[j] !== 13 && buf[j] !== 32) midLine = true;
        }
      })
      .on('end', () => ok(n + (midLine ? 1 : 0)))
      .on('error', fail);
  });
}
