/**
 * The worker's connection (a NativeConnection from @temporalio/worker), kept apart from the client's so that
 * the CLI's read-only verbs never load the worker SDK.
 */
import { NativeConnection } from '@temporalio/worker';
import { UnreachableError } from '../errors.js';
import { connectConfig } from './connection.js';

export async function connectWorker(): Promise<{ connection: NativeConnection; namespace: string }> {
  const cfg = connectConfig();
  const address = cfg.connectionOptions.address;
  try {
    const connection = await NativeConnection.connect({ ...cfg.connectionOptions, address });
    return { connection, namespace: cfg.namespace };
  } catch (err) {
    throw new UnreachableError(address, err);
  }
}
