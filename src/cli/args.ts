import { parseArgs, type ParseArgsConfig } from 'node:util';
import { UsageError } from '../errors.js';

/** A verb's options, as `util.parseArgs` takes them; each verb exports its own as `OPTIONS` (the main help lists them). */
export type Options = NonNullable<ParseArgsConfig['options']>;

/**
 * `util.parseArgs` in strict mode, with its exceptions turned into one-line usage errors (exit 2).
 * Repeatable options (`--set a=b --set c=d`) are declared with `multiple: true`.
 */
export function parseVerbArgs<O extends Options>(verb: string, argv: string[], options: O, usage: string) {
  try {
    return parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (err) {
    let msg = err instanceof Error ? err.message.split('\n')[0]! : String(err);
    // parseArgs' own wording for `--limit -1` and `--bogus`, made plain.
    const ambiguous = /^Option '(--[\w-]+)[^']*' argument is ambiguous/.exec(msg);
    if (ambiguous) msg = `${ambiguous[1]}: its value starts with '-'; write ${ambiguous[1]}=VALUE`;
    const unknown = /^Unknown option '([^']+)'/.exec(msg);
    if (unknown) msg = `unknown option '${unknown[1]}' (a positional argument that starts with '-' goes after '--')`;
    throw new UsageError([`${verb}: ${msg}`, `usage: ${usage}`]);
  }
}

/** An integer flag in [1, max], or its default when absent; anything else is a usage error. */
export function intFlag(name: string, raw: string | undefined, dflt: number, max = Number.MAX_SAFE_INTEGER): number {
  if (raw === undefined) return dflt;
  const n = Number(raw);
  if (!/^\s*\d+\s*$/.test(raw) || n < 1 || n > max) {
    throw new UsageError(`--${name}: expected a whole number ${max === Number.MAX_SAFE_INTEGER ? '≥ 1' : `from 1 to ${max}`}, got '${raw}'`);
  }
  return n;
}

/** Exactly `n` positionals, or a usage error naming what is missing or extra. */
export function positionals(verb: string, got: string[], names: string[], usage: string): string[] {
  if (got.length < names.length) {
    throw new UsageError([`${verb}: missing <${names[got.length]}>`, `usage: ${usage}`]);
  }
  if (got.length > names.length) {
    throw new UsageError([`${verb}: unexpected argument '${got[names.length]}'`, `usage: ${usage}`]);
  }
  return got;
}
