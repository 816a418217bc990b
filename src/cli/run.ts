/**
 * `infir2 run <recipe> [--detach] [--run-id ID] [--set k=v]...`: compile the recipe, start its recipeRun,
 * print the run id and Web UI link; without --detach, follow it live and exit 0 on success, 1 on failure.
 */
import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseVerbArgs, positionals, type Options } from './args.js';
import { workflowUrl } from './embedded.js';
import { UsageError } from '../errors.js';
import { follow } from './follow.js';
import { defaultRunId, loadCompiled } from './recipe-input.js';
import { ORIGIN_FILE, RECIPE_FILE, type RecipeOrigin } from './recipe-changes.js';
import type { Plan } from '../plan/types.js';
import { makeDirs, dirProblem, undoMakeDirs } from '../util/dir-probe.js';
import { writeFileAtomic } from '../util/atomic-write.js';
import { ORCHESTRATOR_TASK_QUEUE, PAYLOAD_LIMIT_BYTES, SA, runWorkflowId } from '../temporal/constants.js';
import { connectClient } from '../temporal/connection.js';
import type { recipeRun } from '../workflows/recipe-run.js';
import { mdTable } from '../views/status-table.js';

export const USAGE = 'infir2 run <recipe> [--detach] [--run-id ID] [--set key=value]...';
export const OPTIONS = {
  detach: { type: 'boolean' },
  'run-id': { type: 'string' },
  set: { type: 'string', multiple: true },
} satisfies Options;
const RUN_ID = /^(?=.{1,63}$)[a-z0-9]+(?:-[a-z0-9]+)*$/;

export function planSummary(plan: Plan): string {
  return `${plan.recipe} · ${plan.model} · ${plan.precision} · ${plan.steps.length} steps`;
}

/**
 * The run's static details in the Web UI: its run directory and the plan, one row per step. Rendered like the
 * stage table (status-table.ts), whose markdown the UI shows without cell padding: cells padded with no-break
 * spaces, the GPU count right-aligned, so that neighbours no longer run together ("cpt.warmuplocal").
 */
export function planDetails(plan: Plan): string {
  const rows = plan.steps.map((s) => [s.id, s.backend, s.pool, String(s.gpus), s.dependsOn.join(', ')]);
  const table = mdTable(['step', 'backend', 'pool', 'GPUs', 'after'], ['left', 'left', 'left', 'right', 'left'], rows);
  return [`run dir: \`${plan.runDir}\``, '', table].join('\n');
}

export async function run(argv: string[]): Promise<number> {
  const { values, positionals: pos } = parseVerbArgs('run', argv, OPTIONS, USAGE);
  const [recipeRef] = positionals('run', pos, ['recipe'], USAGE);
  const runId = checkRunId(values['run-id'] ?? defaultRunId());
  const compiled = await loadCompiled(recipeRef!, { sets: values.set ?? [], runId });
  const { client, connection } = await connectClient();
  try {
    const origin = { source: compiled.source, sets: values.set ?? [], cwd: process.cwd() };
    return await startRun(client, compiled.plan, compiled.recipe, { detach: values.detach ?? false, origin });
  } finally {
    await connection.close();
  }
}

export function checkRunId(runId: string): string {
  if (!RUN_ID.test(runId)) throw new UsageError(`--run-id: expected lowercase letters and digits in dash-separated words (at most 63 characters), got '${runId}'`);
  return runId;
}

/** Why the plan cannot travel as the workflow's argument (over the server's payload limit), or null. */
export function planPayloadProblem(plan: Plan): string | null {
  const planBytes = Buffer.byteLength(JSON.stringify(plan));
  if (planBytes <= PAYLOAD_LIMIT_BYTES) return null;
  return `the compiled plan is ${(planBytes / 2 ** 20).toFixed(1)} MiB, over Temporal's ${PAYLOAD_LIMIT_BYTES / 2 ** 20} MiB payload limit: shorten extraArgs, env or the eval benchmarks`;
}

