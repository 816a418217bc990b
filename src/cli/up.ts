/**
 * `infir2 up`: the embedded default — the Temporal dev server (SQLite in the state directory, Web UI) and a
 * local worker serving the orchestrator queue and the given pools (default: `local`). Idempotent: what is
 * already up is left alone. It owns what it starts: a worker left by a server that died is stopped before a new
 * server starts, and it refuses to start beside a worker it did not start that serves the same pools.
 */
import { createServer } from 'node:net';
import { join } from 'node:path';
import { intFlag, parseVerbArgs, positionals, type Options } from './args.js';
import { addressHint, upPort } from './up-address.js';
import { readEmbedded, writeEmbedded } from './embedded.js';
import { UsageError } from '../errors.js';
import { spawnDetached, startDevServer, waitForServer } from '../temporal/dev-server.js';
import { codecKeyFromEnv } from '../temporal/codec-key.js';
import { DEFAULT_CODEC_PORT } from '../temporal/codec-server.js';
import { foreignWorkers, ownedWorkers, ownServerAlive, sameAddress, stopWorkers } from './owned-workers.js';
import { processStartTicks } from '../util/process-group.js';
import { scanWorkers, STARTED_BY_ENV } from '../workers/worker-registry.js';
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
  // TEMPORAL_ADDRESS is where every other verb looks: the server goes there unless --port says otherwise.
  const port = upPort(values.port, process.env.TEMPORAL_ADDRESS);
  const uiPort = intFlag('ui-port', values['ui-port'], port + 1000, 65535);
  const pools = values.pool?.length ? values.pool : ['local'];
  const state = stateDir();

  let current = readEmbedded();
  const serverUp = current !== null && ownServerAlive(current);
  const address = serverUp ? current!.address : `127.0.0.1:${port}`;
  if (serverUp && process.env.TEMPORAL_ADDRESS?.trim() && !sameAddress(current!.address, process.env.TEMPORAL_ADDRESS)) {
    throw new UsageError(
      `the embedded server already runs at ${current!.address} (state in ${state}), but TEMPORAL_ADDRESS=${process.env.TEMPORAL_ADDRESS.trim()}: the other verbs would not find it; set TEMPORAL_ADDRESS=${current!.address}, or \`infir2 down\` first`,
    );
  }
  if (!serverUp) {
    // Another server on the port would answer our readiness check while ours failed to bind: refuse first.
    for (const [flag, p] of [['port', port], ...(values.headless ? [] : [['ui-port', uiPort]])] as [string, number][]) {
      if (await portInUse(p)) throw new UsageError(`--${flag}: ${p} is already in use (another Temporal server? stop it, or choose another --${flag})`);
    }
  }
  const scan = scanWorkers();
  for (const line of scan.ignored) process.stderr.write(`warning: worker registry: ${line}\n`);
  let mine = ownedWorkers(state, current, scan);
  // Refused before anything starts: a worker someone else started already takes these pools' steps here.
  const foreign = foreignWorkers(state, address, pools, scan).filter((w) => !mine.includes(w.pid));
  if (foreign.length) {
    throw new UsageError(
      foreign.map(
        (w) => `a worker that \`infir2 up\` did not start already serves ${w.taskQueues.join(', ')} on ${w.address} (pid ${w.pid}, since ${w.startedAt}): stop it, or give \`up\` other --pool names`,
      ),
    );
  }
  if (serverUp) {
    process.stdout.write(`Temporal dev server already running (pid ${current!.serverPid}) at ${current!.address}\n`);
  } else {
    // Workers of a server that is gone would reconnect to the next one and go on taking steps beside the new
    // worker, unrecorded and never stopped by `down`: stop them (their trainers save) before starting anew.
    for (const pid of await stopWorkers(mine)) process.stdout.write(`stopped the earlier local worker (pid ${pid}): its server was gone\n`);
    mine = [];
    process.stdout.write(`starting the Temporal dev server (state in ${state}) ...\n`);
    // Payloads encrypted: the UI's pages decode them through `infir2 codec-server` (which the user runs: it holds the key).
    const uiCodecEndpoint = codecKeyFromEnv() && !values.headless ? `http://127.0.0.1:${DEFAULT_CODEC_PORT}` : undefined;
    const h = await startDevServer({ temporalBin: temporalBin(), stateDir: state, port, uiPort, headless: values.headless ?? false, uiCodecEndpoint });
    if (uiCodecEndpoint) process.stdout.write(`payloads are encrypted: the Web UI decodes them through ${uiCodecEndpoint} once \`infir2 codec-server\` runs\n`);
    current = { serverPid: h.pid, serverStartTicks: processStartTicks(h.pid), workerPid: null, address: h.address, uiUrl: h.uiUrl, dbFile: h.dbFile, startedAt: new Date().toISOString() };
    writeEmbedded(current);
  }
  await waitForServer(current!.address);

  const [kept, ...extra] = mine;
  if (kept) {
    // One worker per `up`: a second one it started (its state file forgotten meanwhile) would split the steps.
    for (const pid of await stopWorkers(extra)) process.stdout.write(`stopped a second local worker (pid ${pid})\n`);
    if (kept !== current!.workerPid) current = { ...current!, workerPid: kept, workerStartTicks: processStartTicks(kept) };
    writeEmbedded(current!);
    process.stdout.write(`local worker already running (pid ${kept})\n`);
  } else {
    const args = [join(projectRoot(), 'bin', 'infir2.js'), 'worker', ...pools.flatMap((p) => ['--pool', p])];
    if (values.slots) args.push('--slots', values.slots);
    const env = { ...process.env, TEMPORAL_ADDRESS: current!.address, [STARTED_BY_ENV]: state };
    const child = spawnDetached(process.execPath, args, join(state, 'worker.log'), env);
    if (!child.pid) throw new Error('could not start the local worker');
    current = { ...current!, workerPid: child.pid, workerStartTicks: processStartTicks(child.pid), pools };
    writeEmbedded(current);
    process.stdout.write(`local worker started (pid ${child.pid}; pools: ${pools.join(', ')}; log: ${join(state, 'worker.log')})\n`);
  }
  process.stdout.write(`Temporal: ${current!.address}\n`);
  if (current!.uiUrl) process.stdout.write(`Web UI:   ${current!.uiUrl}\n`);
  const hint = addressHint(current!.address, process.env.TEMPORAL_ADDRESS);
  if (hint) process.stdout.write(`${hint}\n`);
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
