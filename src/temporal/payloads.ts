/**
 * Payloads read from raw server responses (a history's events, a description's pending activities), which the
 * SDK hands over as they are stored: with INFIR2_CODEC_KEY set they are encrypted, so each goes through the
 * client's codecs before its converter, exactly as the SDK does for what it decodes itself (results, queries,
 * memos, failures).
 */
import type { LoadedDataConverter, Payload } from '@temporalio/common';

/** A Client or WorkflowClient: both carry the data converter they were made with. */
export interface HasDataConverter {
  options: { loadedDataConverter: LoadedDataConverter };
}

/** Run the codecs (last first, as the SDK does); a codec's error (no key, the wrong key, damage) is thrown. */
async function throughCodecs(client: HasDataConverter, payload: unknown): Promise<Payload> {
  let decoded = [payload as Payload];
  for (const codec of [...client.options.loadedDataConverter.payloadCodecs].reverse()) decoded = await codec.decode(decoded);
  return decoded[0]!;
}

/**
 * One raw payload decoded through `client`'s codecs and converter. null when absent or not readable as a value
 * (a converter error); a codec error is thrown: it says what to fix.
 */
export async function decodeRawPayload<T>(client: HasDataConverter, payload: unknown): Promise<T | null> {
  if (!payload) return null;
  const decoded = await throughCodecs(client, payload);
  try {
    return client.options.loadedDataConverter.payloadConverter.fromPayload(decoded) as T;
  } catch {
    return null;
  }
}

/** Like decodeRawPayload, but a payload that cannot be read as a value is an error too. */
export async function decodeRequiredPayload<T>(client: HasDataConverter, payload: unknown): Promise<T> {
  return client.options.loadedDataConverter.payloadConverter.fromPayload(await throughCodecs(client, payload)) as T;
}

/**
 * A raw failure's message. With encryption on, failures carry their message and stack trace in an encoded
 * payload (`encodedAttributes`) and only "Encoded failure" in the clear.
 */
export async function failureMessage(client: HasDataConverter, failure: { message?: string | null; encodedAttributes?: unknown }): Promise<string> {
  if (failure.encodedAttributes) {
    const attrs = await decodeRawPayload<{ message?: unknown }>(client, failure.encodedAttributes);
    if (typeof attrs?.message === 'string') return attrs.message;
  }
  return failure.message ?? '';
}