export interface StartOptions {
  detach: boolean;
  /** One more line for the Web UI's details (e.g. what a fork started from). */
  note?: string;
  /** Where the recipe came from, recorded for `resume` to tell whether it has changed since. */
  origin?: RecipeOrigin;
  /** More JSON files for the run directory, written with the plan (`parity.json`). */
  files?: Record<string, unknown>;
}

/**
 * Record the plan, the resolved recipe and where it came from in the run directory (what `resume` and `fork`
 * read back), start the recipeRun, print its id and link, and follow it unless detached.
 */
export async function startRun(client: Client, plan: Plan, recipe: unknown, o: StartOptions): Promise<number> {
  const workflowId = runWorkflowId(plan.recipe, plan.runId);
  const problem = dirProblem(plan.runDir);
  if (problem) throw new UsageError(`runDir ${plan.runDir}: ${problem}`);
  if (existsSync(join(plan.runDir, 'plan.json'))) {
    throw new UsageError(`run '${plan.runId}' already exists in ${plan.runDir}; pick another --run-id or \`infir2 resume ${workflowId}\``);
  }
  // Files without a plan are what an earlier run left when its directory was cut away mid-step (or a directory of
  // something else): a new run would resume from checkpoints that are not its own and "complete" at once.
  const leftovers = existsSync(plan.runDir) ? readdirSync(plan.runDir) : [];
  if (leftovers.length) {
    const shown = leftovers.slice(0, 4).join(', ') + (leftovers.length > 4 ? `, … (${leftovers.length} entries)` : '');
    throw new UsageError(`runDir ${plan.runDir} already holds files (${shown}) but no plan.json of a run: remove it, or pick another --run-id`);
  }
  // The plan travels as the workflow's argument: refuse it here, whole, rather than leave a half-started run.
  const tooBig = planPayloadProblem(plan);
  if (tooBig) throw new UsageError(tooBig);
  const created = makeDirs(plan.runDir);
  const written = [join(plan.runDir, RECIPE_FILE), join(plan.runDir, 'plan.json')];
  writeJsonAtomic(written[0]!, recipe);
  writeJsonAtomic(written[1]!, plan);
  if (o.origin) {
    written.push(join(plan.runDir, ORIGIN_FILE));
    writeJsonAtomic(written.at(-1)!, o.origin);
  }
  for (const [name, data] of Object.entries(o.files ?? {})) {
    written.push(join(plan.runDir, name));
    writeJsonAtomic(written.at(-1)!, data);
  }
  try {
    // typed by the workflow's signature: a change of recipeRun's arguments fails to compile here
    await client.workflow.start<typeof recipeRun>('recipeRun', {
      taskQueue: ORCHESTRATOR_TASK_QUEUE,
      workflowId,
      args: [plan, {}],
      staticSummary: planSummary(plan),
      staticDetails: planDetails(plan) + (o.note ? `\n\n${o.note}` : ''),
      typedSearchAttributes: [
        { key: SA.recipeName, value: plan.recipe },
        { key: SA.precision, value: plan.precision },
        { key: SA.runId, value: plan.runId },
        { key: SA.stage, value: [] },
      ],
    });
  } catch (err) {
    // Nothing of a run that did not start stays behind: the same run id can be used again.
    undoMakeDirs(written, created);
    if (err instanceof WorkflowExecutionAlreadyStartedError) throw new UsageError(`a run with id ${workflowId} already exists; pick another --run-id`);
    throw err;
  }
  process.stdout.write(`started ${workflowId}\n`);
  // Said once the run exists: a fork that cannot start must not claim it forked.
  if (o.note) process.stdout.write(`${o.note.replace(/`/g, '')}\n`);
  const url = workflowUrl(workflowId);
  if (url) process.stdout.write(`watch:   ${url}\n`);
  if (o.detach) {
    process.stdout.write(`status:  infir2 status ${workflowId}\n`);
    return 0;
  }
  return follow(client, workflowId);
}

function writeJsonAtomic(file: string, data: unknown): void {
  // Through an unguessable temp name: a link planted at `plan.json.tmp` in a shared runs root is never written through.
  writeFileAtomic(file, JSON.stringify(data, null, 2) + '\n');
}
