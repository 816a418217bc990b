/**
 * The directories infir2 is pointed at by its environment, checked by every verb before it does anything (as a
 * malformed payload key is): a state or host directory on /proc or behind a file is one line naming the
 * variable, exit 2, instead of a spin in mkdir or a failure deep inside `up` or a worker. Only its shape is
 * checked (no probe file): `status` must still work on a full disk, and a write that fails later names its errno.
 */
import { UsageError } from '../errors.js';
import { dirShapeProblem } from '../util/dir-probe.js';

const ENV_DIRS: { name: string; holds: string }[] = [
  { name: 'INFIR2_HOME', holds: "the embedded default's state" },
  { name: 'INFIR2_HOST_DIR', holds: "the host's worker records and GPU claims" },
];

/** Throws a UsageError with a line per variable that is set to a directory that can never hold files. */
export function checkEnvDirs(env: NodeJS.ProcessEnv = process.env): void {
  const lines: string[] = [];
  for (const { name, holds } of ENV_DIRS) {
    const dir = env[name];
    if (!dir) continue; // unset: the default under the project or /tmp
    const problem = dirShapeProblem(dir, holds);
    if (problem) lines.push(`${name}: ${problem}: expected a writable directory`);
  }
  if (lines.length) throw new UsageError(lines);
}
