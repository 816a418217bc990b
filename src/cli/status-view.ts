/** Plain-text rendering of a run's status for the terminal. */
import type { RunStatus, StepState } from '../workflows/definitions.js';

function iterCell(s: StepState): string {
  const p = s.progress;
  if (p?.iteration != null) return `${p.iteration}/${p.totalIterations ?? '?'}`;
  if (s.result?.iteration != null) return `${s.result.iteration}/${s.result.iteration}`;
  return '-';
}

function num(x: number | null | undefined, digits = 4): string {
  return x === null || x === undefined ? '-' : Number(x).toPrecision(digits);
}

/** The numbers worth a glance: the score if the report has one, else its first three numbers. */
export function headlineMetrics(m: Record<string, number>): string {
  const keys = ['accuracy', 'score', 'pass@1'].filter((k) => k in m);
  const shown = keys.length ? keys : Object.keys(m).slice(0, 3);
  return shown.map((k) => `${k}=${num(m[k], 3)}`).join(' ');
}

export function stepCells(s: StepState): string[] {
  const p = s.progress;
  const ckpt = p?.lastCheckpoint ?? (s.result?.iteration ?? null);
  const metrics = headlineMetrics(s.result?.metrics ?? {});
  return [
    s.id,
    s.status,
    iterCell(s),
    num(p?.loss ?? s.result?.loss),
    p?.throughput != null ? `${num(p.throughput, 3)} ${p.throughputUnit ?? ''}`.trim() : '-',
    ckpt === null ? '-' : String(ckpt),
    String(s.attempts),
    s.lastFailure ? `${s.lastFailure.class}${metrics ? '' : `: ${s.lastFailure.message.slice(0, 60)}`}` : metrics || '',
  ];
}

export function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ').trimEnd()).join('\n');
}

export function renderStatusTable(workflowId: string, st: RunStatus): string {
  const head = `${workflowId}: ${st.status}${st.message && st.status !== 'completed' ? ` — ${st.message}` : ''}\nrun dir: ${st.runDir}`;
  const rows = [['STEP', 'STATUS', 'ITER', 'LOSS', 'THROUGHPUT', 'CKPT', 'ATTEMPTS', 'NOTES'], ...st.steps.map(stepCells)];
  return `${head}\n\n${table(rows)}`;
}
