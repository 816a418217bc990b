/** Running the CLI in-process (through main(), output captured) or as the built `node bin/infir2.js`. */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { vi } from 'vitest';
import { main } from '../../../src/cli/main.js';

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export async function runInProcess(args: string[]): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((c: string | Uint8Array) => ((stdout += String(c)), true));
  const err = vi.spyOn(process.stderr, 'write').mockImplementation((c: string | Uint8Array) => ((stderr += String(c)), true));
  try {
    const code = await main(args);
    return { code, stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

/**
 * Build dist/ once (tsc emits even while files elsewhere in the tree fail to type-check) unless it is newer
 * than the sources this suite exercises.
 */
export function ensureBuilt(): void {
  const built = `${ROOT}dist/cli/validate.js`;
  const newest = ['src/cli/validate.ts', 'src/cli/plan.ts', 'src/recipe/load.ts', 'src/plan/compile.ts', 'src/recipe/lint.ts'].map((f) => statSync(`${ROOT}${f}`).mtimeMs);
  if (existsSync(built) && statSync(built).mtimeMs > Math.max(...newest)) return;
  try {
    execFileSync('npx', ['--no-install', 'tsc', '-p', 'tsconfig.json'], { cwd: ROOT, stdio: 'ignore' });
  } catch {
    /* type errors elsewhere still emit; the subprocess tests fail loudly if the CLI did not build */
  }
}

export function runSubprocess(args: string[], cwd = ROOT): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile('node', [`${ROOT}bin/infir2.js`, ...args], { cwd, encoding: 'utf8' }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}
