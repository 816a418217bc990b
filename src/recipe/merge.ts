/**
 * Layering a recipe over a preset, and `--set key.path=value` over both.
 *
 * Mappings merge key by key; lists and scalars replace; `null` removes a key (so a recipe can drop a stage or
 * a benchmark that its preset has: `rl: null`).
 */
import { parseDocument } from 'yaml';

export type Raw = Record<string, unknown>;

export const isMapping = (v: unknown): v is Raw => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Keys that no recipe has and that reach JavaScript's object prototype when assigned (`o['__proto__'] = v` sets
 * the prototype; a `--set pools.__proto__.x=1` walked into `Object.prototype` and set `x` on every object of the
 * process). Refused wherever a user names a key: the recipe file, `--set` paths and `--set` values.
 */
export const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

export const FORBIDDEN_KEY_MESSAGE = 'key not allowed: __proto__, constructor and prototype name no recipe key (they would reach JavaScript\'s object prototype)';

/** The paths (`cpt.env.__proto__`) of every forbidden key in parsed YAML/JSON data, depth first. */
export function forbiddenKeyPaths(value: unknown, at: (string | number)[] = []): (string | number)[][] {
  if (Array.isArray(value)) return value.flatMap((v, i) => forbiddenKeyPaths(v, [...at, i]));
  if (!isMapping(value)) return [];
  return Object.keys(value).flatMap((k) => (FORBIDDEN_KEYS.has(k) ? [[...at, k]] : forbiddenKeyPaths(value[k], [...at, k])));
}

/** An own property of `o`, never one inherited from its prototype (`o.constructor` is Object for any `{}`). */
const own = (o: Raw, k: string): unknown => (Object.hasOwn(o, k) ? o[k] : undefined);

export function deepMerge(base: unknown, over: unknown): unknown {
  if (!isMapping(base) || !isMapping(over)) return over === undefined ? base : over;
  const out: Raw = { ...base };
  for (const [k, v] of Object.entries(over)) {
    // Refused with a line where the user wrote it (load.ts); meeting one here is a bug, not a silent drop.
    if (FORBIDDEN_KEYS.has(k)) throw new Error(`deepMerge: forbidden key '${k}'`);
    if (v === null) delete out[k];
    else out[k] = deepMerge(own(base, k), v);
  }
  return out;
}

/** One `--set` argument, parsed: the key path (list indexes as numbers) and the YAML value. */
export interface Assignment {
  text: string;
  path: (string | number)[];
  value: unknown;
}

const KEY_RE = /^[A-Za-z0-9_-]+$/;

/** `sft.0.lr=1e-5` → `{ path: ['sft', 0, 'lr'], value: 0.00001 }`, or a message saying what is wrong. */
export function parseAssignment(text: string): Assignment | string {
  const eq = text.indexOf('=');
  if (eq <= 0) return `expected key.path=value (e.g. cpt.iterations=1000)`;
  const key = text.slice(0, eq);
  const segments = key.split('.');
  const bad = segments.find((s) => !KEY_RE.test(s));
  if (bad !== undefined) return bad === '' ? `empty key segment in '${key}'` : `invalid key segment '${bad}' in '${key}'`;
  const forbidden = segments.findIndex((s) => FORBIDDEN_KEYS.has(s));
  if (forbidden >= 0) return `${segments.slice(0, forbidden + 1).join('.')}: ${FORBIDDEN_KEY_MESSAGE}`;
  const doc = parseDocument(text.slice(eq + 1));
  if (doc.errors.length > 0) return `the value is not valid YAML (${doc.errors[0]!.message.split('\n')[0]})`;
  let value: unknown;
  try {
    value = doc.toJS();
  } catch (err) {
    return `the value is not valid YAML (${(err as Error).message})`;
  }
  const inValue = forbiddenKeyPaths(value)[0];
  if (inValue) return `${[...segments, ...inValue].join('.')}: ${FORBIDDEN_KEY_MESSAGE}`;
  return { text, path: segments.map((s) => (/^\d+$/.test(s) ? Number(s) : s)), value };
}

/**
 * Apply an assignment to `target` (mutated). Missing mappings on the way are created; a list index must
 * exist or be the next one; `null` deletes. Returns a message when the path cannot be followed.
 */
export function assign(target: Raw, a: Assignment): string | undefined {
  let node: unknown = target;
  for (let i = 0; i < a.path.length; i++) {
    const seg = a.path[i]!;
    const last = i === a.path.length - 1;
    const where = a.path.slice(0, i).join('.') || '(recipe)';
    if (Array.isArray(node)) {
      if (typeof seg !== 'number') return `${where} is a list: index it with a number, not '${seg}'`;
      if (seg > node.length) return `${where} has ${node.length} item(s): index ${seg} is out of range`;
      if (last) {
        if (a.value === null) node.splice(seg, 1);
        else node[seg] = a.value;
        return undefined;
      }
      if (node[seg] === undefined || node[seg] === null) node[seg] = {};
      node = node[seg];
    } else if (isMapping(node)) {
      const k = String(seg);
      if (FORBIDDEN_KEYS.has(k)) return `${a.path.slice(0, i + 1).join('.')}: ${FORBIDDEN_KEY_MESSAGE}`;
      if (last) {
        if (a.value === null) delete node[k];
        else node[k] = a.value;
        return undefined;
      }
      // Only the mapping's own keys are walked into: an inherited one (`toString`) is no part of the recipe.
      if (own(node, k) === undefined || node[k] === null) node[k] = {};
      node = node[k];
    } else {
      return `${where} is ${node === undefined ? 'not set' : 'a ' + typeof node}, not a mapping or a list`;
    }
  }
  return undefined;
}
