/**
 * Which keys of two JSON values differ, as dotted paths (`cpt.iterations`, `sft.0.lr`), and a short line naming
 * them: what `resume` prints when a run's recipe file now resolves to something else than the recorded recipe.
 */

/** One difference; `before` or `after` is undefined where the key is absent on that side. */
export interface ValueChange {
  path: string;
  before: unknown;
  after: unknown;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isScalar = (v: unknown) => typeof v !== 'object' || v === null;

function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => sameValue(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a).filter((k) => a[k] !== undefined);
    const kb = Object.keys(b).filter((k) => b[k] !== undefined);
    return ka.length === kb.length && ka.every((k) => sameValue(a[k], b[k]));
  }
  return false;
}

/**
 * The leaves where `after` differs from `before`. Mappings are compared key by key (a key on one side only is
 * added or removed, whole); lists of mappings or lists index by index; a list of plain values (`extraArgs`) is one
 * value, since an inserted element would otherwise shift every index after it.
 */
export function diffValues(before: unknown, after: unknown, path: string[] = []): ValueChange[] {
  if (sameValue(before, after)) return [];
  if (isObject(before) && isObject(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])];
    return keys.flatMap((k) => diffValues(before[k], after[k], [...path, k]));
  }
  if (Array.isArray(before) && Array.isArray(after) && !(before.every(isScalar) && after.every(isScalar))) {
    const n = Math.max(before.length, after.length);
    return Array.from({ length: n }, (_, i) => diffValues(before[i], after[i], [...path, String(i)])).flat();
  }
  return [{ path: path.join('.') || '(the whole value)', before, after }];
}

/** A value in a few characters: `40`, `fp8`, `[--foo, 1]`, `{…}`; long text keeps its start and its end. */
export function shortValue(v: unknown, max = 40): string {
  let s: string;
  if (typeof v === 'string') s = v === '' ? '""' : v;
  else if (Array.isArray(v) && v.every(isScalar)) s = `[${v.map((x) => shortValue(x, max)).join(', ')}]`;
  else if (Array.isArray(v)) s = `[${v.length} items]`;
  else if (isObject(v)) s = '{…}';
  else s = String(v);
  if (s.length <= max) return s;
  const head = Math.floor((max - 1) / 3);
  return `${s.slice(0, head)}…${s.slice(s.length - (max - 1 - head))}`;
}

export function describeChange(c: ValueChange): string {
  if (c.before === undefined) return `${c.path} added (${shortValue(c.after)})`;
  if (c.after === undefined) return `${c.path} removed (was ${shortValue(c.before)})`;
  return `${c.path} ${shortValue(c.before)}→${shortValue(c.after)}`;
}

/** `a 1→2, b added (x)`: at most `max` changes, then `, and N more`. */
export function describeChanges(changes: ValueChange[], max = 10): string {
  const shown = changes.slice(0, max).map(describeChange);
  const rest = changes.length - shown.length;
  return rest > 0 ? `${shown.join(', ')}, and ${rest} more` : shown.join(', ');
}
