/**
 * Deciding what a resumed run keeps, resumes and reruns, from the old run's recorded state and the run
 * directory as it is now. A step is kept only if it completed and its outputs still carry the fingerprint they
 * had then; a step after a rerun step reruns too (its inputs change). Reruns move the old outputs aside
 * (renamed, never deleted) so that nothing stale is resumed from or mistaken for done.
 */
import { existsSync, readdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import type { Plan, PlanStep } from '../plan/types.js';
import type { RunStatus, StepResult } from '../plan/contracts.js';
import { badCheckpoints } from './checkpoint-health.js';
import { inspectCheckpointDir, TRACKER_FILE } from './checkpoints.js';
import { fingerprintOutputs } from './outputs.js';
import { writeFileAtomic } from '../util/atomic-write.js';

export type ResumeAction = 'keep' | 'resume' | 'rerun';

export interface ResumeDecision {
  stepId: string;
  action: ResumeAction;
  /** For `resume`: the complete checkpoint it continues from. */
  iteration: number | null;
  reason: string;
}

/** Steps that depend on `id`, directly or not. */
export function descendants(plan: Plan, id: string): Set<string> {
  const out = new Set<string>();
  let grew = true;
  while (grew) {
    grew = false;
    for (const s of plan.steps) {
      if (!out.has(s.id) && s.dependsOn.some((d) => d === id || out.has(d))) {
        out.add(s.id);
        grew = true;
      }
    }
  }
  return out;
}

export async function decideResume(plan: Plan, status: RunStatus, opts: { from?: string } = {}): Promise<ResumeDecision[]> {
  const state = new Map(status.steps.map((s) => [s.id, s]));
  const forced = opts.from ? new Set([opts.from, ...descendants(plan, opts.from)]) : new Set<string>();
  const decided = new Map<string, ResumeDecision>();
  for (const step of plan.steps) {
    const st = state.get(step.id);
    const upstreamRerun = step.dependsOn.find((d) => decided.get(d)?.action === 'rerun');
    let d: ResumeDecision;
    if (forced.has(step.id)) {
      d = { stepId: step.id, action: 'rerun', iteration: null, reason: step.id === opts.from ? '--from' : `after ${opts.from} (--from)` };
    } else if (upstreamRerun && st?.result) {
      d = { stepId: step.id, action: 'rerun', iteration: null, reason: `its input ${upstreamRerun} reruns` };
    } else if (st?.result && (st.status === 'completed' || st.status === 'kept')) {
      const now = await fingerprintOutputs(step);
      d =
        now === null
          ? { stepId: step.id, action: 'rerun', iteration: null, reason: 'its outputs were deleted' }
          : st.result.fingerprint && now !== st.result.fingerprint
            ? { stepId: step.id, action: 'rerun', iteration: null, reason: 'its outputs changed since it finished' }
            : { stepId: step.id, action: 'keep', iteration: st.result.iteration, reason: 'completed; outputs verified' };
    } else {
      const latest = step.checkpoint && step.resume ? inspectCheckpointDir(step.checkpoint.dir).latestComplete : null;
      const was = st ? st.status : 'pending';
      // The fallback, and why: checkpoints newer than the one resumed from that were found damaged.
      const bad = step.checkpoint ? badCheckpoints(step.checkpoint.dir).filter((b) => latest === null || b.iteration > latest) : [];
      const skipped = bad.map((b) => `; checkpoint ${b.iteration} marked bad (${b.reason})`).join('');
      d =
        latest !== null && !upstreamRerun
          ? { stepId: step.id, action: 'resume', iteration: latest, reason: `${was}; newest complete checkpoint ${latest}${skipped}` }
          : {
              stepId: step.id,
              action: 'rerun',
              iteration: null,
              reason: upstreamRerun ? `its input ${upstreamRerun} reruns` : was === 'pending' || was === 'skipped' ? 'not run yet' : `${was}; no complete checkpoint`,
            };
    }
    decided.set(step.id, d);
  }
  return plan.steps.map((s) => decided.get(s.id)!);
}

/**
 * Move aside what a rerun step must not find: its output files, and its checkpoints past the iteration that
 * kept steps sharing its checkpoint root still need (the CPT lineage shares one root across phases).
 */
export function clearForRerun(plan: Plan, decisions: ResumeDecision[], stamp: string): string[] {
  const byId = new Map(decisions.map((d) => [d.stepId, d]));
  const moved: string[] = [];
  const aside = (p: string) => {
    if (!existsSync(p)) return;
    const to = `${p}.superseded-${stamp}`;
    renameSync(p, to);
    moved.push(to);
  };
  for (const step of plan.steps) {
    if (byId.get(step.id)?.action !== 'rerun') continue;
    if (step.completion.kind === 'files') {
      step.completion.paths.forEach(aside);
      continue;
    }
    const dir = step.checkpoint?.dir ?? step.completion.dir;
    const keptFloor = Math.max(0, ...plan.steps.filter((s) => byId.get(s.id)?.action === 'keep' && keptIteration(s, dir) !== null).map((s) => keptIteration(s, dir)!));
    if (keptFloor === 0) {
      aside(dir);
      continue;
    }
    for (const name of existsSync(dir) ? readdirSync(dir) : []) {
      const m = /^iter_(\d+)$/.exec(name);
      if (m && Number(m[1]) > keptFloor) aside(join(dir, name));
    }
    // The tracker goes back to what the kept steps produced, so the rerun starts from there.
    writeFileAtomic(join(dir, TRACKER_FILE), String(keptFloor));
  }
  return moved;
}

function keptIteration(s: PlanStep, dir: string): number | null {
  return s.completion.kind === 'checkpoint' && s.completion.dir === dir ? s.completion.iteration : null;
}

/** The kept steps' results, handed to the new execution so it does not run them. */
export function keptResults(status: RunStatus, decisions: ResumeDecision[]): Record<string, StepResult> {
  const keep: Record<string, StepResult> = {};
  for (const d of decisions) {
    const r = status.steps.find((s) => s.id === d.stepId)?.result;
    if (d.action === 'keep' && r) keep[d.stepId] = r;
  }
  return keep;
}
