/**
 * One request to the codec server, read within bounds: who may send it, and how much it may hold. A request
 * under the body cap can still be hostile: 63 MiB of 5.5 M empty payloads (`{}` each) became 5.5 M objects and
 * buffers, 4.5 GB, and the server died of heap exhaustion (issue 30). So the body's JSON objects are counted as the
 * bytes arrive (every payload is one; nothing is parsed until the count fits), and the payloads' decoded bytes are
 * summed before anything is decrypted: past a limit the answer is 413, the rest of the body is discarded unread.
 */
import { timingSafeEqual, createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Payload } from '@temporalio/common';
import { loopbackPeerUid } from '../util/peer-uid.js';

export interface CodecLimits {
  /** Bytes of request body. */
  maxBodyBytes: number;
  /** Payloads in one request. */
  maxPayloads: number;
  /** Bytes of the payloads' data and metadata once base64-decoded. */
  maxDecodedBytes: number;
}

/**
 * A Temporal payload is at most 2 MB (the server's blob limit) and the Web UI and the CLI ask for one field's
 * payloads at a time (an activity's input, a result): these admit six of the largest payloads in one request, and
 * keep the server's peak under 300 MB with the largest request it accepts (bench/codec-server-memory.ts).
 */
export const DEFAULT_LIMITS: CodecLimits = { maxBodyBytes: 16 * 1024 * 1024, maxPayloads: 4096, maxDecodedBytes: 12 * 1024 * 1024 };

export class BadRequest extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export interface JsonPayload {
  metadata?: Record<string, string> | null;
  data?: string | null;
}

/** Who may call: callers holding the bearer token, or (without one) local callers running as one of `uids`. */
export interface CodecAccess {
  /** The bearer token (INFIR2_CODEC_TOKEN); null: none accepted. */
  token: string | null;
  /** Local users whose processes may call without a token (the server's own by default). */
  uids: number[];
}

const digest = (s: string) => createHash('sha256').update(s).digest();
const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|::ffff:127\.\d+\.\d+\.\d+)$/;

/** Why `req` may not be served (an HTTP status and a line), or null when it may. */
export function accessProblem(req: IncomingMessage, access: CodecAccess): BadRequest | null {
  const auth = req.headers.authorization;
  if (auth !== undefined) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    // Compared as digests, in constant time: the comparison says nothing about how much of a guess was right.
    if (m && access.token !== null && timingSafeEqual(digest(m[1]!), digest(access.token))) return null;
    return new BadRequest(401, `Authorization: ${access.token === null ? 'this codec server takes no token (INFIR2_CODEC_TOKEN is not set where it runs)' : 'not the bearer token of this codec server'}`);
  }
  const s = req.socket;
  const uid = s.remoteAddress && LOOPBACK.test(s.remoteAddress) && s.remotePort && s.localPort ? loopbackPeerUid(s.remotePort, s.localPort) : null;
  if (uid !== null && access.uids.includes(uid)) return null;
  return new BadRequest(
    403,
    uid === null
      ? 'not a local caller this server can identify: send Authorization: Bearer <INFIR2_CODEC_TOKEN>'
      : `the caller runs as uid ${uid}, which may not use this codec server (its own user${access.uids.length > 1 ? 's' : ''}: ${access.uids.join(', ')}; --allow-uid, or a bearer token: INFIR2_CODEC_TOKEN)`,
  );
}

/** `{`, `[`, `:` and `,`: one or more per JSON value, so their count bounds what JSON.parse would build. */
const STRUCTURAL = new Uint8Array(256);
for (const ch of '{[:,') STRUCTURAL[ch.charCodeAt(0)] = 1;
/** Structural characters a payload may bring: its object, its metadata's, a few entries each (encoding, key id…). */
const STRUCTURE_PER_PAYLOAD = 32;

