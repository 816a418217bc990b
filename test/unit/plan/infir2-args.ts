/**
 * Reading the hand-written `.args` fixtures and comparing argument lists flag by flag, for the InfiR2
 * reproduction tests.
 */
import { readFileSync } from 'node:fs';

export const FIXTURES = new URL('../../fixtures/recipes/infir2/', import.meta.url);

export function fixtureText(name: string): string {
  return readFileSync(new URL(name, FIXTURES), 'utf8');
}

/** Replace `$NAME` placeholders; an unknown one is a test bug. */
export function substitute(text: string, vars: Record<string, string>): string {
  return text.replace(/\$([A-Z_0-9]+)/g, (_, name: string) => {
    if (!(name in vars)) throw new Error(`fixture placeholder $${name} has no value`);
    return vars[name]!;
  });
}

/** The tokens of an `.args` fixture (comments dropped), placeholders filled in. */
export function readArgs(name: string, vars: Record<string, string>): string[] {
  const lines = fixtureText(name)
    .split('\n')
    .filter((l) => l.trim() && !l.trimStart().startsWith('#'));
  return substitute(lines.join(' '), vars).split(/\s+/).filter(Boolean);
}

/** KEY=VALUE lines of an `.env` fixture. */
export function readEnv(name: string, vars: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of fixtureText(name).split('\n')) {
    if (!line.trim() || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    env[line.slice(0, eq)] = substitute(line.slice(eq + 1), vars);
  }
  return env;
}

/** Flag → its occurrences, each the list of values that follow it (argparse's view of an argv). */
export type Flags = Map<string, string[][]>;

export function flags(tokens: string[]): Flags {
  const out: Flags = new Map();
  let current: string[] | undefined;
  for (const t of tokens) {
    if (t.startsWith('--')) {
      current = [];
      out.set(t, [...(out.get(t) ?? []), current]);
    } else if (current) current.push(t);
    else throw new Error(`value '${t}' before any flag`);
  }
  return out;
}

/** argparse reads `1e-4` and `0.0001` (or `0.00` and `0`) the same. */
const sameValue = (a: string, b: string) => a === b || (a.trim() !== '' && !Number.isNaN(Number(a)) && Number(a) === Number(b));
const sameOccurrences = (a: string[][], b: string[][]) =>
  a.length === b.length && a.every((v, i) => v.length === b[i]!.length && v.every((x, j) => sameValue(x, b[i]![j]!)));

export interface Difference {
  flag: string;
  kind: 'missing' | 'extra' | 'changed';
  expected?: string[][];
  actual?: string[][];
}

/** How `actual` differs from `expected`, flag by flag. */
export function diffFlags(expected: Flags, actual: Flags): Difference[] {
  const out: Difference[] = [];
  for (const [flag, exp] of expected) {
    const act = actual.get(flag);
    if (!act) out.push({ flag, kind: 'missing', expected: exp });
    else if (!sameOccurrences(exp, act)) out.push({ flag, kind: 'changed', expected: exp, actual: act });
  }
  for (const [flag, act] of actual) if (!expected.has(flag)) out.push({ flag, kind: 'extra', actual: act });
  return out;
}
