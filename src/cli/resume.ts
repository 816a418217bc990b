/**
 * `infir2 resume <run> [--from ID] [--dry-run]`: continue a failed or cancelled run as a new execution of the
 * same workflow id. Completed steps whose outputs still verify are kept; the failed step continues from its
 * newest complete checkpoint; `--from` reruns that step and everything after it. `--dry-run` prints the
 * decision per step and changes nothing. Both say when the recipe file the run started from now resolves to
 * another recipe (recipe-changes.ts): the run still goes on with the plan in its history.
 */
import type { Client } from '@temporalio/client';
import { parseVerbArgs, positionals, type Options } from './args.js';
import { workflowUrl } from './embedded.js';
import { UsageError } from '../errors.js';
import { follow } from './follow.js';
import { recipeChangeNote } from './recipe-changes.js';
import { planDetails, planSummary } from './run.js';
import { table } from './status-view.js';
import type { Plan } from '../plan/types.js';
import { inspectCheckpointDir } from '../rundir/checkpoints.js';
import { deletions } from '../rundir/retention.js';
import { runDirVerdict } from '../rundir/run-identity.js';
import { clearForRerun, decideResume, keptResults, type ResumeDecision } from '../rundir/resume.js';
import { MEMO, ORCHESTRATOR_TASK_QUEUE, SA } from '../temporal/constants.js';
import { connectClient } from '../temporal/connection.js';
import { recordedStatus, resolveRun, startedPlan } from '../temporal/runs.js';
import type { recipeRun } from '../workflows/recipe-run.js';

export const USAGE = 'infir2 resume <run> [--from STEP] [--dry-run] [--detach]';
export const OPTIONS = {
  from: { type: 'string' },
  'dry-run': { type: 'boolean' },
  detach: { type: 'boolean' },
} satisfies Options;

export function renderDecisions(ds: ResumeDecision[]): string {
  const rows = [['STEP', 'ACTION', 'WHY'], ...ds.map((d) => [d.stepId, d.action === 'resume' ? `resume from ${d.iteration}` : d.action, d.reason])];
  return table(rows);
}

/** `cpt.stable: retention (keep last 2, boundaries 10, 480) deleted 8 checkpoints (10 … 80); complete on disk: 90, 100`. */
export function retentionLines(plan: Plan): string[] {
  return plan.steps.flatMap((s) => {
    const ck = s.checkpoint;
    if (!ck?.retention) return [];
    const gone = deletions(ck.dir).map((d) => d.iteration);
    if (!gone.length) return [];
    const list = gone.length > 4 ? `${gone[0]} … ${gone.at(-1)}` : gone.join(', ');
    return [`${s.id}: retention (${ck.retention.summary}) deleted ${gone.length} checkpoint${gone.length > 1 ? 's' : ''} (${list}); complete on disk: ${inspectCheckpointDir(ck.dir).complete.join(', ') || 'none'}`];
  });
}

export async function run(argv: string[]): Promise<number> {
  const { values, positionals: pos } = parseVerbArgs('resume', argv, OPTIONS, USAGE);
  const [ref] = positionals('resume', pos, ['run'], USAGE);
  const { client, connection } = await connectClient();
  try {
    return await resume(client, ref!, { from: values.from, dryRun: values['dry-run'] ?? false, detach: values.detach ?? false });
  } finally {
    await connection.close();
  }
}

async function resume(client: Client, refText: string, o: { from?: string; dryRun: boolean; detach: boolean }): Promise<number> {
  const ref = await resolveRun(client, refText);
  const desc = ref.description;
  const wfStatus = desc.status.name;
  if (wfStatus === 'RUNNING') throw new UsageError(`${ref.workflowId} is still running; cancel it first (\`infir2 cancel ${ref.workflowId}\`)`);
  if (wfStatus === 'COMPLETED' && !o.from) throw new UsageError(`${ref.workflowId} completed; nothing to resume (use --from STEP to rerun from a step)`);
  const plan = await startedPlan(ref);
  // Every attempt refuses a run directory without the run's plan (run-identity.ts): say so now, not after a wait.
  const gone = runDirVerdict(plan.runDir, plan.recipe, plan.runId);
  if (gone) throw new UsageError(`cannot resume ${ref.workflowId}: ${gone.reason}`);
  if (o.from && !plan.steps.some((s) => s.id === o.from)) {
    throw new UsageError(`--from: no step '${o.from}' in ${ref.workflowId} (steps: ${plan.steps.map((s) => s.id).join(', ')})`);
  }
  const status = await recordedStatus(ref);
  const decisions = await decideResume(plan, status, { from: o.from });
  process.stdout.write(`${ref.workflowId} (${wfStatus.toLowerCase()}):\n${renderDecisions(decisions)}\n`);
  // What retention deleted is not there to resume or fork from: say so, per step.
  for (const line of retentionLines(plan)) process.stdout.write(`${line}\n`);
  // The run goes on with the plan it recorded; an edited recipe file is only named, never applied.
  const changed = await recipeChangeNote(plan.runDir);
  if (changed) process.stdout.write(`${changed}\n`);
  if (o.dryRun) return 0;

  const moved = clearForRerun(plan, decisions, `${Date.now()}`);
  for (const m of moved) process.stdout.write(`moved aside: ${m}\n`);
  await client.workflow.start<typeof recipeRun>('recipeRun', {
    taskQueue: ORCHESTRATOR_TASK_QUEUE,
    workflowId: ref.workflowId,
    args: [plan, { keep: keptResults(status, decisions) }],
    staticSummary: `${planSummary(plan)} · resumed`,
    staticDetails: `${planDetails(plan)}\n\nresumed from execution \`${desc.runId}\`:\n\n${decisions.map((d) => `- ${d.stepId}: ${d.action}${d.iteration !== null && d.action === 'resume' ? ` from ${d.iteration}` : ''} (${d.reason})`).join('\n')}`,
    memo: { [MEMO.resumedFrom]: desc.runId },
    typedSearchAttributes: [
      { key: SA.recipeName, value: plan.recipe },
      { key: SA.precision, value: plan.precision },
      { key: SA.runId, value: plan.runId },
      { key: SA.stage, value: [] },
    ],
  });
  process.stdout.write(`resumed ${ref.workflowId}\n`);
  const url = workflowUrl(ref.workflowId);
  if (url) process.stdout.write(`watch:   ${url}\n`);
  return o.detach ? 0 : follow(client, ref.workflowId);
}
