/** `infir2 down`: stop what `infir2 up` started (the worker first, so that trainers checkpoint and stop). */
import { parseVerbArgs, positionals, type Options } from './args.js';
import { clearEmbedded, readEmbedded } from './embedded.js';
import { groupAlive, terminateGroup } from '../util/process-group.js';

export const USAGE = 'infir2 down';
export const OPTIONS = {} satisfies Options;

export async function run(argv: string[]): Promise<number> {
  const { positionals: pos } = parseVerbArgs('down', argv, OPTIONS, USAGE);
  positionals('down', pos, [], USAGE);
  const s = readEmbedded();
  if (!s) {
    process.stdout.write('nothing to stop (no embedded server recorded)\n');
    return 0;
  }
  if (s.workerPid && groupAlive(s.workerPid)) {
    await terminateGroup(s.workerPid, 60_000);
    process.stdout.write(`stopped the local worker (pid ${s.workerPid})\n`);
  }
  if (groupAlive(s.serverPid)) {
    await terminateGroup(s.serverPid, 15_000);
    process.stdout.write(`stopped the Temporal dev server (pid ${s.serverPid}); its data stays in ${s.dbFile}\n`);
  }
  clearEmbedded();
  return 0;
}
