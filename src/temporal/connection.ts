/**
 * Connect to Temporal the way Temporal's own tools do: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY,
 * the TLS variables and the profile file (via @temporalio/envconfig). An unreachable server is an
 * UnreachableError (exit 3, with the hint to run `infir2 up`). The client encrypts and decrypts payloads when
 * INFIR2_CODEC_KEY is set (codec.ts).
 */
import { Client, Connection } from '@temporalio/client';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import { UnreachableError, UsageError } from '../errors.js';
import { dataConverterFromEnv } from './codec.js';

export const DEFAULT_ADDRESS = 'localhost:7233';

export function connectConfig() {
  const cfg = loadClientConnectConfig();
  const address = cfg.connectionOptions.address ?? process.env.TEMPORAL_ADDRESS ?? DEFAULT_ADDRESS;
  return { ...cfg, connectionOptions: { ...cfg.connectionOptions, address }, namespace: cfg.namespace ?? 'default' };
}

/** gRPC status NOT_FOUND (the SDK's errors carry the raw code). */
const GRPC_NOT_FOUND = 5;

/** Fail fast (seconds, not the SDK's long retry) when nothing listens. */
const CONNECT_TIMEOUT_MS = 5_000;

export async function connectClient(): Promise<{ client: Client; connection: Connection; namespace: string }> {
  const cfg = connectConfig();
  const address = cfg.connectionOptions.address;
  // A malformed key is a usage error before any connection is made.
  const dataConverter = dataConverterFromEnv();
  try {
    const connection = await Connection.connect({ ...cfg.connectionOptions, address, connectTimeout: CONNECT_TIMEOUT_MS });
    // Connection.connect is lazy about the server: one cheap call proves it is there and has the namespace.
    try {
      await connection.workflowService.describeNamespace({ namespace: cfg.namespace });
    } catch (err) {
      await connection.close();
      // A server that answers but has no such namespace is a setting to fix, not an outage.
      if ((err as { code?: number }).code === GRPC_NOT_FOUND) {
        throw new UsageError(`TEMPORAL_NAMESPACE: no namespace '${cfg.namespace}' on ${address} (the embedded server has 'default')`);
      }
      throw err;
    }
    return { client: new Client({ connection, namespace: cfg.namespace, dataConverter }), connection, namespace: cfg.namespace };
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UnreachableError(address, err);
  }
}
