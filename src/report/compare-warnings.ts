/**
 * What a reader of `compare` must know before trusting its figures, each run against the first: the recipes
 * differ (allowed, named so that it is known what was compared), a run is still running (its figures will
 * move), or a shared step covers other iterations in another run (a fork's decay starting from an earlier
 * stable checkpoint, a run cut short): its figures then compare different stretches of training. Pure.
 */
import { shownChange } from '../plan/notify-spec.js';
import { diffValues, describeChanges } from '../util/json-diff.js';
import type { Curve } from './curve.js';
import type { RunData, StepReport } from './run-data.js';

/** The training loss a step logged: Megatron iterations, else slime steps. */
export function lossOf(s: StepReport | undefined): Curve | null {
  if (!s?.series) return null;
  return s.series.loss.length ? s.series.loss : s.series.stepLoss;
}

/** What differs between the runs' recipes, beside the first's (the run directory always does: not named). */
function recipeWarnings(runs: RunData[], ids: string[]): string[] {
  const out: string[] = [];
  runs.slice(1).forEach((r, i) => {
    if (r.plan.recipe !== runs[0]!.plan.recipe) out.push(`${ids[i + 1]} ran recipe ${r.plan.recipe}, ${ids[0]} ran ${runs[0]!.plan.recipe}`);
    if (!runs[0]!.recipe || !r.recipe) return;
    const changes = diffValues(runs[0]!.recipe, r.recipe).filter((c) => c.path !== 'runDir');
    if (changes.length) out.push(`${ids[i + 1]} differs from ${ids[0]} in ${describeChanges(changes.map(shownChange))}`);
  });
  return out;
}

/** A run still training: named with where its running steps stand. */
function runningWarnings(runs: RunData[], ids: string[]): string[] {
  return runs.flatMap((r, i) => {
    const running = r.steps.filter((s) => s.status === 'running');
    if (r.status !== 'running' && !running.length) return [];
    const where = running.map((s) => {
      const it = lossOf(s)?.last()?.x;
      const total = s.series?.totalIterations;
      return it === undefined ? s.id : `${s.id} at ${it}${total ? ` of ${total}` : ''}`;
    });
    return [`${ids[i]} is still running${where.length ? ` (${where.join(', ')})` : ''}: its figures are not final`];
  });
}

const span = (c: Curve) => `${c.at(0)!.x}–${c.last()!.x}`;

/** A shared step whose loss covers other iterations than the reference's. */
function coverageWarnings(runs: RunData[], ids: string[], shared: string[]): string[] {
  const out: string[] = [];
  for (const id of shared) {
    const ref = lossOf(runs[0]!.steps.find((s) => s.id === id));
    if (!ref?.length) continue;
    runs.slice(1).forEach((r, i) => {
      const step = r.steps.find((s) => s.id === id);
      const c = lossOf(step);
      if (!c?.length) return;
      const sameStart = c.at(0)!.x === ref.at(0)!.x;
      // A running step's end is expected to differ: said by runningWarnings.
      const sameEnd = c.last()!.x === ref.last()!.x || step?.status === 'running' || runs[0]!.steps.find((s) => s.id === id)?.status === 'running';
      if (sameStart && sameEnd) return;
      const from = Math.max(c.at(0)!.x, ref.at(0)!.x);
      const to = Math.min(c.last()!.x, ref.last()!.x);
      const overlap = from <= to ? `only ${from}–${to} in common` : 'no iteration in common';
      out.push(`${ids[i + 1]}'s ${id} covers iterations ${span(c)}, ${ids[0]}'s ${span(ref)}: its figures compare different stretches of training (${overlap})`);
    });
  }
  return out;
}

export function compareWarnings(runs: RunData[], ids: string[], shared: string[]): string[] {
  return [...recipeWarnings(runs, ids), ...runningWarnings(runs, ids), ...coverageWarnings(runs, ids, shared)];
}
