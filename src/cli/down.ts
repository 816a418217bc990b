/** `infir2 down`: stop what `infir2 up` started (the worker first, so that trainers checkpoint and stop). */
import { parseVerbArgs, positionals, type Options } from './args.js';
import { clearEmbedded, readEmbedded } from './embedded.js';
import { ownedWorkers, ownServerAlive, stopWorkers } from './owned-workers.js';
import { groupAlive, terminateGroup } from '../util/process-group.js';
import { stateDir } from '../util/paths.js';
import { processFacts } from '../util/process-identity.js';
import { scanWorkers } from '../workers/worker-registry.js';

export const USAGE = 'infir2 down';
export const OPTIONS = {} satisfies Options;

export async function run(argv: string[]): Promise<number> {
  const { positionals: pos } = parseVerbArgs('down', argv, OPTIONS, USAGE);
  positionals('down', pos, [], USAGE);
  const s = readEmbedded();
  // Every worker this state directory's `up` started, the recorded one and any it forgot (across server restarts);
  // a record in the shared registry that cannot be trusted is named, and its process left alone.
  const scan = scanWorkers();
  for (const line of scan.ignored) process.stderr.write(`warning: worker registry: ${line}\n`);
  const stopped = await stopWorkers(ownedWorkers(stateDir(), s, scan));
  for (const pid of stopped) process.stdout.write(`stopped the local worker (pid ${pid})\n`);
  if (!s) {
    if (!stopped.length) process.stdout.write('nothing to stop (no embedded server recorded)\n');
    return 0;
  }
  // A group whose leader is gone is what is left of the server (the kernel reuses no pid a group still holds);
  // a leader that lives must still be the server `up` started.
  const leader = processFacts(s.serverPid);
  if (leader ? ownServerAlive(s) : groupAlive(s.serverPid)) {
    await terminateGroup(s.serverPid, 15_000);
    process.stdout.write(`stopped the Temporal dev server (pid ${s.serverPid}); its data stays in ${s.dbFile}\n`);
  } else if (leader) {
    process.stderr.write(`warning: pid ${s.serverPid} is no longer the dev server \`up\` started (another program or user now): left alone\n`);
  }
  clearEmbedded();
  return 0;
}
