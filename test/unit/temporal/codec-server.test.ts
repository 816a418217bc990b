/**
 * `infir2 codec-server`'s HTTP side (Temporal's remote codec protocol), on a free port: /encode and /decode in
 * proto3 JSON, the CORS preflight the Web UI sends, origins it must refuse, and bad requests; who may call (its own
 * user, or the bearer token) and the limits on what one request may hold.
 */
import { execFile } from 'node:child_process';
import { request } from 'node:http';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultPayloadConverter } from '@temporalio/common';
import { defaultKeyId } from '../../../src/temporal/codec-key.js';
import { EncryptionCodec } from '../../../src/temporal/codec.js';
import { allowedOrigins, payloadFromJson, payloadToJson, startCodecServer, type CodecServerHandle } from '../../../src/temporal/codec-server.js';

const key = randomBytes(32);
const codec = new EncryptionCodec({ key, id: defaultKeyId(key) });
const UI = 'http://127.0.0.1:8233';
let h: CodecServerHandle;
const logged: string[] = [];

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function call(method: string, path: string, headers: Record<string, string> = {}, body?: string, url = h.url): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { method, headers }, (res) => {
      let b = '';
      res.on('data', (c) => (b += c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: b }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const post = (path: string, payloads: unknown, headers: Record<string, string> = {}) =>
  call('POST', path, { 'Content-Type': 'application/json', 'X-Namespace': 'default', ...headers }, JSON.stringify({ payloads }));

beforeAll(async () => {
  h = await startCodecServer({ codec, port: 0, corsOrigins: [`${UI}/`], log: (l) => logged.push(l) });
});
afterAll(async () => h?.close());

const plain0 = payloadToJson(defaultPayloadConverter.toPayload({ runDir: '/shared/runs/x' })!);

describe('codec server', () => {
  const plain = plain0;

  it('encodes, then decodes back to the same proto3 JSON payload', async () => {
    const enc = await post('/encode', [plain]);
    expect(enc.status).toBe(200);
    expect(enc.headers['content-type']).toBe('application/json');
    const encrypted = JSON.parse(enc.body).payloads;
    expect(Buffer.from(encrypted[0].metadata.encoding, 'base64').toString()).toBe('binary/encrypted');
    expect(enc.body).not.toContain(Buffer.from('/shared/runs/x').toString('base64'));
    const dec = await post('/decode', encrypted, { Origin: UI });
    expect(dec.status).toBe(200);
    expect(JSON.parse(dec.body)).toEqual({ payloads: [plain] });
    expect(dec.headers['access-control-allow-origin']).toBe(UI);
    expect(dec.headers['access-control-allow-credentials']).toBe('true');
  });

  it("answers the Web UI's preflight, from its origin or its localhost twin", async () => {
    for (const origin of [UI, 'http://localhost:8233']) {
      const r = await call('OPTIONS', '/decode', { Origin: origin, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'content-type,x-namespace' });
      expect(r.status).toBe(204);
      expect(r.headers['access-control-allow-origin']).toBe(origin);
      expect(r.headers['access-control-allow-credentials']).toBe('true');
      expect(String(r.headers['access-control-allow-methods'])).toMatch(/POST/);
      expect(String(r.headers['access-control-allow-headers']).toLowerCase().split(/,\s*/)).toEqual(expect.arrayContaining(['content-type', 'x-namespace']));
    }
  });

  it('refuses pages of any other origin, without CORS headers', async () => {
    const pre = await call('OPTIONS', '/decode', { Origin: 'http://evil.example', 'Access-Control-Request-Method': 'POST' });
    expect(pre.status).toBe(403);
    expect(pre.headers['access-control-allow-origin']).toBeUndefined();
    const r = await post('/decode', [plain], { Origin: 'http://127.0.0.1:9999' });
    expect(r.status).toBe(403);
    expect(r.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('hands back a payload of another key as it came (the rest still decodes) and logs why', async () => {
    const otherKey = randomBytes(32);
    const other = new EncryptionCodec({ key: otherKey, id: 'other' });
    const [theirs] = await other.encode([defaultPayloadConverter.toPayload(1)!]);
    const [ours] = await codec.encode([defaultPayloadConverter.toPayload(2)!]);
    const r = await post('/decode', [payloadToJson(theirs!), payloadToJson(ours!)]);
    expect(r.status).toBe(200);
    const [a, b] = JSON.parse(r.body).payloads;
    expect(a).toEqual(payloadToJson(theirs!));
    expect(defaultPayloadConverter.fromPayload(payloadFromJson(b, 1))).toBe(2);
    expect(logged.at(-1)).toMatch(/^decode: payload encrypted with key id other; this process has key id /);
  });

  it('answers bad requests with a status and a line', async () => {
    expect((await call('POST', '/decode', {}, '{oops')).status).toBe(400);
    expect((await call('POST', '/decode', {}, '{"nope": 1}')).body).toMatch(/expected \{"payloads"/);
    expect((await post('/decode', [{ metadata: { encoding: '***' } }])).body).toMatch(/payloads\[0\]\.metadata\.encoding: expected base64/);
    expect((await call('GET', '/decode')).status).toBe(405);
    expect((await call('POST', '/other', {}, '{}')).status).toBe(404);
  });

  it('reads origins as origins', () => {
    expect([...allowedOrigins(['http://localhost:8233/', 'https://temporal.example.org'])]).toEqual([
      'http://localhost:8233', 'http://127.0.0.1:8233', 'https://temporal.example.org',
    ]);
  });
});

describe('who may call', () => {
  const TOKEN = 'a'.repeat(20) + 'bearer-token';
  let locked: CodecServerHandle;
  beforeAll(async () => {
    // No local user allowed: only the token opens it.
    locked = await startCodecServer({ codec, port: 0, corsOrigins: [], log: () => undefined, access: { token: TOKEN, uids: [] } });
  });
  afterAll(async () => locked?.close());
  const body = JSON.stringify({ payloads: [payloadToJson(defaultPayloadConverter.toPayload('x')!)] });

  it('serves the bearer token, refuses a wrong one (401) and a caller without one whose user is not allowed (403)', async () => {
    expect((await call('POST', '/encode', { Authorization: `Bearer ${TOKEN}` }, body, locked.url)).status).toBe(200);
    const wrong = await call('POST', '/encode', { Authorization: 'Bearer guess-guess-guess-guess' }, body, locked.url);
    expect(wrong.status).toBe(401);
    expect(wrong.headers['www-authenticate']).toBe('Bearer');
    expect(wrong.body).toBe('Authorization: not the bearer token of this codec server\n');
    const none = await call('POST', '/decode', {}, body, locked.url);
    expect(none.status).toBe(403);
    expect(none.body).toMatch(new RegExp(`^the caller runs as uid ${process.geteuid!()}, which may not use this codec server`));
  });

  it('a server with no token refuses any Authorization header (401), and serves its own user without one', async () => {
    expect((await call('POST', '/encode', { Authorization: `Bearer ${TOKEN}` }, body)).status).toBe(401);
    expect((await call('POST', '/encode', {}, body)).status).toBe(200);
  });

  it.skipIf(process.geteuid?.() !== 0)('refuses a local caller running as another user (nobody), who has no token', async () => {
    const code = `fetch(${JSON.stringify(`${h.url}/decode`)}, { method: 'POST', body: ${JSON.stringify(body)} }).then(async (r) => console.log(r.status, await r.text()))`;
    const { stdout } = await promisify(execFile)(process.execPath, ['-e', code], { uid: 65534, gid: 65534 });
    expect(stdout).toBe('403 the caller runs as uid 65534, which may not use this codec server (its own user: 0; --allow-uid, or a bearer token: INFIR2_CODEC_TOKEN)\n\n');
  });
});

describe('what one request may hold', () => {
  it('a million empty payloads are refused (413) as they arrive, before any is parsed', async () => {
    const flood = `{"payloads":[${'{},'.repeat(1_000_000)}{}]}`;
    const r = await call('POST', '/decode', { 'Content-Type': 'application/json' }, flood);
    expect(r.status).toBe(413);
    expect(r.body).toBe('more than 4096 payloads (or more JSON than they could hold) in one request\n');
    // The server lives on.
    expect((await post('/encode', [plain0])).status).toBe(200);
  });

  it('refuses more payloads, more decoded bytes or a larger body than its limits (413), naming the limit', async () => {
    const small = await startCodecServer({ codec, port: 0, corsOrigins: [], log: () => undefined, limits: { maxPayloads: 3, maxDecodedBytes: 1000, maxBodyBytes: 4000 } });
    try {
      const p = payloadToJson(defaultPayloadConverter.toPayload('x')!);
      const send = (payloads: unknown[]) => call('POST', '/encode', {}, JSON.stringify({ payloads }), small.url);
      expect((await send([p, p, p])).status).toBe(200);
      expect((await send([p, p, p, p])).body).toBe('4 payloads in one request; at most 3\n');
      const big = { metadata: {}, data: Buffer.alloc(1500).toString('base64') };
      expect(await send([big])).toMatchObject({ status: 413, body: 'the payloads hold 1500 bytes; at most 1000 per request\n' });
      expect(await send([{ data: 'A'.repeat(5000) }])).toMatchObject({ status: 413, body: 'request body over 4000 bytes\n' });
    } finally {
      await small.close();
    }
  });
});
