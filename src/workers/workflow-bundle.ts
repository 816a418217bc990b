/**
 * The workflow code a worker loads. `make setup` pre-builds `dist/workflow-bundle.js` (webpack takes seconds,
 * and a restarted worker should be polling at once); without it the worker bundles from source on start.
 * A worker that encrypts payloads loads a second bundle, `dist/workflow-bundle-encoded-failures.js`, whose
 * failure converter puts failure messages into (encrypted) payloads: the sandbox's converter is fixed when the
 * bundle is built.
 */
import { bundleWorkflowCode, type WorkflowBundleOption } from '@temporalio/worker';
import { existsSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

/** A module in a sibling layer of this file's (src/ under tsx/vitest, dist/ once built), loaded by path. */
function layerModule(layer: string, name: string): string {
  for (const ext of ['.js', '.ts']) {
    const p = join(here, '..', layer, `${name}${ext}`);
    if (existsSync(p)) return p;
  }
  throw new Error(`cannot find ${layer}/${name} next to ${here}`);
}

/** The workflows' entry module. */
export function workflowsEntry(): string {
  return layerModule('workflows', 'index');
}

/** The failure converter that encodes messages and stack traces (temporal/encoded-failures.ts). */
export function encodedFailuresConverterPath(): string {
  return layerModule('temporal', 'encoded-failures');
}

export function prebuiltBundlePath(encodedFailures = false): string {
  return join(here, '..', encodedFailures ? 'workflow-bundle-encoded-failures.js' : 'workflow-bundle.js');
}

function bundle(encodedFailures: boolean) {
  return bundleWorkflowCode({
    workflowsPath: workflowsEntry(),
    // Evaluated once when the worker's workflow context starts, not in a fresh worker's first workflow task (the
    // first run's first task took 116 ms against 16 ms on the next run). Safe only because no workflow module keeps
    // state at module level: preloaded modules share one module cache across every workflow the context runs.
    preloadModules: [workflowsEntry()],
    ...(encodedFailures ? { failureConverterPath: encodedFailuresConverterPath() } : {}),
    logger: quietLogger,
  });
}

export async function workflowBundle(encodedFailures = false): Promise<WorkflowBundleOption> {
  const prebuilt = prebuiltBundlePath(encodedFailures);
  const entry = workflowsEntry();
  if (existsSync(prebuilt) && statSync(prebuilt).mtimeMs >= statSync(entry).mtimeMs) return { codePath: prebuilt };
  const { code } = await bundle(encodedFailures);
  return { code };
}

/** Build step: write both bundles next to the compiled code; the path of the plain one. */
export async function writePrebuiltBundle(): Promise<string> {
  for (const encodedFailures of [true, false]) writeFileSync(prebuiltBundlePath(encodedFailures), (await bundle(encodedFailures)).code);
  return prebuiltBundlePath();
}

const noop = () => undefined;
const quietLogger = { trace: noop, debug: noop, info: noop, warn: noop, error: (m: string) => process.stderr.write(`${m}\n`), log: noop };
