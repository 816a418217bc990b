/**
 * The launcher's side of the protocol (src/launcher/infir2_launch.py): where it is, how a launch puts it in front
 * of a command, and the stop file through which a supervisor asks it, on every node, to stop its tree.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LAUNCHER_FILE, LAUNCHER_PYTHON_FLAGS } from '../plan/types.js';
import { writeFileAtomic } from './atomic-write.js';

/** The launcher, from the tree this module runs in (src/util/ under vitest, dist/util/ compiled). */
export const LAUNCHER_PATH = fileURLToPath(new URL(`../../${LAUNCHER_FILE}`, import.meta.url));

/** The file the launchers of launch `token` started in `cwd` poll for a stop request (their default). */
export function stopFilePath(cwd: string, token: string): string {
  return join(cwd, `.infir2-stop.${token}`);
}

/** `stop`: the rank mains get SIGTERM and `allowanceSec` to save and exit; `kill`: SIGKILL to everything (a hang). */
export type StopRequest = { mode: 'stop'; allowanceSec: number } | { mode: 'kill' };

/** Write a stop request whole (a launcher never reads half of one). Throws where the directory cannot take it. */
export function writeStopRequest(file: string, req: StopRequest): void {
  // The step's directory may be writable by others: an unguessable temp name, created exclusively.
  writeFileAtomic(file, JSON.stringify(req));
}

export function removeStopFile(file: string): void {
  rmSync(file, { force: true });
}

/**
 * The launcher in front of `argv`: `python3 -I -S infir2_launch.py --stop-allowance S -- argv…`. `stopAllowanceSec`:
 * what the rank mains get when no stop file says otherwise (SIGTERM to the launcher, or ranks its command left).
 */
export function launcherArgv(python: string, stopAllowanceSec: number, argv: string[]): string[] {
  return [python, ...LAUNCHER_PYTHON_FLAGS, LAUNCHER_PATH, '--stop-allowance', String(Math.ceil(stopAllowanceSec)), '--', ...argv];
}
