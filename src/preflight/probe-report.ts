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
  return x as unknown as ProbeReport;
}

/**
 * The reports in a probe's output: one per `INFIR2-PREFLIGHT` line (srun's `--label` puts `N: ` before each
 * node's), and the lines that were nothing else, for the failure's message.
 */
export function parseReports(output: string): { reports: ProbeReport[]; other: string[] } {
  const reports: ProbeReport[] = [];
  const other: string[] = [];
  for (const line of output.split('\n')) {
    const at = line.indexOf(MARKER);
    if (at < 0) {
      if (line.trim()) other.push(line.trim());
      continue;
    }
    try {
      const r = asReport(JSON.parse(line.slice(at + MARKER.length)));
      if (r) reports.push(r);
      else other.push(`an unreadable report: ${line.slice(0, 200)}`);
    } catch {
      other.push(`an unreadable report: ${line.slice(0, 200)}`);
    }
  }
  return { reports, other };
}
