/**
 * Walking the zod schema alongside raw (unvalidated) recipe data: the schema knows which keys exist (for "did
 * you mean") and which values are paths (to resolve relative ones against the file that wrote them).
 */
import { homedir } from 'node:os';
import { isAbsolute, resolve } from 'node:path';
import type { z } from 'zod';
import { isPathSchema } from './fields.js';
import { embeddedStateDir, STATE_DIR_VAR } from './project-root.js';

/** The parts of a zod schema's definition the walkers read (zod 4 keeps them in `_zod.def`). */
export type ZodDef = {
  type: string;
  innerType?: z.ZodType;
  in?: z.ZodType;
  shape?: Record<string, z.ZodType>;
  element?: z.ZodType;
  keyType?: z.ZodType;
  valueType?: z.ZodType;
  entries?: Record<string, string>;
  options?: z.ZodType[];
  defaultValue?: unknown;
};
export const zodDef = (s: z.ZodType) => (s as unknown as { _zod: { def: ZodDef } })._zod.def;
const def = zodDef;

/** The schema under optional/nullable/default/prefault/pipe wrappers. */
export function unwrap(s: z.ZodType): z.ZodType {
  for (;;) {
    const d = def(s);
    if (d.innerType) s = d.innerType;
    else if (d.type === 'pipe' && d.in) s = d.in;
    else return s;
  }
}

/** The schema describing the value at `path`, or undefined where the path leaves the schema. */
export function schemaAt(root: z.ZodType, path: readonly PropertyKey[]): z.ZodType | undefined {
  let s: z.ZodType | undefined = unwrap(root);
  for (const key of path) {
    if (!s) return undefined;
    const d = def(s);
    if (d.type === 'object') s = d.shape?.[String(key)];
    else if (d.type === 'array') s = d.element;
    else if (d.type === 'record') s = d.valueType;
    else return undefined;
    if (s) s = unwrap(s);
  }
  return s;
}

/** The keys an object schema accepts (undefined when the schema is not an object). */
export function objectKeys(s: z.ZodType | undefined): string[] | undefined {
  if (!s) return undefined;
  const d = def(unwrap(s));
  return d.type === 'object' && d.shape ? Object.keys(d.shape) : undefined;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * `~/x` → home, `$INFIR2_HOME/x` → the embedded default's state directory (INFIR2_HOME, else `.infir2/` in the
 * checkout), relative → against `baseDir`; absolute paths are left alone.
 */
export function resolvePath(p: string, baseDir: string): string {
  if (p === '~' || p.startsWith('~/')) return resolve(homedir(), p.slice(2));
  if (p === STATE_DIR_VAR || p.startsWith(`${STATE_DIR_VAR}/`)) return resolve(embeddedStateDir(), p.slice(STATE_DIR_VAR.length + 1));
  return isAbsolute(p) ? resolve(p) : resolve(baseDir, p);
}

/**
 * A copy of `raw` in which every string that the schema declares a path is absolute. Values of the wrong
 * type are left as they are for validation to report.
 */
export function resolvePaths(raw: unknown, schema: z.ZodType, baseDir: string): unknown {
  const s = unwrap(schema);
  if (isPathSchema(s)) return typeof raw === 'string' && raw.length > 0 ? resolvePath(raw, baseDir) : raw;
  const d = def(s);
  if (d.type === 'object' && isPlainObject(raw)) {
    return Object.fromEntries(
      Object.entries(raw).map(([k, v]) => [k, d.shape?.[k] ? resolvePaths(v, d.shape[k], baseDir) : v]),
    );
  }
  if (d.type === 'record' && isPlainObject(raw) && d.valueType) {
    return Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, resolvePaths(v, d.valueType!, baseDir)]));
  }
  if (d.type === 'array' && Array.isArray(raw) && d.element) return raw.map((v) => resolvePaths(v, d.element!, baseDir));
  return raw;
}

/** Whether the value at `path` is a filesystem path (so a `--set` value resolves against the cwd). */
export function isPathAt(root: z.ZodType, path: readonly PropertyKey[]): boolean {
  const s = schemaAt(root, path);
  return s !== undefined && isPathSchema(s);
}
