/**
 * What a finished step produced, and whether it is still there unchanged. A step's fingerprint covers its final
 * checkpoint directory (or its output files): every file's relative path, size and modification time. `resume`
 * keeps a step only when its fingerprint still matches, so deleted or rewritten outputs are rerun, never trusted.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { PlanStep } from '../plan/types.js';
import { iterDirName } from './checkpoints.js';

function walk(root: string, at: string, out: string[]): void {
  const st = statSync(at);
  if (!st.isDirectory()) {
    out.push(`${relative(root, at) || '.'}\t${st.size}\t${Math.floor(st.mtimeMs)}`);
    return;
  }
  for (const name of readdirSync(at).sort()) walk(root, join(at, name), out);
}

/** The paths that make up a step's result. */
export function outputPaths(step: PlanStep): string[] {
  const c = step.completion;
  return c.kind === 'checkpoint' ? [join(c.dir, iterDirName(c.iteration))] : c.paths;
}

/** A digest of the step's outputs, or null when any of them is missing. */
export function fingerprintOutputs(step: PlanStep): string | null {
  const h = createHash('sha256');
  for (const p of outputPaths(step)) {
    if (!existsSync(p)) return null;
    const lines: string[] = [];
    walk(p, p, lines);
    h.update(`${p}\n${lines.join('\n')}\n`);
  }
  return h.digest('hex').slice(0, 32);
}
