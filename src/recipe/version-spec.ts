/**
 * Version requirements as a recipe writes them (`software.versions`) and the preflight checks them: PEP 440
 * versions as pip and `importlib.metadata` report them (`2.7.4.post1`, `2.4.0+3cd6870`, `1.13.0a0+gitunknown`,
 * `12.9`), compared the way pip compares them, and a small requirement language:
 *
 *   `>=2.4, <2.8`   clauses joined by commas, all must hold (`==`, `!=`, `>=`, `<=`, `>`, `<`; a bare version is `==`)
 *   `==2.4.*`       a release prefix
 *   `@3cd6870`      the installed commit starts with this (a git checkout's HEAD, a wheel built from git)
 *
 * `==2.4.0` matches `2.4.0+3cd6870` (a local label is ignored unless the requirement names one), as in PEP 440.
 * Pure: the schema validates requirements with it, the preflight evaluates them.
 */

export interface Version {
  release: number[];
  /** a / b / rc and its number; absent for a final release. */
  pre: [number, number] | null;
  post: number | null;
  dev: number | null;
  local: string | null;
}

const VERSION_RE = /^v?(\d+(?:\.\d+)*)(?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?(\d*))?(?:(?:-(\d+))|(?:[-_.]?(?:post|rev|r)[-_.]?(\d*)))?(?:[-_.]?dev[-_.]?(\d*))?(?:\+([a-z0-9]+(?:[-_.][a-z0-9]+)*))?$/i;
const PRE_RANK: Record<string, number> = { a: 0, alpha: 0, b: 1, beta: 1, c: 2, rc: 2, pre: 2, preview: 2 };

export function parseVersion(text: string): Version | null {
  const m = VERSION_RE.exec(text.trim());
  if (!m) return null;
  const num = (s: string | undefined) => (s === undefined ? null : s === '' ? 0 : Number(s));
  return {
    release: m[1]!.split('.').map(Number),
    pre: m[2] ? [PRE_RANK[m[2].toLowerCase()]!, num(m[3]) ?? 0] : null,
    post: num(m[4] ?? m[5]),
    dev: num(m[6]),
    local: m[7]?.toLowerCase() ?? null,
  };
}

function cmpRelease(a: number[], b: number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d) return Math.sign(d);
  }
  return 0;
}

/**
 * PEP 440 order: release, then dev < pre < final < post (`2.0.dev1 < 2.0a1 < 2.0 < 2.0.post1`); local labels
 * only when `withLocal` (a requirement without one ignores them).
 */
export function compareVersions(a: Version, b: Version, withLocal = true): number {
  const r = cmpRelease(a.release, b.release);
  if (r) return r;
  // A dev release without a pre-release sorts before every pre-release of the same release.
  const preKey = (v: Version): [number, number] => (v.pre ? v.pre : v.dev !== null && v.post === null ? [-1, 0] : [3, 0]);
  const [pa, pb] = [preKey(a), preKey(b)];
  if (pa[0] !== pb[0]) return Math.sign(pa[0] - pb[0]);
  if (pa[1] !== pb[1]) return Math.sign(pa[1] - pb[1]);
  const post = (v: Version) => (v.post === null ? -1 : v.post);
  if (post(a) !== post(b)) return Math.sign(post(a) - post(b));
  const dev = (v: Version) => (v.dev === null ? Infinity : v.dev);
  if (dev(a) !== dev(b)) return dev(a) < dev(b) ? -1 : 1;
  if (!withLocal) return 0;
  return (a.local ?? '').localeCompare(b.local ?? '');
}

export type Op = '==' | '!=' | '>=' | '<=' | '>' | '<';

export type Clause =
  | { kind: 'version'; op: Op; version: Version; text: string; prefix: boolean }
  | { kind: 'commit'; commit: string; text: string };

const CLAUSE_RE = /^(==|!=|>=|<=|>|<)?\s*(.+)$/;

