/**
 * Whether the Temporal server can take a step's outcome now (activities/server-wait.ts): the worker records a
 * heartbeat of the step's own task, as the SDK would, and sees whether the server stored it. A cheaper call
 * (GetSystemInfo) is not enough: with its database down the server still answers it, and drops the outcome.
 */
import { defaultPayloadConverter, type PayloadCodec } from '@temporalio/common';
import type { NativeConnection } from '@temporalio/worker';
import type { Progress } from '../plan/contracts.js';

/** gRPC codes of a server that is down, restarting, overloaded or without its database: ask again later. */
const TRANSIENT = new Set([1 /* CANCELLED */, 2 /* UNKNOWN */, 4 /* DEADLINE_EXCEEDED */, 8 /* RESOURCE_EXHAUSTED */, 10 /* ABORTED */, 13 /* INTERNAL */, 14 /* UNAVAILABLE */]);

export type CompletionProbe = (taskToken: Uint8Array, progress: Progress) => Promise<boolean>;

export function completionProbe(connection: NativeConnection, namespace: string, codec: PayloadCodec, identity: string): CompletionProbe {
  return async (taskToken, progress) => {
    try {
      // The same details the SDK's heartbeats carry (encrypted when the worker encrypts), so `status` reads on.
      const payloads = await codec.encode([defaultPayloadConverter.toPayload({ ...progress, updatedAt: new Date().toISOString() })]);
      await connection.withDeadline(Date.now() + 3_000, () =>
        connection.workflowService.recordActivityTaskHeartbeat({ namespace, taskToken, details: { payloads }, identity }),
      );
      return true;
    } catch (err) {
      // Any other answer (NOT_FOUND: the server has timed the attempt out) is definite: waiting cannot change it.
      const code = (err as { code?: unknown }).code;
      return typeof code === 'number' && !TRANSIENT.has(code);
    }
  };
}
