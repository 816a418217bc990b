/**
 * Where `infir2 up` puts its server: `--port`, else the port of TEMPORAL_ADDRESS, else 7233. Every other verb
 * talks to TEMPORAL_ADDRESS, so `up` takes it too: a server started on another port would leave them talking to
 * nothing (or to someone else's server). An address that `up` cannot serve (another host) or that disagrees
 * with `--port` is refused before anything starts.
 */
import { UsageError } from '../errors.js';
import { intFlag } from './args.js';

export const DEFAULT_PORT = 7233;

/** The dev server listens on the loopback interface: these names reach it. */
const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);

/** `host:port` → its parts; null when it has no numeric port. */
function split(address: string): { host: string; port: number } | null {
  const m = /^(.*):(\d+)$/.exec(address.trim());
  if (!m) return null;
  const port = Number(m[2]);
  return m[1] && port >= 1 && port <= 65535 ? { host: m[1], port } : null;
}

export function upPort(portFlag: string | undefined, envAddress: string | undefined): number {
  const flag = portFlag === undefined ? null : intFlag('port', portFlag, DEFAULT_PORT, 65535);
  const env = envAddress?.trim() ? envAddress.trim() : null;
  if (env === null) return flag ?? DEFAULT_PORT;
  const parts = split(env);
  if (!parts) throw new UsageError(`TEMPORAL_ADDRESS: expected host:port (e.g. 127.0.0.1:7233), got '${env}'`);
  if (!LOCAL_HOSTS.has(parts.host)) {
    throw new UsageError(
      `TEMPORAL_ADDRESS=${env} is not this machine: \`up\` starts the embedded server on 127.0.0.1; unset TEMPORAL_ADDRESS to use it, or keep it and start only workers (\`infir2 worker --pool NAME\`) for that server`,
    );
  }
  if (flag !== null && flag !== parts.port) {
    throw new UsageError(`--port ${flag} disagrees with TEMPORAL_ADDRESS=${env}, which the other verbs use: drop --port, or set TEMPORAL_ADDRESS=127.0.0.1:${flag}`);
  }
  return parts.port;
}

/** The line `up` ends with when the other verbs would not find its server by themselves. */
export function addressHint(address: string, envAddress: string | undefined): string | null {
  if (envAddress?.trim()) return null;
  const parts = split(address);
  return parts && parts.port !== DEFAULT_PORT ? `for the other verbs: export TEMPORAL_ADDRESS=${address}` : null;
}
