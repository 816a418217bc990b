/**
 * The preflight's verdicts: what the probe found on each node, held against the step's needs, the recipe's
 * `software.versions`, the known-bad combinations (recipe/known-bad.ts), the free space its checkpoints need
 * and the paths it reads. One row per check; `fail` rows stop the step (a `config` failure), `warn` rows are
 * shown with it. Pure.
 */
import type { ResolvedPreflight } from '../plan/preflight-types.js';
import { KNOWN_BAD, type Condition, type KnownBad } from '../recipe/known-bad.js';
import { PACKAGE_LABEL, PACKAGES, SYSTEM_VERSIONS, type Package, type Pinnable } from '../recipe/software-checks.js';
import { satisfies, type Installed } from '../recipe/version-spec.js';
import { formatBytes } from '../rundir/storage.js';
import type { ImportResult, PackageFacts, ProbeReport } from './probe-report.js';

export type Verdict = 'pass' | 'warn' | 'fail' | 'skip';

export interface CheckRow {
  /** A package or system key, `python`, `gpu`, `disk`, `paths`, or a known-bad entry's id. */
  check: string;
  verdict: Verdict;
  found: string;
  expected: string;
  /** The node it was seen on, when the step's nodes disagree. */
  node?: string;
  /** A known-bad entry's sources. */
  sources?: string[];
}

/** One node's facts, as the checks read them: the report with its import results (from the cache, if cached). */
export interface NodeFacts {
  report: ProbeReport;
  imports: Record<string, ImportResult>;
}

interface Pkg {
  facts: PackageFacts;
  imported: ImportResult | undefined;
  version: string | null;
}

function pkgOf(n: NodeFacts, key: string): Pkg {
  const facts = n.report.packages[key] ?? { installed: false, version: null, commits: [], location: null };
  const imported = n.imports[key];
  // The import's own `__version__` when it loaded (what the trainer will see); else the metadata's.
  const version = (imported?.ok && imported.version) || facts.version;
  return { facts, imported, version };
}

/** `0.14.0 (23e00ed, core_v0.14.0)`: a version with the commit and tags of a checkout. */
function describe(key: string, p: Pkg): string {
  if (!p.facts.installed) return 'not installed';
  const commit = p.facts.checkout ? p.facts.commits[0]?.slice(0, 7) : undefined;
  const tags = p.facts.tags?.length ? p.facts.tags.join(', ') : '';
  const extra = [commit, tags].filter(Boolean).join(', ');
  const v = p.version ?? 'version unknown';
  return `${key === 'megatron' ? `core ${v}` : v}${extra ? ` (${extra})` : ''}`;
}

/** The node's value of a system fact (a version-like string), or null. */
function systemValue(n: NodeFacts, key: string): string | null {
  const torch = n.imports.torch;
  switch (key) {
    case 'cuda':
      return torch?.ok ? (torch.cuda ?? null) : null;
    case 'cublasLt':
      return torch?.ok ? (torch.cublasLt ?? null) : null;
    case 'driver':
      return n.report.nvidia?.driver ?? null;
    case 'computeCapability': {
      const caps = (n.report.nvidia?.gpus ?? []).map((g) => g.capability).filter((c): c is string => !!c);
      // The lowest decides what the step can run: torch places ranks on any of them.
      return caps.sort((a, b) => Number(a) - Number(b))[0] ?? null;
    }
    default:
      return null;
  }
}

function installedOf(n: NodeFacts, key: string): Installed | null {
  if ((SYSTEM_VERSIONS as readonly string[]).includes(key)) {
    const v = systemValue(n, key);
    return v === null ? null : { version: v };
  }
  const p = pkgOf(n, key);
  return p.facts.installed ? { version: p.version, commits: p.facts.commits } : null;
}

function holds(c: Condition, n: NodeFacts, spec: ResolvedPreflight): boolean {
  if ('step' in c) return spec.traits.includes(c.step);
  if ('finding' in c) return n.report.findings[c.finding] !== undefined;
  if ('importError' in c) {
    const r = n.imports[c.importError];
    return !!r && !r.ok && new RegExp(c.matches, 'i').test(r.error ?? '');
  }
  const found = installedOf(n, c.pkg);
  return found !== null && satisfies(c.spec, found).ok === true;
}

/** `{numpy}`, `{importError:flashAttn}`, `{finding:megatron.npProduct}` filled with what the node has. */
function fill(text: string, n: NodeFacts): string {
  return text.replace(/\{(importError:|finding:)?([A-Za-z.]+)\}/g, (_, kind: string | undefined, key: string) => {
    if (kind === 'importError:') return n.imports[key]?.error ?? '?';
    if (kind === 'finding:') return n.report.findings[key] ?? '?';
    if ((SYSTEM_VERSIONS as readonly string[]).includes(key)) return systemValue(n, key) ?? 'unknown';
    return describe(key, pkgOf(n, key));
  });
}

