/**
 * What the probe (probe.py) prints, one report per node: the shape both sides agree on. The probe is hostile
 * input like any program's output (a broken interpreter, a package that prints on import): `parseReports`
 * takes only well-formed reports and says what it could not read.
 */

export interface PackageFacts {
  installed: boolean;
  version: string | null;
  /** Git commits it is known by: a checkout's HEAD, a wheel's `+<hash>` label, pip's direct_url.json. */
  commits: string[];
  location: string | null;
  /** Tags on a checkout's HEAD (`core_v0.14.0`). */
  tags?: string[];
  checkout?: string;
  /** The versions of its distributions (TransformerEngine's three must agree). */
  dists?: Record<string, string>;
}

export interface ImportResult {
  ok: boolean;
  error?: string;
  timeout?: boolean;
  seconds?: number;
  /** What the package says once imported: its `__version__`; torch's CUDA and cuBLASLt; NumPy's `product`. */
  version?: string;
  cuda?: string | null;
  cublasLt?: string | null;
  cudaAvailable?: boolean;
  deviceCount?: number;
  hasProduct?: boolean;
}

export interface ProbeReport {
  host: string;
  python: { executable: string; version: string };
  packages: Record<string, PackageFacts>;
  /** What the probe found in installed source: `megatron.npProduct` → `megatron/core/…/validation.py:512`. */
  findings: Record<string, string>;
  /** What the import results depend on; the caller keeps results by it (run-probe.ts). */
  fingerprint: string;
  /** Per package, or `cached`: the caller holds the results for this fingerprint. */
  imports: Record<string, ImportResult> | 'cached';
  nvidia?: { gpus?: { name: string; capability: string | null; memoryMiB: string }[]; driver?: string | null; error?: string };
  paths: Record<string, { path: string; ok: boolean; why: string | null }>;
  disk?: { dir: string; at: string; free: number | null; why?: string };
  seconds: number;
}

export const MARKER = 'INFIR2-PREFLIGHT ';

const isObj = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

/** A report as the probe prints it, or null for anything else. */
function asReport(x: unknown): ProbeReport | null {
  if (!isObj(x) || typeof x.host !== 'string' || !isObj(x.python) || !isObj(x.packages) || typeof x.fingerprint !== 'string') return null;
  if (!(x.imports === 'cached' || isObj(x.imports)) || !isObj(x.paths) || !isObj(x.findings ?? {})) return null;
  for (const p of Object.values(x.packages)) if (!isObj(p) || typeof p.installed !== 'boolean' || !Array.isArray(p.commits)) return null;
  if (isObj(x.imports)) for (const r of Object.values(x.imports)) if (!isObj(r) || typeof r.ok !== 'boolean') return null;
  for (const p of Object.values(x.paths)) if (!isObj(p) || typeof p.ok !== 'boolean' || typeof p.path !== 'string') return null;
  if (x.disk !== undefined && (!isObj(x.disk) || !(x.disk.free === null || typeof x.disk.free === 'number'))) return null;
  if (x.nvidia !== undefined && (!isObj(x.nvidia) || (x.nvidia.gpus !== undefined && !(Array.isArray(x.nvidia.gpus) && x.nvidia.gpus.every((g) => isObj(g) && typeof g.name === 'string'))))) return null;
  return x as unknown as ProbeReport;
}

const CHUNK_RE = /^(\S+) (\d+) (\d+) ([A-Za-z0-9+/=]*)$/;

/**
 * The reports in a probe's output, each sent as base64 in numbered lines `INFIR2-PREFLIGHT <token> <i> <n>
 * <chunk>` (srun cuts a task's long lines into pieces and puts its `--label` before each: measured on Slurm
 * 22.05), put together by token; and the lines that were nothing else, for the failure's message.
 */
export function parseReports(output: string): { reports: ProbeReport[]; other: string[] } {
  const parts = new Map<string, { n: number; chunks: Map<number, string> }>();
  const other: string[] = [];
  for (const line of output.split('\n')) {
    const at = line.indexOf(MARKER);
    const m = at < 0 ? null : CHUNK_RE.exec(line.slice(at + MARKER.length).trim());
    if (!m) {
      if (line.trim()) other.push(line.trim());
      continue;
    }
    const [, token, i, n, chunk] = m as unknown as [string, string, string, string, string];
    const p = parts.get(token) ?? { n: Number(n), chunks: new Map<number, string>() };
    p.chunks.set(Number(i), chunk);
    parts.set(token, p);
  }
  const reports: ProbeReport[] = [];
  for (const [token, p] of parts) {
    const whole = p.chunks.size === p.n ? Array.from({ length: p.n }, (_, i) => p.chunks.get(i)) : null;
    let r: ProbeReport | null = null;
    try {
      if (whole && whole.every((c) => c !== undefined)) r = asReport(JSON.parse(Buffer.from(whole.join(''), 'base64').toString('utf8')));
    } catch {
      r = null;
    }
    if (r) reports.push(r);
    else other.push(`an unreadable report from ${token} (${p.chunks.size} of ${p.n} parts)`);
  }
  return { reports, other };
}
