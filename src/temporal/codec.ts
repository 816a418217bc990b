/**
 * Optional payload encryption: a Temporal PayloadCodec with AES-256-GCM (node:crypto), keyed by INFIR2_CODEC_KEY
 * (codec-key.ts). Each payload (the Plan, step results, heartbeat details, failures' details, memos, summaries)
 * becomes one `binary/encrypted` payload whose data is a random 12-byte nonce, the ciphertext of the original
 * Payload proto (`temporal.api.common.v1.Payload`, metadata and data both) and the 16-byte GCM tag; its metadata
 * names the key id, which is also bound into the tag. Search attributes, workflow ids, activity types and task
 * queues are not payloads: they stay readable (the SDK never passes them to codecs).
 *
 * Codecs run outside the workflow sandbox: the worker (`dataConverter: { payloadCodecs }`) and the client use
 * them; the workflow bundle does not.
 *
 * A process without the key keeps a pass-through codec: plain payloads are read as always, and an encrypted one
 * fails with a line that says so instead of the converter's "Unknown encoding: binary/encrypted".
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { DataConverter, Payload, PayloadCodec } from '@temporalio/common';
import proto from '@temporalio/proto';
import { CODEC_KEY_ENV, codecKeyFromEnv, type CodecKey } from './codec-key.js';

const PayloadProto = proto.temporal.api.common.v1.Payload;

export const ENCODING = 'binary/encrypted';
export const METADATA_KEY_ID = 'encryption-key-id';
export const METADATA_CIPHER = 'encryption-cipher';
export const CIPHER = 'AES-256-GCM';
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** A payload the codec cannot decode (wrong key, no key, damaged); its message is the whole story. */
export class CodecError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CodecError';
  }
}

/** Whether `err` is, or was caused by, a CodecError (the SDK may wrap what a codec throws). */
export function isCodecError(err: unknown): boolean {
  return err instanceof CodecError || (err instanceof Error && err.cause instanceof CodecError);
}

/** The CodecError itself, to be shown as it is. */
export function codecError(err: unknown): CodecError {
  return err instanceof CodecError ? err : ((err as Error).cause as CodecError);
}

const utf8 = (b: Uint8Array | null | undefined) => (b ? Buffer.from(b).toString('utf8') : '');

/** Whether the payload was written by an encrypting codec (ours or any that marks itself so). */
export function isEncrypted(p: Payload): boolean {
  return utf8(p.metadata?.encoding) === ENCODING;
}

export class EncryptionCodec implements PayloadCodec {
  readonly keyId: string;
  readonly #key: Buffer;

  constructor({ key, id }: CodecKey) {
    this.#key = key;
    this.keyId = id;
  }

  async encode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((p) => this.encryptOne(p));
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((p) => (isEncrypted(p) ? this.decryptOne(p) : p));
  }

  encryptOne(p: Payload): Payload {
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#key, nonce);
    cipher.setAAD(Buffer.from(this.keyId, 'utf8'));
    const body = Buffer.concat([cipher.update(PayloadProto.encode(p).finish()), cipher.final()]);
    return {
      metadata: {
        encoding: Buffer.from(ENCODING),
        [METADATA_CIPHER]: Buffer.from(CIPHER),
        [METADATA_KEY_ID]: Buffer.from(this.keyId),
      },
      data: Buffer.concat([nonce, body, cipher.getAuthTag()]),
    };
  }

  decryptOne(p: Payload): Payload {
    const id = utf8(p.metadata?.[METADATA_KEY_ID]);
    const cipherName = utf8(p.metadata?.[METADATA_CIPHER]);
    if (cipherName && cipherName !== CIPHER) throw new CodecError(`payload encrypted with ${cipherName}; this process decrypts ${CIPHER} only`);
    if (id !== this.keyId) {
      throw new CodecError(`payload encrypted with key id ${id || '(none)'}; this process has key id ${this.keyId} (set ${CODEC_KEY_ENV} to the key the run was written with)`);
    }
    const data = Buffer.from(p.data ?? new Uint8Array());
    if (data.length < NONCE_BYTES + TAG_BYTES) throw new CodecError(`payload encrypted with key id ${id} is damaged: ${data.length} bytes, too short`);
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#key, data.subarray(0, NONCE_BYTES));
      decipher.setAAD(Buffer.from(id, 'utf8'));
      decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
      const plain = Buffer.concat([decipher.update(data.subarray(NONCE_BYTES, data.length - TAG_BYTES)), decipher.final()]);
      return PayloadProto.decode(plain);
    } catch {
      throw new CodecError(`payload encrypted with key id ${id} is damaged: it fails authentication (altered in storage or in transit)`);
    }
  }
}

/** The codec of a process that has no key: plain payloads pass, an encrypted one is refused with a clear line. */
export class NoKeyCodec implements PayloadCodec {
  async encode(payloads: Payload[]): Promise<Payload[]> {
    return payloads;
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    for (const p of payloads) {
      if (isEncrypted(p)) {
        const id = utf8(p.metadata?.[METADATA_KEY_ID]) || '(none)';
        throw new CodecError(`payload encrypted with key id ${id}; ${CODEC_KEY_ENV} is not set in this process`);
      }
    }
    return payloads;
  }
}

/** The codec this process uses: encrypting with INFIR2_CODEC_KEY when it is set, else pass-through. */
export function codecFromEnv(env: NodeJS.ProcessEnv = process.env): EncryptionCodec | NoKeyCodec {
  const key = codecKeyFromEnv(env);
  return key ? new EncryptionCodec(key) : new NoKeyCodec();
}

/** The data converter for clients and workers: the default payload converter behind this process's codec. */
export function dataConverterFromEnv(env: NodeJS.ProcessEnv = process.env): DataConverter {
  return { payloadCodecs: [codecFromEnv(env)] };
}
