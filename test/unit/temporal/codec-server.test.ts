/**
 * `infir2 codec-server`'s HTTP side (Temporal's remote codec protocol), on a free port: /encode and /decode in
 * proto3 JSON, the CORS preflight the Web UI sends, origins it must refuse, and bad requests.
 */
import { request } from 'node:http';
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

function call(method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(`${h.url}${path}`, { method, headers }, (res) => {
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

describe('codec server', () => {
  const plain = payloadToJson(defaultPayloadConverter.toPayload({ runDir: '/shared/runs/x' })!);

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
