/**
 * Names every side must agree on: task queues, workflow ids, search attributes.
 * Imported by workflows, so it may import only @temporalio/common and types (no Node built-ins).
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/** Workflows (recipeRun, stageRun) run here; any worker may serve it. */
export const ORCHESTRATOR_TASK_QUEUE = 'infir2-orchestrator';

/** The Temporal server's default limit on one payload (`limit.blobSize.error`): a workflow argument larger fails. */
export const PAYLOAD_LIMIT_BYTES = 2 * 1024 * 1024;

/** The default task queue of a pool that does not name one. */
export function poolTaskQueue(pool: string): string {
  return `infir2-${pool}`;
}

/** Readable ids in the Web UI: `<recipe>-<run>` and `<recipe>-<run>/<step>`. */
export function runWorkflowId(recipe: string, runId: string): string {
  return runId.startsWith(`${recipe}-`) ? runId : `${recipe}-${runId}`;
}
export function stepWorkflowId(runWorkflowIdValue: string, stepId: string): string {
  return `${runWorkflowIdValue}/${stepId}`;
}
/** A step's evaluator (evaluation while training): `<recipe>-<run>/<step>/evals`. */
export function evalWorkflowId(stepWorkflowIdValue: string): string {
  return `${stepWorkflowIdValue}/evals`;
}

/**
 * Memo keys. A cancelled run writes its final status here: Temporal keeps no result for a cancelled workflow,
 * and reading the memo (unlike a query) needs no worker to replay the run.
 */
export const MEMO = { finalStatus: 'finalStatus', resumedFrom: 'resumedFrom' } as const;

/** Custom search attributes, registered by `infir2 up` (dev server) and docker-compose (cluster). */
export const SA = {
  recipeName: defineSearchAttributeKey('RecipeName', SearchAttributeType.KEYWORD),
  // A list: parallel steps (evaluations) run at once; `Stage = 'rl.stage1'` matches a list that holds it.
  stage: defineSearchAttributeKey('Stage', SearchAttributeType.KEYWORD_LIST),
  precision: defineSearchAttributeKey('TrainPrecision', SearchAttributeType.KEYWORD),
  // Not `RunId`: that name is Temporal's own (the execution's run id) and cannot be set.
  runId: defineSearchAttributeKey('RecipeRunId', SearchAttributeType.KEYWORD),
} as const;

/** `Name=Type` pairs for `temporal server start-dev --search-attribute` and `operator search-attribute create`. */
export const SEARCH_ATTRIBUTE_FLAGS = Object.values(SA).map(
  (k) => `${k.name}=${k.type === SearchAttributeType.KEYWORD_LIST ? 'KeywordList' : 'Keyword'}`,
);
