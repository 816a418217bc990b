/**
 * Field types shared by the recipe schema: counts, durations, slugs and paths. Each carries the one error
 * message a user sees when the value is wrong, and the type name the recipe reference shows, so `schema.ts`
 * reads as a list of fields.
 */
import { z } from 'zod';

/**
 * Marks are keyed by a schema's definition object, not by the schema instance: `.describe()` returns a clone
 * that shares the definition, so a described `path()` is still a path.
 */
const defOf = (s: z.ZodType): object => (s as unknown as { _zod: { def: object } })._zod.def;

const TYPE_NAMES = new WeakMap<object, string>();
const named = <T extends z.ZodType>(s: T, typeName: string): T => {
  TYPE_NAMES.set(defOf(s), typeName);
  return s;
};
/** The reference's name for a field type made here (`whole number ≥ 1`, `duration`…), if it is one. */
export const fieldTypeName = (s: z.ZodType): string | undefined => TYPE_NAMES.get(defOf(s));

/** A whole number ≥ 1 (iterations, batch sizes, node counts). */
export const count = () =>
  named(z.number().int({ error: 'expected a whole number' }).min(1, { error: 'must be at least 1' }), 'whole number ≥ 1');

/** A whole number ≥ 0 (warmup iterations, GPUs of a CPU-only pool). */
export const natural = () =>
  named(z.number().int({ error: 'expected a whole number' }).min(0, { error: 'must be 0 or more' }), 'whole number ≥ 0');

export const positive = () => named(z.number().positive({ error: 'must be greater than 0' }), 'number > 0');
export const nonNegative = () => named(z.number().min(0, { error: 'must be 0 or more' }), 'number ≥ 0');
export const unitInterval = () =>
  named(
    z.number().min(0, { error: 'must be between 0 and 1' }).max(1, { error: 'must be between 0 and 1' }),
    'number in [0, 1]',
  );

/** A TCP port a server listens on (above the privileged range). */
export const port = () =>
  named(z.number().int({ error: 'expected a whole number' }).min(1024, { error: 'must be 1024 or more' }).max(65000, { error: 'must be 65000 or less' }), 'port (1024–65000)');

/**
 * Recipe names and run ids become Temporal workflow ids and directory names, so they are slugs: nothing that
 * could climb out of the run directory (`..`, `/`) or need quoting.
 */
export const SLUG_RE = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
export const SLUG_HINT = 'lowercase letters, digits and single dashes (it names workflows and directories)';
export const slug = () =>
  named(
    z.string().max(63, { error: 'at most 63 characters' }).regex(SLUG_RE, { error: `expected a slug: ${SLUG_HINT}` }),
    'slug',
  );

/** Pool and benchmark names: they end up in step ids (`eval.<benchmark>`) and directory names. */
export const NAME_RE = /^[a-z0-9][a-z0-9_-]*$/;
export const name = () =>
  named(
    z.string().max(63, { error: 'at most 63 characters' }).regex(NAME_RE, { error: 'expected lowercase letters, digits, `_` or `-`' }),
    'name',
  );

/** Environment variable names, as POSIX shells accept them. */
export const envName = () =>
  named(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: 'expected an environment variable name' }), 'variable name');

/**
 * Paths: the loader walks the schema to find them and resolves relative values against the file that wrote
 * them (a user's YAML: its directory; a preset: the project root).
 */
const PATHS = new WeakSet<object>();
export const path = () => {
  const s = named(z.string().min(1, { error: 'expected a path' }), 'path');
  PATHS.add(defOf(s));
  return s;
};
export const isPathSchema = (s: z.ZodType): boolean => PATHS.has(defOf(s));

const DURATION_RE = /^(\d+(?:\.\d+)?)\s*(s|m|h|d)$/;
const UNIT_SEC: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/** Seconds, written as a number or as `90s`, `30m`, `6h`, `14d`. The parsed value is always seconds. */
export const duration = () =>
  named(
    z
      .union([positive(), z.string().regex(DURATION_RE, { error: 'expected seconds or a duration like 30m, 6h, 14d' })], {
        error: 'expected seconds or a duration like 30m, 6h, 14d',
      })
      .transform((v, ctx) => {
        if (typeof v === 'number') return v;
        const m = DURATION_RE.exec(v)!;
        const sec = Math.round(Number(m[1]) * UNIT_SEC[m[2]!]!);
        // `0.2s` would round to nothing: a zero stall timeout or iteration time is never meant.
        if (sec === 0) ctx.issues.push({ code: 'custom', input: v, message: 'must be at least 1s; write shorter times as a number of seconds (0.25)' });
        return sec;
      }),
    'duration',
  );
