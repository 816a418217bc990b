/**
 * Raw recipe data → a typed Recipe, or one issue per problem with its YAML path and a message that says what
 * is expected. zod's issues are reworded here so that every message reads the same way.
 */
import type { z } from 'zod';
import { dotted, error, show, type Issue } from './issues.js';
import { objectKeys, schemaAt } from './schema-walk.js';
import { recipeSchema, type Recipe } from './schema.js';
import { didYouMean } from './suggest.js';

type ZodIssue = z.core.$ZodIssue;

const TYPE_NAMES: Record<string, string> = {
  number: 'a number',
  int: 'a whole number',
  string: 'a string',
  boolean: 'true or false',
  object: 'a mapping',
  array: 'a list',
  record: 'a mapping',
  null: 'null',
};

/** zod's own messages start like this; anything else was written in the schema and is kept as it is. */
const ZOD_DEFAULT = /^(Invalid|Too (small|big)|Unrecognized|Number must)/;

function describeBound(i: ZodIssue & { code: 'too_small' | 'too_big' }): string {
  const cmp = i.code === 'too_small' ? (i.inclusive ? 'at least' : 'more than') : i.inclusive ? 'at most' : 'less than';
  const n = String(i.code === 'too_small' ? i.minimum : i.maximum);
  if (i.origin === 'array') return `expected ${cmp} ${n} item(s)`;
  if (i.origin === 'string') return i.code === 'too_small' && n === '1' ? 'must not be empty' : `expected ${cmp} ${n} characters`;
  return `must be ${cmp} ${n}`;
}

function reword(i: ZodIssue): Issue[] {
  const path = dotted(i.path);
  const input = (i as { input?: unknown }).input;
  const custom = !ZOD_DEFAULT.test(i.message);
  switch (i.code) {
    case 'unrecognized_keys': {
      const known = objectKeys(schemaAt(recipeSchema, i.path)) ?? [];
      return i.keys.map((k) =>
        error(dotted([...i.path, k]), `unknown key${didYouMean(k, known) || `; expected one of: ${known.join(', ')}`}`),
      );
    }
    case 'invalid_type': {
      const expected = TYPE_NAMES[i.expected] ?? i.expected;
      if (input === undefined) return [error(path, `required: expected ${expected}`)];
      if (custom) return [error(path, `${i.message}, got ${show(input)}`)];
      return [error(path, `expected ${expected}, got ${show(input)}`)];
    }
    case 'invalid_value': {
      const values = i.values.map(String);
      const hint = typeof input === 'string' ? didYouMean(input, values) : '';
      return [error(path, `expected one of ${values.join(', ')}; got ${show(input)}${hint}`)];
    }
    case 'too_small':
    case 'too_big':
      return [error(path, `${custom ? i.message : describeBound(i)}, got ${Array.isArray(input) ? `${input.length} item(s)` : show(input)}`)];
    case 'invalid_key': {
      const inner = i.issues[0];
      const why = inner && !ZOD_DEFAULT.test(inner.message) ? inner.message : 'invalid name';
      return [error(path, `invalid name ${show(input)}: ${why}`)];
    }
    case 'invalid_format':
    case 'invalid_union':
    case 'custom':
    default:
      return [error(path, custom ? `${i.message}, got ${show(input)}` : `invalid value ${show(input)}`)];
  }
}

export type ParseResult = { ok: true; recipe: Recipe } | { ok: false; issues: Issue[] };

export function parseRecipe(raw: unknown): ParseResult {
  const r = recipeSchema.safeParse(raw, { reportInput: true });
  if (r.success) return { ok: true, recipe: r.data };
  return { ok: false, issues: r.error.issues.flatMap(reword) };
}
