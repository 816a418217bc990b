/**
 * Field types shared by the recipe schema: counts, durations, slugs and paths. Each carries the one error
 * message a user sees when the value is wrong, so `schema.ts` reads as a list of fields.
 */
import { z } from 'zod';

/** A whole number ≥ 1 (iterations, batch sizes, node counts). */
export const count = () => z.number().int({ error: 'expected a whole number' }).min(1, { error: 'must be at least 1' });

/** A whole number ≥ 0 (warmup iterations, GPUs of a CPU-only pool). */
export const natural = () => z.number().int({ error: 'expected a whole number' }).min(0, { error: 'must be 0 or more' });

export const positive = () => z.number().positive({ error: 'must be greater than 0' });
export const nonNegative = () => z.number().min(0, { error: 'must be 0 or more' });
export const unitInterval = () => z.number().min(0, { error: 'must be between 0 and 1' }).max(1, { error: 'must be between 0 and 1' });

/**
 * Recipe names and run ids become Temporal workflow ids and directory names, so they are slugs: nothing that
 * could climb out of the run directory (`..`, `/`) or need quoting.
 */
export const SLUG_RE = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
export const SLUG_HINT = 'lowercase letters, digits and single dashes (it names workflows and directories)';
export const slug = () =>
  z.string().max(63, { error: 'at most 63 characters' }).regex(SLUG_RE, { error: `expected a slug: ${SLUG_HINT}` });

/** Pool and benchmark names: they end up in step ids (`eval.<benchmark>`) and directory names. */
export const NAME_RE = /^[a-z0-9][a-z0-9_-]*$/;
export const name = () =>
  z.string().max(63, { error: 'at most 63 characters' }).regex(NAME_RE, { error: 'expected lowercase letters, digits, `_` or `-`' });

/** Environment variable names, as POSIX shells accept them. */
export const envName = () => z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: 'expected an environment variable name' });

/**
 * Schemas whose values are filesystem paths. The loader walks the schema to find them and resolves relative
 * values against the file that wrote them (a user's YAML: its directory; a preset: the project root).
 */
export const PATH_SCHEMAS = new WeakSet<z.ZodType>();
export const path = () => {
  const s = z.string().min(1, { error: 'expected a path' });
  PATH_SCHEMAS.add(s);
  return s;
};

const DURATION_RE = /^(\d+(?:\.\d+)?)\s*(s|m|h|d)$/;
const UNIT_SEC: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/** Seconds, written as a number or as `90s`, `30m`, `6h`, `14d`. The parsed value is always seconds. */
export const duration = () =>
  z
    .union([positive(), z.string().regex(DURATION_RE, { error: 'expected seconds or a duration like 30m, 6h, 14d' })], {
      error: 'expected seconds or a duration like 30m, 6h, 14d',
    })
    .transform((v) => {
      if (typeof v === 'number') return v;
      const m = DURATION_RE.exec(v)!;
      return Math.round(Number(m[1]) * UNIT_SEC[m[2]!]!);
    });
