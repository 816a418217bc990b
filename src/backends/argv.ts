/** Small helpers for building argv arrays that read like the shell scripts they reproduce. */

/**
 * Numbers as a script would write them: `1e-4`, not `0.0001` (argparse reads both the same; the plan stays
 * comparable with the InfiR2 scripts by eye).
 */
export function num(x: number): string {
  if (Number.isInteger(x)) return String(x);
  return Math.abs(x) < 1e-3 ? x.toExponential() : String(x);
}

/** `[flag, value]`, or nothing when the value is undefined. */
export function opt(flag: string, value: string | number | undefined | null): string[] {
  if (value === undefined || value === null) return [];
  return [flag, typeof value === 'number' ? num(value) : value];
}

/** The flags when `cond` holds, otherwise nothing. */
export function when(cond: boolean | undefined, ...flags: string[]): string[] {
  return cond ? flags : [];
}

export { iterDirName } from '../plan/types.js';