/** The requirement's clauses, or the reason it is not one (the schema's message). */
export function parseRequirement(text: string): Clause[] | string {
  const parts = text.split(',').map((p) => p.trim());
  if (!text.trim() || parts.some((p) => !p)) return `not a version requirement: expected clauses like '>=2.4, <2.8', '==2.7.4.post1' or '@3cd6870', joined by commas`;
  const out: Clause[] = [];
  // The caller shows the whole value: a clause is named only when there are several.
  const which = (p: string) => (parts.length > 1 ? `'${p}': ` : '');
  for (const p of parts) {
    if (p.startsWith('@')) {
      const commit = p.slice(1).toLowerCase();
      if (!/^[0-9a-f]{4,40}$/.test(commit)) return `${which(p)}expected @ and a commit (4 to 40 hex digits)`;
      out.push({ kind: 'commit', commit, text: p });
      continue;
    }
    const m = CLAUSE_RE.exec(p)!;
    const op = (m[1] ?? '==') as Op;
    let v = m[2]!.trim();
    const prefix = v.endsWith('.*');
    if (prefix) {
      if (op !== '==' && op !== '!=') return `${which(p)}a '.*' prefix goes with == or != only`;
      v = v.slice(0, -2);
    }
    const version = parseVersion(v);
    if (!version || (prefix && (version.pre || version.post !== null || version.dev !== null || version.local))) return `${which(p)}'${v}' is not a version (expected e.g. 2.4.0, 2.7.4.post1, 12.9)`;
    out.push({ kind: 'version', op, version, text: p, prefix });
  }
  return out;
}

/** What is known of an installed package: its version and, when it came from git, its commit. */
export interface Installed {
  version: string | null;
  /** The full or abbreviated commit (a checkout's HEAD, a wheel's `+<hash>` label, pip's direct_url.json). */
  commits?: string[];
}

/** Does one clause hold? null: it cannot be told (no version, no commit known). */
function clauseHolds(c: Clause, found: Installed): boolean | null {
  if (c.kind === 'commit') {
    const commits = (found.commits ?? []).map((x) => x.toLowerCase()).filter(Boolean);
    if (!commits.length) return null;
    // Either may be the abbreviated one.
    return commits.some((x) => x.startsWith(c.commit) || c.commit.startsWith(x));
  }
  const v = found.version === null ? null : parseVersion(found.version);
  if (!v) return null;
  if (c.prefix) {
    const same = c.version.release.every((n, i) => (v.release[i] ?? 0) === n);
    return c.op === '==' ? same : !same;
  }
  const d = compareVersions(v, c.version, c.version.local !== null);
  switch (c.op) {
    case '==':
      return d === 0;
    case '!=':
      return d !== 0;
    case '>=':
      return d >= 0;
    case '<=':
      return d <= 0;
    case '>':
      return d > 0;
    case '<':
      // PEP 440: `<2` does not admit 2's own pre-releases (`2.0.0rc1`), unless it names one itself.
      if (!c.version.pre && c.version.dev === null && (v.pre || v.dev !== null) && cmpRelease(v.release, c.version.release) === 0) return false;
      return d < 0;
  }
}

/**
 * A requirement against what is installed: `true` when every clause holds, `false` when one does not (with the
 * clauses that failed), `null` when one cannot be told and none failed.
 */
export function satisfies(requirement: string, found: Installed): { ok: boolean | null; failed: string[]; unknown: string[] } {
  const clauses = parseRequirement(requirement);
  if (typeof clauses === 'string') throw new Error(clauses);
  const failed: string[] = [];
  const unknown: string[] = [];
  for (const c of clauses) {
    const r = clauseHolds(c, found);
    if (r === false) failed.push(c.text);
    else if (r === null) unknown.push(c.text);
  }
  return { ok: failed.length ? false : unknown.length ? null : true, failed, unknown };
}
