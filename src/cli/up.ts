/**
 * `infir2 up`: the embedded default — the Temporal dev server (SQLite in the state directory, Web UI) and a
 * local worker serving the orchestrator queue and the given pools (default: `local`). Idempotent: what is
 * already up is left alone.
 */
import { createServer } from 'node:net';
import { join } from 'node:path';
import { intFlag, parseVerbArgs, positionals, type Options } from './args.js';
import { readEmbedded, writeEmbedded } from './embedded.js';
import { UsageError } from '../errors.js';
import { spawnDetached, startDevServer, waitForServer } from '../temporal/dev-server.js';
import { groupAlive } from '../util/process-group.js';
import { projectRoot, stateDir, temporalBin } from '../util/paths.js';

export const USAGE = 'infir2 up [--port N] [--ui-port N] [--pool NAME]... [--slots N] [--headless]';
export const OPTIONS = {
  port: { type: 'string' },
  'ui-port': { type: 'string' },
  pool: { type: 'string', multiple: true },
  slots: { type: 'string' },
  headless: { type: 'boolean' },
} satisfies Options;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals: pos } = parseVerbArgs('up', argv, OPTIONS, USAGE);
  positionals('up', pos, [], USAGE);
  const port = intFlag('port', values.port, 7233, 65535);
  const uiPort = intFlag('ui-port', values['ui-port'], port + 1000, 65535);
  const pools = values.pool?.length ? values.pool : ['local'];
  const state = stateDir();

  let current = readEmbedded();
  if (current && groupAlive(current.serverPid)) {
    process.stdout.write(`Temporal dev server already running (pid ${current.serverPid}) at ${current.address}\n`);
  } else {
    // Another server on the port would answer our readiness check while ours failed to bind: refuse first.
    for (const [flag, p] of [['port', port], ...(values.headless ? [] : [['ui-port', uiPort]])] as [string, number][]) {
      if (await portInUse(p)) throw new UsageError(`--${flag}: ${p} is already in use (another Temporal server? stop it, or choose another --${flag})`);
    }
    process.stdout.write(`starting the Temporal dev server (state in ${state}) ...\n`);
    const h = await startDevServer({ temporalBin: temporalBin(), stateDir: state, port, uiPort, headless: values.headless ?? false });
    current = { serverPid: h.pid, workerPid: null, address: h.address, uiUrl: h.uiUrl, dbFile: h.dbFile, startedAt: new Date().toISOString() };
    writeEmbedded(current);
  }
  await waitForServer(current.address);

  if (current.workerPid && groupAlive(current.workerPid)) {
    process.stdout.write(`local worker already running (pid ${current.workerPid})\n`);
  } else {
    const args = [join(projectRoot(), 'bin', 'infir2.js'), 'worker', ...pools.flatMap((p) => ['--pool', p])];
    if (values.slots) args.push('--slots', values.slots);
    const child = spawnDetached(process.execPath, args, join(state, 'worker.log'), { ...process.env, TEMPORAL_ADDRESS: current.address });
    if (!child.pid) throw new Error('could not start the local worker');
    current = { ...current, workerPid: child.pid };
    writeEmbedded(current);
    process.stdout.write(`local worker started (pid ${child.pid}; pools: ${pools.join(', ')}; log: ${join(state, 'worker.log')})\n`);
  }
  process.stdout.write(`Temporal: ${current.address}\n`);
  if (current.uiUrl) process.stdout.write(`Web UI:   ${current.uiUrl}\n`);
  return 0;
}

/** Whether something listens on 127.0.0.1:port (a bind fails with EADDRINUSE). */
function portInUse(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'EADDRINUSE'));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(false)));
  });
}
