/**
 * The markdown shown as a run's current details in the Web UI: one row per step. Pure and deterministic
 * (no clock reads), so it is safe inside workflow code.
 *
 * The Web UI (2.54) renders it with no cell padding and collapses ordinary spaces (`white-space: pre-line`),
 * so adjacent cells ran together ("8.853" beside "4" read "8.8534"). Each non-empty cell is therefore padded
 * with a no-break space on either side, the number columns are right-aligned (`---:`), and a cell's own
 * spaces are no-break spaces so that "✔ completed" or "1200 / 35000" never wrap inside a narrow panel. The
 * slash keeps spaces round it: the UI's renderer turns a bare "4/4" into a superscript-over-subscript
 * fraction. As plain text a no-break space reads as a space.
 */
import type { RunStatus, StepResult, StepState } from './definitions.js';

const ICON: Record<StepState['status'], string> = {
  pending: '·',
  running: '▶',
  completed: '✔',
  kept: '✔',
  failed: '✘',
  cancelled: '⊘',
  skipped: '–',
};

/** No-break space: pads a cell and holds a cell's words together. */
export const NBSP = '\u00a0';

const HEADER = ['step', 'status', 'iteration', 'loss', 'last good checkpoint', 'attempts', 'last failure'];
/** Text columns left-aligned, number columns (iteration, loss, checkpoint, attempts) right-aligned. */
const ALIGN = [':---', ':---', '---:', '---:', '---:', '---:', ':---'];

const isNum = (x: number | null | undefined): x is number => x !== null && x !== undefined;

function fmtLoss(x: number | null | undefined): string {
  return isNum(x) ? x.toPrecision(4) : '';
}

function fmtIter(iteration: number | null | undefined, total: number | null | undefined): string {
  if (!isNum(iteration)) return '';
  return isNum(total) ? `${iteration}${NBSP}/${NBSP}${total}` : String(iteration);
}

/** A fraction in [0, 1] as a percentage ("85.7 %"), anything else to 3 significant digits. */
function fmtScore(x: number, asPercent: boolean): string {
  return asPercent && x >= 0 && x <= 1 ? `${(x * 100).toFixed(1)}${NBSP}%` : x.toPrecision(3);
}

/** An evaluation's headline score from its report (the keys `infir2 status` shows), or ''. */
function fmtMetric(m: StepResult['metrics'] | undefined): string {
  if (!m) return '';
  if (isNum(m.accuracy)) return `acc${NBSP}${fmtScore(m.accuracy, true)}`;
  if (isNum(m['pass@1'])) return `pass@1${NBSP}${fmtScore(m['pass@1'], true)}`;
  if (isNum(m.score)) return `score${NBSP}${fmtScore(m.score, false)}`;
  return '';
}

function fmtFailure(f: StepState['lastFailure']): string {
  return f ? `${f.class}: ${f.message}`.replace(/\|/g, '/').replace(/[\r\n]+/g, ' ').slice(0, 120) : '';
}

/** One markdown row from its cells: non-empty cells padded with a no-break space either side. */
function row(cells: string[]): string {
  return `| ${cells.map((c) => (c ? `${NBSP}${c}${NBSP}` : '')).join(' | ')} |`;
}

/**
 * The cells of a step's row. A completed or kept step shows its final result (the heartbeat progress may be
 * stale, from the last checkpoint before the end); a pending, running or failed one shows its progress.
 */
function stepCells(s: StepState): string[] {
  const p = s.progress;
  const r = s.result;
  const done = (s.status === 'completed' || s.status === 'kept') && r !== null;
  let iter: string;
  let loss: string;
  let ckpt: number | null | undefined;
  if (done) {
    iter = fmtIter(r.iteration, p?.totalIterations ?? r.iteration);
    loss = [fmtLoss(r.loss), fmtMetric(r.metrics)].filter(Boolean).join(' · ');
    ckpt = r.iteration;
  } else {
    iter = fmtIter(p?.iteration, p?.totalIterations);
    loss = fmtLoss(p?.loss ?? r?.loss);
    ckpt = p?.lastCheckpoint ?? r?.iteration;
  }
  return [
    s.id,
    `${ICON[s.status]}${NBSP}${s.status}`,
    iter,
    loss,
    isNum(ckpt) ? String(ckpt) : '',
    String(s.attempts),
    fmtFailure(s.lastFailure),
  ];
}

export function stepRow(s: StepState): string {
  return row(stepCells(s));
}

/** The stage table: one row per step (a stageRun shows its own row, a recipeRun all of them). */
export function stepTable(steps: StepState[]): string {
  return [row(HEADER), `| ${ALIGN.join(' | ')} |`, ...steps.map(stepRow)].join('\n');
}

export function statusMarkdown(run: RunStatus): string {
  const head = `**${run.recipe}** run \`${run.runId}\` — ${run.status}${run.message ? `: ${run.message}` : ''}`;
  return `${head}\n\n${stepTable(run.steps)}`;
}
