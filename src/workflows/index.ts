/** The workflow bundle's entry: every workflow type a worker registers. */
export { recipeRun } from './recipe-run.js';
export { stageRun } from './stage-run.js';
export { checkpointEval } from './checkpoint-eval.js';
export { evalRun } from './eval-run.js';
