import { parseArgs, type ParseArgsConfig } from 'node:util';
import { UsageError } from './errors.js';

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
    const msg = err instanceof Error ? err.message.split('\n')[0] : String(err);
    throw new UsageError([`${verb}: ${msg}`, `usage: ${usage}`]);
  }
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
