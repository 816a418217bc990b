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
import type { RunStatus, StepState } from '../plan/contracts.js';
import { TIME_CATEGORIES } from '../plan/goodput.js';
import { shortDuration } from '../plan/stall-words.js';
import { evaluating, evalSeries, formatGoodput, formatScore, goodputWords, runTimeFigures, stepFigures, stepTimeFigures } from './step-figures.js';

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

/** A column's alignment in a markdown table: text left, numbers right. */
export type Align = 'left' | 'right';

const HEADER = ['step', 'status', 'iteration', 'loss', 'last good checkpoint', 'attempts', 'last failure'];
/** Text columns left-aligned, number columns (iteration, loss, checkpoint, attempts) right-aligned. */
const ALIGN: Align[] = ['left', 'left', 'right', 'right', 'right', 'right', 'left'];

const isNum = (x: number | null | undefined): x is number => x !== null && x !== undefined;

function fmtLoss(x: number | null | undefined): string {
  return isNum(x) ? x.toPrecision(4) : '';
}

function fmtIter(iteration: number | null | undefined, total: number | null | undefined): string {
  if (!isNum(iteration)) return '';
  return isNum(total) ? `${iteration}${NBSP}/${NBSP}${total}` : String(iteration);
}

function fmtFailure(f: StepState['lastFailure']): string {
  return f ? `${f.class}: ${f.message}`.replace(/\|/g, '/').replace(/[\r\n]+/g, ' ').slice(0, 120) : '';
}

/**
 * One markdown row from its cells: non-empty cells padded with a no-break space either side. The cells are
 * written as given (a caller replaces pipes and newlines in free text, and joins words with NBSP where they
 * must not wrap).
 */
export function mdRow(cells: string[]): string {
  return `| ${cells.map((c) => (c ? `${NBSP}${c}${NBSP}` : '')).join(' | ')} |`;
}

/**
 * A markdown table as the Web UI reads it well: header and rows padded (mdRow), each column aligned as
 * given (`:---` left, `---:` right).
 */
export function mdTable(header: string[], align: Align[], rows: string[][]): string {
  const rule = `| ${align.map((a) => (a === 'right' ? '---:' : ':---')).join(' | ')} |`;
  return [mdRow(header), rule, ...rows.map(mdRow)].join('\n');
}

/** The cells of a step's row: what it shows is stepFigures' decision (a finished step's result). */
function stepCells(s: StepState): string[] {
  const f = stepFigures(s);
  // An evaluation's score shares the loss column: "acc 85.7 %", or "1.250 · acc 85.7 %" beside a loss.
  const loss = [fmtLoss(f.loss), f.score ? formatScore(f.score, NBSP) : ''].filter(Boolean).join(' · ');
  return [
    s.id,
    // A step between attempts that waits for a person (a full disk) reads as waiting, not as training.
    s.status === 'running' && s.waiting ? `⏸${NBSP}waiting` : evaluating(s) ? `${ICON.running}${NBSP}evaluating` : `${ICON[s.status]}${NBSP}${s.status}`,
    fmtIter(f.iteration, f.total),
    loss,
    isNum(f.checkpoint) ? String(f.checkpoint) : '',
    String(s.attempts),
    fmtFailure(s.lastFailure),
  ];
}

export function stepRow(s: StepState): string {
  return mdRow(stepCells(s));
}

/** The stage table: one row per step (a stageRun shows its own row, a recipeRun all of them). */
export function stepTable(steps: StepState[]): string {
  return mdTable(HEADER, ALIGN, steps.map(stepCells));
}

/**
 * Where each step's time went (plan/goodput.ts), one row per step that ran: its goodput and seconds per
 * category, from its finished attempts (a workflow reads no clock, so a running attempt shows once it ends).
 * Empty when no step has run.
 */
export function timeTable(steps: StepState[]): string {
  const rows = steps.flatMap((s) => {
    const f = stepTimeFigures(s);
    if (!f) return [];
    return [[s.id, formatGoodput(f.goodput, NBSP), ...TIME_CATEGORIES.map((c) => ((f.secs[c] ?? 0) >= 0.5 ? shortDuration(f.secs[c]!) : ''))]];
  });
  if (!rows.length) return '';
  return mdTable(['step', 'goodput', ...TIME_CATEGORIES], ['left', 'right', ...TIME_CATEGORIES.map((): Align => 'right')], rows);
}

/** The run's goodput line (plan/goodput.ts), or '' before any step has run. */
export function goodputLine(steps: StepState[]): string {
  const f = runTimeFigures(steps);
  return f ? goodputWords(f, NBSP) : '';
}

/** The scores of checkpoints evaluated while their steps trained, a line per step; '' when there are none. */
export function scoreLines(steps: StepState[]): string {
  const lines = steps.flatMap((s) => {
    const series = evalSeries(s, NBSP);
    return series ? [`- \`${s.id}\` ${series}`] : [];
  });
  return lines.length ? ['**scores while training**', '', ...lines].join('\n') : '';
}

export function statusMarkdown(run: RunStatus): string {
  const head = `**${run.recipe}** run \`${run.runId}\` — ${run.status}${run.message ? `: ${run.message}` : ''}`;
  const time = timeTable(run.steps);
  const scores = scoreLines(run.steps);
  const report = run.report ? [`**report** — \`${run.report}\` (\`infir2 report ${run.runId}\` writes it again)`] : [];
  const parts = [head, stepTable(run.steps), ...(scores ? [scores] : []), ...(time ? [`**time** — ${goodputLine(run.steps)}`, time] : []), ...report];
  return parts.join('\n\n');
}
