/**
 * The preflight of one step: the probe run in its environment (run-probe.ts), its findings checked
 * (checks.ts). What the worker runs before each attempt's trainer and `infir2 doctor` runs from a shell.
 */
import type { ResolvedPreflight } from '../plan/preflight-types.js';
import { checkNodes, type CheckRow } from './checks.js';
import { runProbe, type ProbeOptions } from './run-probe.js';

export interface PreflightResult {
  rows: CheckRow[];
  /** The interpreter the probe ran, and the nodes that answered. */
  python: string;
  hosts: string[];
  seconds: number;
  cancelled: boolean;
}

export async function preflight(spec: ResolvedPreflight, o: ProbeOptions = {}): Promise<PreflightResult> {
  const run = await runProbe(spec, o);
  const skipPython = spec.skip.find((s) => s.check === 'python');
  const problems: CheckRow[] = run.problems.map((p) => ({
    check: 'python',
    verdict: skipPython ? 'skip' : 'fail',
    found: p,
    expected: skipPython ? `skipped: ${skipPython.why}` : "the step's interpreter runs (the probe is standard-library Python ≥ 3.7)",
  }));
  return {
    rows: [...problems, ...checkNodes(spec, run.nodes)],
    python: run.python,
    hosts: run.nodes.map((n) => n.report.host),
    seconds: run.seconds,
    cancelled: o.signal?.aborted ?? false,
  };
}

export const withVerdict = (rows: CheckRow[], v: CheckRow['verdict']) => rows.filter((r) => r.verdict === v);