function knownBadRow(k: KnownBad, n: NodeFacts, spec: ResolvedPreflight): CheckRow | null {
  if (!k.when.some((set) => set.every((c) => holds(c, n, spec)))) return null;
  return { check: k.id, verdict: k.level, found: fill(k.says, n), expected: fill(k.expected, n), sources: k.sources };
}

/** Import errors a known-bad entry explains: its row says it, the package's own row does not repeat it. */
function explainedImports(n: NodeFacts, spec: ResolvedPreflight): Set<string> {
  const out = new Set<string>();
  for (const k of KNOWN_BAD) {
    if (!k.when.some((set) => set.every((c) => holds(c, n, spec)))) continue;
    for (const set of k.when) for (const c of set) if ('importError' in c && holds(c, n, spec)) out.add(c.importError);
  }
  return out;
}

function packageRow(key: Package, n: NodeFacts, spec: ResolvedPreflight, explained: Set<string>): CheckRow | null {
  const p = pkgOf(n, key);
  const label = PACKAGE_LABEL[key];
  const needed = spec.needs.includes(key);
  // A package the step neither imports nor pins is none of its business.
  if (!needed && !spec.uses.includes(key) && !spec.versions[key]) return null;
  const pin = spec.versions[key];
  const where = `${n.report.python.executable}${spec.env.PYTHONPATH ? ` (PYTHONPATH=${spec.env.PYTHONPATH})` : ''}`;
  if (!p.facts.installed) {
    // What the step would import if it were there: said, not held against it.
    if (!needed && !pin) return { check: key, verdict: 'pass', found: `${label} not installed`, expected: '-' };
    // A pin binds the steps that import the package: an evaluation server's image need not hold Megatron.
    if (!needed && !spec.uses.includes(key)) return null;
    return { check: key, verdict: 'fail', found: `${label} not found by ${where}`, expected: pin ? `${pin} (software.versions.${key})` : `installed: the step imports it` };
  }
  const found = describe(key, p);
  if (p.imported && !p.imported.ok && !explained.has(key)) {
    const why = p.imported.error ?? 'import failed';
    return { check: key, verdict: needed ? 'fail' : 'warn', found: `${label} ${found} does not import: ${why}`, expected: needed ? 'it imports: the step needs it' : 'it imports' };
  }
  if (pin) {
    const r = satisfies(pin, { version: p.version, commits: p.facts.commits });
    if (r.ok === false) return { check: key, verdict: 'fail', found: `${label} ${found}`, expected: `${pin} (software.versions.${key})` };
    if (r.ok === null) return { check: key, verdict: 'warn', found: `${label} ${found}`, expected: `${pin} (software.versions.${key}): ${r.unknown.join(', ')} cannot be told here` };
  }
  return { check: key, verdict: 'pass', found: `${label} ${found}`, expected: pin ?? (needed ? 'installed' : '-') };
}

function systemRow(key: Pinnable, n: NodeFacts, spec: ResolvedPreflight): CheckRow | null {
  const pin = spec.versions[key];
  const v = systemValue(n, key);
  if (!pin) return v !== null ? { check: key, verdict: 'pass', found: `${PACKAGE_LABEL[key]} ${v}`, expected: '-' } : null;
  const label = PACKAGE_LABEL[key];
  if (v === null) return { check: key, verdict: 'fail', found: `${label} unknown here (no GPU, or a torch without CUDA)`, expected: `${pin} (software.versions.${key})` };
  const ok = satisfies(pin, { version: v }).ok;
  return { check: key, verdict: ok ? 'pass' : 'fail', found: `${label} ${v}`, expected: `${pin} (software.versions.${key})` };
}

function gpuRow(n: NodeFacts, spec: ResolvedPreflight): CheckRow | null {
  const nv = n.report.nvidia;
  const torch = n.imports.torch;
  if (spec.gpus <= 0) {
    // Asked for without a need (`doctor` without a recipe): what there is, as information.
    if (!nv) return null;
    const what = nv.error || !nv.gpus?.length ? `no NVIDIA GPU (${nv.error ?? 'none listed'})` : `${nv.gpus.length}× ${[...new Set(nv.gpus.map((g) => `${g.name}${g.capability ? ` (${g.capability})` : ''}`))].join(', ')}, driver ${nv.driver ?? '?'}`;
    return { check: 'gpu', verdict: 'pass', found: what, expected: '-' };
  }
  const expected = `${spec.gpus} GPU${spec.gpus > 1 ? 's' : ''} per node`;
  if (nv?.error || !nv?.gpus?.length) return { check: 'gpu', verdict: 'fail', found: nv?.error ?? 'no GPU listed by nvidia-smi', expected };
  const names = [...new Set(nv.gpus.map((g) => `${g.name}${g.capability ? ` (${g.capability})` : ''}`))].join(', ');
  const found = `${nv.gpus.length}× ${names}, driver ${nv.driver ?? '?'}`;
  if (nv.gpus.length < spec.gpus) return { check: 'gpu', verdict: 'fail', found, expected };
  if (torch?.ok && torch.cudaAvailable === false) {
    return { check: 'gpu', verdict: 'fail', found: `${found}, but torch ${torch.version ?? ''} sees none${torch.cuda ? '' : ' (built without CUDA)'}`, expected };
  }
  return { check: 'gpu', verdict: 'pass', found, expected };
}

