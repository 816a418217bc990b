/**
 * The workflow code a worker loads. `make setup` pre-builds `dist/workflow-bundle.js` (webpack takes seconds,
 * and a restarted worker should be polling at once); without it the worker bundles from source on start.
 */
import { bundleWorkflowCode, type WorkflowBundleOption } from '@temporalio/worker';
import { existsSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

/** The workflows' entry module next to this file's layer (src/ under tsx/vitest, dist/ once built). */
export function workflowsEntry(): string {
  for (const ext of ['.js', '.ts']) {
    const p = join(here, '..', 'workflows', `index${ext}`);
    if (existsSync(p)) return p;
  }
  throw new Error(`cannot find the workflows entry next to ${here}`);
}

export function prebuiltBundlePath(): string {
  return join(here, '..', 'workflow-bundle.js');
}

export async function workflowBundle(): Promise<WorkflowBundleOption> {
  const prebuilt = prebuiltBundlePath();
  const entry = workflowsEntry();
  if (existsSync(prebuilt) && statSync(prebuilt).mtimeMs >= statSync(entry).mtimeMs) return { codePath: prebuilt };
  const { code } = await bundleWorkflowCode({ workflowsPath: entry, logger: quietLogger });
  return { code };
}

/** Build step: write the bundle next to the compiled code. */
export async function writePrebuiltBundle(): Promise<string> {
  const { code } = await bundleWorkflowCode({ workflowsPath: workflowsEntry(), logger: quietLogger });
  writeFileSync(prebuiltBundlePath(), code);
  return prebuiltBundlePath();
}

const noop = () => undefined;
const quietLogger = { trace: noop, debug: noop, info: noop, warn: noop, error: (m: string) => process.stderr.write(`${m}\n`), log: noop };
