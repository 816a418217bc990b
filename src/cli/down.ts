/** `infir2 down`: stop what `infir2 up` started (the worker first, so that trainers checkpoint and stop). */
import { parseVerbArgs, positionals, type Options } from './args.js';
import { clearEmbedded, readEmbedded } from './embedded.js';
import { ownedWorkers, stopWorkers } from './owned-workers.js';
import { groupAlive, terminateGroup } from '../util/process-group.js';
import { stateDir } from '../util/paths.js';

export const USAGE = 'infir2 down';
export const OPTIONS = {} satisfies Options;

export async function run(argv: string[]): Promise<number> {
  const { positionals: pos } = parseVerbArgs('down', argv, OPTIONS, USAGE);
  positionals('down', pos, [], USAGE);
  const s = readEmbedded();
  // Every worker this state directory's `up` started, the recorded one and any it forgot (across server restarts).
  const stopped = await stopWorkers(ownedWorkers(stateDir(), s));
  for (const pid of stopped) process.stdout.write(`stopped the local worker (pid ${pid})\n`);
  if (!s) {
    if (!stopped.length) process.stdout.write('nothing to stop (no embedded server recorded)\n');
    return 0;
  }
  if (groupAlive(s.serverPid)) {
    await terminateGroup(s.serverPid, 15_000);
    process.stdout.write(`stopped the Temporal dev server (pid ${s.serverPid}); its data stays in ${s.dbFile}\n`);
  }
  clearEmbedded();
  return 0;
}
