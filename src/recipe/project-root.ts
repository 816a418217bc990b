/**
 * The project root: the directory holding infir2's package.json, found from this module's location so that
 * it works from src/ (vitest) and dist/ (the built CLI) alike. Presets' relative paths resolve against it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

let cached: string | undefined;

export function projectRoot(): string {
  if (cached) return cached;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg) && JSON.parse(readFileSync(pkg, 'utf8')).name === 'infir2') return (cached = dir);
    const up = dirname(dir);
    if (up === dir) throw new Error('cannot find the infir2 project root (no package.json named infir2 above this module)');
    dir = up;
  }
}

/**
 * The embedded default's state directory: INFIR2_HOME, else `.infir2/` in the checkout. A recipe path written
 * `$INFIR2_HOME/…` resolves under it (the presets' `runDir`), so that the runs of the embedded default live, and
 * are cleaned, with its server's database. `util/paths.ts` stateDir() names the same directory for the CLI (a
 * unit test holds the two together: util and recipe may not import each other).
 */
export function embeddedStateDir(env: NodeJS.ProcessEnv = process.env): string {
  return resolve(env.INFIR2_HOME || join(projectRoot(), '.infir2'));
}

/** How a recipe names the embedded default's state directory in a path. */
export const STATE_DIR_VAR = '$INFIR2_HOME';
