/**
 * The markdown shown as a run's current details in the Web UI: one row per step. Pure and deterministic
 * (no clock reads), so it is safe inside workflow code.
 */
import type { RunStatus, StepState } from './definitions.js';

const ICON: Record<StepState['status'], string> = {
  pending: '·',
  running: '▶',
  completed: '✔',
  kept: '✔',
  failed: '✘',
  cancelled: '⊘',
  skipped: '–',
};

function fmtLoss(x: number | null | undefined): string {
  return x === null || x === undefined ? '' : x.toPrecision(4);
}

export function stepRow(s: StepState): string {
  const p = s.progress;
  const iter = p?.iteration != null ? `${p.iteration}${p.totalIterations != null ? `/${p.totalIterations}` : ''}` : '';
  const ckpt = p?.lastCheckpoint != null ? String(p.lastCheckpoint) : s.result?.iteration != null ? String(s.result.iteration) : '';
  const failure = s.lastFailure ? `${s.lastFailure.class}: ${s.lastFailure.message}`.replace(/\|/g, '/').replace(/[\r\n]+/g, ' ').slice(0, 120) : '';
  const loss = fmtLoss(p?.loss ?? s.result?.loss);
  return `| ${s.id} | ${ICON[s.status]} ${s.status} | ${iter} | ${loss} | ${ckpt} | ${s.attempts} | ${failure} |`;
}

/** The stage table: one row per step (a stageRun shows its own row, a recipeRun all of them). */
export function stepTable(steps: StepState[]): string {
  return [
    '| step | status | iteration | loss | last good checkpoint | attempts | last failure |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    ...steps.map(stepRow),
  ].join('\n');
}

export function statusMarkdown(run: RunStatus): string {
  const head = `**${run.recipe}** run \`${run.runId}\` — ${run.status}${run.message ? `: ${run.message}` : ''}`;
  return `${head}\n\n${stepTable(run.steps)}`;
}