/**
 * The body as text, within `limits.maxBodyBytes`, refused as it arrives once it holds more JSON structure (objects,
 * arrays, keys, elements) than `limits.maxPayloads` payloads could: millions of empty objects, keys or nested
 * arrays would each become a JavaScript value (a `{` or `,` inside a string only counts against the sender).
 */
export async function readBody(req: IncomingMessage, limits: CodecLimits): Promise<string> {
  const maxStructure = limits.maxPayloads * STRUCTURE_PER_PAYLOAD + 16;
  // With a Content-Length (the UI's fetch and the CLI send one) the bytes go straight into one buffer: no chunks
  // and a concatenated copy of them alive at once.
  const declared = Number(req.headers['content-length']);
  const whole = Number.isInteger(declared) && declared >= 0 && declared <= limits.maxBodyBytes ? Buffer.allocUnsafe(declared) : null;
  if (Number.isInteger(declared) && declared > limits.maxBodyBytes) throw new BadRequest(413, `request body over ${limits.maxBodyBytes} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  let structure = 0;
  for await (const c of req) {
    const chunk = c as Buffer;
    if (size + chunk.length > limits.maxBodyBytes) throw new BadRequest(413, `request body over ${limits.maxBodyBytes} bytes`);
    for (let i = 0; i < chunk.length; i++) structure += STRUCTURAL[chunk[i]!]!;
    if (structure > maxStructure) throw new BadRequest(413, `more than ${limits.maxPayloads} payloads (or more JSON than they could hold) in one request`);
    if (whole) {
      if (size + chunk.length > whole.length) throw new BadRequest(400, `body: longer than its Content-Length (${whole.length})`);
      chunk.copy(whole, size);
    } else chunks.push(chunk);
    size += chunk.length;
  }
  return (whole ? whole.subarray(0, size) : Buffer.concat(chunks)).toString('utf8');
}

const b64 = (s: unknown, what: string): Buffer => {
  if (typeof s !== 'string' || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(s)) throw new BadRequest(400, `${what}: expected base64`);
  return Buffer.from(s, 'base64');
};

/** base64 text's decoded size, without decoding it. */
const decodedSize = (s: unknown) => (typeof s === 'string' ? Math.floor((s.length * 3) / 4) : 0);

/** The request's payloads, refused (413) past the count or decoded-bytes limits before any is decoded. */
export function payloadsOf(body: { payloads?: unknown }, limits: CodecLimits): Payload[] {
  if (!Array.isArray(body?.payloads)) throw new BadRequest(400, 'body: expected {"payloads": [...]}');
  const list = body.payloads as JsonPayload[];
  if (list.length > limits.maxPayloads) throw new BadRequest(413, `${list.length} payloads in one request; at most ${limits.maxPayloads}`);
  let bytes = 0;
  for (const j of list) {
    if (typeof j !== 'object' || j === null) continue; // named by payloadFromJson
    bytes += decodedSize(j.data);
    for (const v of Object.values(j.metadata ?? {})) bytes += decodedSize(v);
  }
  if (bytes > limits.maxDecodedBytes) throw new BadRequest(413, `the payloads hold ${bytes} bytes; at most ${limits.maxDecodedBytes} per request`);
  return list.map(payloadFromJson);
}

export function payloadFromJson(j: JsonPayload, i: number): Payload {
  if (typeof j !== 'object' || j === null) throw new BadRequest(400, `payloads[${i}]: expected an object`);
  const metadata = Object.fromEntries(Object.entries(j.metadata ?? {}).map(([k, v]) => [k, b64(v, `payloads[${i}].metadata.${k}`)]));
  return { metadata, data: j.data == null ? new Uint8Array() : b64(j.data, `payloads[${i}].data`) };
}

export function payloadToJson(p: Payload): JsonPayload {
  return {
    metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v ?? new Uint8Array()).toString('base64')])),
    data: Buffer.from(p.data ?? new Uint8Array()).toString('base64'),
  };
}
