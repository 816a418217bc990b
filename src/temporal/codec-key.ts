/**
 * The payload encryption key, from the environment: `INFIR2_CODEC_KEY` holds 32 bytes (AES-256) as 64 hex
 * digits or as base64; `INFIR2_CODEC_KEY_ID` optionally names it (default: derived from a hash of the key).
 * Unset: no encryption. Set but malformed: a UsageError naming the variable (every verb exits 2 on it, before
 * doing anything). node:crypto only, so that `infir2 plan` can check the key without loading the Temporal SDK.
 */
import { createHash } from 'node:crypto';
import { UsageError } from '../errors.js';

export const CODEC_KEY_ENV = 'INFIR2_CODEC_KEY';
export const CODEC_KEY_ID_ENV = 'INFIR2_CODEC_KEY_ID';
export const KEY_BYTES = 32;

export interface CodecKey {
  key: Buffer;
  /** Stored in each encrypted payload's metadata: tells a wrong key apart from a damaged payload. */
  id: string;
}

const EXPECTED = `expected ${KEY_BYTES} bytes as ${KEY_BYTES * 2} hex digits or base64 (make one with \`openssl rand -hex ${KEY_BYTES}\`)`;

/** The key in `env`, null when it is unset or empty; a UsageError when it is malformed. */
export function codecKeyFromEnv(env: NodeJS.ProcessEnv = process.env): CodecKey | null {
  const raw = env[CODEC_KEY_ENV]?.trim();
  if (!raw) return null;
  const key = parseKey(raw);
  const id = env[CODEC_KEY_ID_ENV]?.trim() || defaultKeyId(key);
  if (!/^[\w.:-]{1,64}$/.test(id)) {
    throw new UsageError(`${CODEC_KEY_ID_ENV}: expected 1 to 64 letters, digits or '._:-', got '${id.slice(0, 80)}'`);
  }
  return { key, id };
}

function parseKey(raw: string): Buffer {
  // Hex first: 32 bytes of base64 are 43 or 44 characters (odd, or ending in '='), never an even run of hex digits.
  if (/^[0-9a-fA-F]+$/.test(raw) && raw.length % 2 === 0) {
    const key = Buffer.from(raw, 'hex');
    if (key.length !== KEY_BYTES) throw new UsageError(`${CODEC_KEY_ENV}: ${EXPECTED}, got ${key.length} bytes (${raw.length} hex digits)`);
    return key;
  }
  // Standard or URL-safe base64, padding optional; Buffer.from would skip stray characters silently.
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(raw)) {
    throw new UsageError(`${CODEC_KEY_ENV}: ${EXPECTED}, got ${raw.length} characters that are neither`);
  }
  const key = Buffer.from(raw.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  if (key.length !== KEY_BYTES) throw new UsageError(`${CODEC_KEY_ENV}: ${EXPECTED}, got ${key.length} bytes`);
  return key;
}

/** A key's default id: the first 8 bytes of a SHA-256 of it, in hex (names the key, reveals nothing of it). */
export function defaultKeyId(key: Buffer): string {
  return createHash('sha256').update('infir2 payload codec key id\0').update(key).digest('hex').slice(0, 16);
}
