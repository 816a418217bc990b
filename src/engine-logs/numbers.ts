/**
 * Numbers as the engines print them (Python): `'{:.6E}'.format(x)` → `2.345678E+00`, `NAN`, `INF`; `repr(x)` in
 * slime's dicts → `0.53`, `1e-06`, `nan`, `-inf`, numpy 2's `np.float64(0.5)`. Non-finite values read as absent.
 */

/** One number's text, captured: a decimal or exponent form, or nan/inf in either case with a sign. */
export const NUM = '([-+]?(?:\\d+\\.?\\d*|\\.\\d+)(?:[eE][-+]?\\d+)?|[-+]?(?:[nN][aA][nN]|[iI][nN][fF]))';

/** The finite number `s` says (blanks around it allowed), else undefined: nothing, a word, NaN, inf. */
export function num(s: string | undefined): number | undefined {
  if (s === undefined) return undefined;
  const v = Number(s);
  // Number('') and Number('  ') are 0: a blank is no number.
  return Number.isFinite(v) && (v !== 0 || /\d/.test(s)) ? v : undefined;
}

const DICT_ENTRY = new RegExp(`'([^']+)':\\s*(?:np\\.float(?:64|32)\\()?${NUM}(?=[),}\\s]|$)`, 'g');

/** The finite numeric entries of a printed Python dict's body (`'train/loss': 0.53, 'x': np.float64(2.0)`). */
export function dictEntries(body: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const m of body.matchAll(DICT_ENTRY)) {
    const v = num(m[2]);
    if (v !== undefined) out.set(m[1]!, v);
  }
  return out;
}