function diskRow(n: NodeFacts, spec: ResolvedPreflight): CheckRow | null {
  const s = spec.saves;
  if (!s) return null;
  const d = n.report.disk;
  const one = `≥ ${formatBytes(s.checkpointBytes)}: one checkpoint with optimizer state (the plan's estimate)`;
  if (!d || d.free === null) return { check: 'disk', verdict: 'warn', found: `free space on ${s.dir} unknown${d?.why ? ` (${d.why})` : ''}`, expected: one };
  const found = `${formatBytes(d.free)} free on ${d.at}`;
  if (d.free < s.checkpointBytes) return { check: 'disk', verdict: 'fail', found, expected: one };
  if (d.free < s.boundBytes) return { check: 'disk', verdict: 'warn', found, expected: `≥ ${formatBytes(s.boundBytes)} for ${s.bound} of ~${formatBytes(s.checkpointBytes)}: the disk fills before the step ends unless space is freed` };
  return { check: 'disk', verdict: 'pass', found, expected: `≥ ${formatBytes(s.boundBytes)} (${s.bound})` };
}

function pathRows(n: NodeFacts): CheckRow[] {
  const entries = Object.entries(n.report.paths);
  const bad = entries.filter(([, p]) => !p.ok);
  if (!entries.length) return [];
  if (!bad.length) return [{ check: 'paths', verdict: 'pass', found: `${entries.length} read: ${entries.map(([r]) => r).join(', ')}`, expected: 'readable' }];
  return bad.map(([role, p]) => ({ check: 'paths', verdict: 'fail', found: `${role} cannot be read: ${p.why ?? p.path}`, expected: `${p.path} readable by the trainer's user` }));
}

/** Every check on one node, skipped ones marked with the recipe's reason. */
export function checkNode(spec: ResolvedPreflight, n: NodeFacts): CheckRow[] {
  const explained = explainedImports(n, spec);
  const rows: CheckRow[] = [
    { check: 'python', verdict: 'pass', found: `Python ${n.report.python.version} (${n.report.python.executable})`, expected: 'it runs' },
    ...PACKAGES.map((k) => packageRow(k, n, spec, explained)),
    ...SYSTEM_VERSIONS.map((k) => systemRow(k, n, spec)),
    gpuRow(n, spec),
    diskRow(n, spec),
    ...pathRows(n),
    ...KNOWN_BAD.map((k) => knownBadRow(k, n, spec)),
  ].filter((r): r is CheckRow => r !== null);
  const skips = new Map(spec.skip.map((s) => [s.check, s.why]));
  return rows.map((r) => (skips.has(r.check) && r.verdict !== 'pass' ? { ...r, verdict: 'skip', expected: `skipped: ${skips.get(r.check)}` } : r));
}

/**
 * Every node's rows as one table: a row every node shares once, a row only some have once per node, named.
 * Nodes are in the order they reported.
 */
export function checkNodes(spec: ResolvedPreflight, nodes: NodeFacts[]): CheckRow[] {
  const perNode = nodes.map((n) => ({ host: n.report.host, rows: checkNode(spec, n) }));
  if (perNode.length <= 1) return perNode[0]?.rows ?? [];
  const key = (r: CheckRow) => `${r.check}\u0000${r.verdict}\u0000${r.found}\u0000${r.expected}`;
  const out: CheckRow[] = [];
  const seen = new Set<string>();
  for (const { rows } of perNode) {
    for (const r of rows) {
      const k = key(r);
      if (seen.has(k)) continue;
      seen.add(k);
      const on = perNode.filter((n) => n.rows.some((x) => key(x) === k)).map((n) => n.host);
      if (on.length === perNode.length) out.push(r);
      else for (const host of on) out.push({ ...r, node: host });
    }
  }
  return out;
}

/** `numpy: found 2.1.3; expected <2 (software.versions.numpy)` (and `[on n2]`): one problem, one line. */
export function rowLine(r: CheckRow): string {
  return `${r.check}: ${r.found}; expected ${r.expected}${r.node ? ` [on ${r.node}]` : ''}`;
}
