/**
 * Payload encryption (issue 13): the key from the environment, the AES-256-GCM codec (round trip, fresh nonces,
 * tamper detection, the wrong key told apart from damage, a process without the key), raw payloads read
 * through a client's codecs, and every verb's exit 2 on a malformed key.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { defaultFailureConverter, defaultPayloadConverter, type LoadedDataConverter, type Payload } from '@temporalio/common';
import { UsageError } from '../../../src/errors.js';
import { codecKeyFromEnv, defaultKeyId } from '../../../src/temporal/codec-key.js';
import { CodecError, codecFromEnv, ENCODING, EncryptionCodec, METADATA_KEY_ID, NoKeyCodec } from '../../../src/temporal/codec.js';
import { decodeRawPayload, decodeRequiredPayload, failureMessage } from '../../../src/temporal/payloads.js';
import { runInProcess } from '../cli/run-cli.js';

const KEY = Buffer.from('000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f', 'hex');
const text = (b: Uint8Array | null | undefined) => Buffer.from(b ?? []).toString('utf8');
const codecWith = (key: Buffer, id?: string) => new EncryptionCodec({ key, id: id ?? defaultKeyId(key) });
const plan = { recipe: 'tiny', runDir: '/shared/runs/secret-project-7', steps: [{ argv: ['torchrun', '--save', '/shared/ckpt'] }] };
const clientWith = (codec: EncryptionCodec | NoKeyCodec) => ({
  options: { loadedDataConverter: { payloadConverter: defaultPayloadConverter, failureConverter: defaultFailureConverter, payloadCodecs: [codec] } as LoadedDataConverter },
});

describe('INFIR2_CODEC_KEY', () => {
  it('unset or empty: no key', () => {
    expect(codecKeyFromEnv({})).toBeNull();
    expect(codecKeyFromEnv({ INFIR2_CODEC_KEY: '  ' })).toBeNull();
    expect(codecFromEnv({})).toBeInstanceOf(NoKeyCodec);
  });

  it('takes 64 hex digits, base64 and unpadded URL-safe base64 of the same 32 bytes alike', () => {
    for (const raw of [KEY.toString('hex'), KEY.toString('hex').toUpperCase(), KEY.toString('base64'), KEY.toString('base64url'), ` ${KEY.toString('base64')}\n`]) {
      const k = codecKeyFromEnv({ INFIR2_CODEC_KEY: raw })!;
      expect(k.key.equals(KEY), raw).toBe(true);
      expect(k.id).toBe(defaultKeyId(KEY));
    }
  });

  it('names the key by a hash (16 hex digits, not the key) unless INFIR2_CODEC_KEY_ID says otherwise', () => {
    expect(defaultKeyId(KEY)).toMatch(/^[0-9a-f]{16}$/);
    expect(KEY.toString('hex')).not.toContain(defaultKeyId(KEY));
    expect(defaultKeyId(randomBytes(32))).not.toBe(defaultKeyId(KEY));
    expect(codecKeyFromEnv({ INFIR2_CODEC_KEY: KEY.toString('hex'), INFIR2_CODEC_KEY_ID: 'team-a.2026' })!.id).toBe('team-a.2026');
    expect(() => codecKeyFromEnv({ INFIR2_CODEC_KEY: KEY.toString('hex'), INFIR2_CODEC_KEY_ID: 'has space' })).toThrow(/^INFIR2_CODEC_KEY_ID: expected 1 to 64 letters/);
  });

  it.each([
    ['12 bytes of base64', randomBytes(12).toString('base64'), /got 12 bytes$/],
    ['31 bytes of hex', randomBytes(31).toString('hex'), /got 31 bytes \(62 hex digits\)$/],
    ['33 bytes of base64', randomBytes(33).toString('base64'), /got 33 bytes$/],
    ['neither', 'not a key!', /got 10 characters that are neither$/],
  ])('malformed (%s): one usage line naming the variable and what it expects', (_, raw, tail) => {
    let err: unknown;
    try {
      codecKeyFromEnv({ INFIR2_CODEC_KEY: raw });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UsageError);
    const lines = (err as UsageError).lines;
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^INFIR2_CODEC_KEY: expected 32 bytes as 64 hex digits or base64 /);
    expect(lines[0]).toMatch(tail);
  });
});

describe('EncryptionCodec', () => {
  const codec = codecWith(KEY);

  it('round-trips a payload, metadata and data, as one binary/encrypted payload naming its key id', async () => {
    const p = defaultPayloadConverter.toPayload(plan)!;
    const [enc] = await codec.encode([p]);
    expect(text(enc!.metadata!.encoding)).toBe(ENCODING);
    expect(text(enc!.metadata![METADATA_KEY_ID])).toBe(codec.keyId);
    expect(text(enc!.data)).not.toContain('secret-project');
    expect(text(enc!.data)).not.toContain('json/plain');
    const [dec] = await codec.decode([enc!]);
    expect(text(dec!.metadata!.encoding)).toBe('json/plain');
    expect(defaultPayloadConverter.fromPayload(dec!)).toEqual(plan);
  });

  it('encrypts the same payload differently each time (a fresh nonce), and empty data too', async () => {
    const p = defaultPayloadConverter.toPayload(plan)!;
    const [a, b] = await codec.encode([p, p]);
    expect(Buffer.from(a!.data!).equals(Buffer.from(b!.data!))).toBe(false);
    const empty: Payload = { metadata: { encoding: Buffer.from('binary/null') }, data: new Uint8Array() };
    const [dec] = await codec.decode(await codec.encode([empty]));
    expect(text(dec!.metadata!.encoding)).toBe('binary/null');
    expect(dec!.data?.length ?? 0).toBe(0);
  });

  it('passes plain payloads through on decode (runs written before the key was set stay readable)', async () => {
    const p = defaultPayloadConverter.toPayload(plan)!;
    expect((await codec.decode([p]))[0]).toBe(p);
  });

  it('detects a changed byte anywhere in the data, and a key id relabelled to its own', async () => {
    const [enc] = await codec.encode([defaultPayloadConverter.toPayload(plan)!]);
    const data = Buffer.from(enc!.data!);
    for (const at of [0, 12, Math.floor(data.length / 2), data.length - 1]) {
      const bad = Buffer.from(data);
      bad[at]! ^= 1;
      await expect(codec.decode([{ ...enc!, data: bad }])).rejects.toThrow(`payload encrypted with key id ${codec.keyId} is damaged: it fails authentication`);
    }
    await expect(codec.decode([{ ...enc!, data: data.subarray(0, 20) }])).rejects.toThrow(/is damaged: 20 bytes, too short/);
    // The key id is bound into the tag: the other key's payload relabelled with this key's id is damage, not a key.
    const other = codecWith(randomBytes(32), 'other');
    const [theirs] = await other.encode([defaultPayloadConverter.toPayload(plan)!]);
    const relabelled = { ...theirs!, metadata: { ...theirs!.metadata, [METADATA_KEY_ID]: Buffer.from(codec.keyId) } };
    await expect(codec.decode([relabelled])).rejects.toThrow(/is damaged/);
  });

  it('tells the wrong key apart from damage: both key ids and the variable to set', async () => {
    const writer = codecWith(KEY, 'alpha');
    const reader = codecWith(randomBytes(32), 'beta');
    const enc = await writer.encode([defaultPayloadConverter.toPayload(plan)!]);
    const err = await reader.decode(enc).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CodecError);
    expect((err as Error).message).toBe('payload encrypted with key id alpha; this process has key id beta (set INFIR2_CODEC_KEY to the key the run was written with)');
  });

  it('a process without the key reads plain payloads and refuses encrypted ones with a line that says why', async () => {
    const none = new NoKeyCodec();
    const p = defaultPayloadConverter.toPayload(plan)!;
    expect(await none.encode([p])).toEqual([p]);
    expect(await none.decode([p])).toEqual([p]);
    await expect(none.decode(await codec.encode([p]))).rejects.toThrow(`payload encrypted with key id ${codec.keyId}; INFIR2_CODEC_KEY is not set in this process`);
  });
});

describe('raw payloads through the client', () => {
  const codec = codecWith(KEY);

  it('decodes an encrypted payload from a history event; an unreadable value is null, a key problem an error', async () => {
    const [enc] = await codec.encode([defaultPayloadConverter.toPayload(plan)!]);
    expect(await decodeRawPayload(clientWith(codec), enc)).toEqual(plan);
    expect(await decodeRequiredPayload(clientWith(codec), enc)).toEqual(plan);
    expect(await decodeRawPayload(clientWith(codec), undefined)).toBeNull();
    expect(await decodeRawPayload(clientWith(codec), { metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from('{not json') })).toBeNull();
    await expect(decodeRawPayload(clientWith(new NoKeyCodec()), enc)).rejects.toThrow(/INFIR2_CODEC_KEY is not set/);
    await expect(decodeRawPayload(clientWith(codecWith(randomBytes(32), 'beta')), enc)).rejects.toThrow(/this process has key id beta/);
  });

  it("reads an encoded failure's message (encrypted with the payloads), and a plain one as it is", async () => {
    const [attrs] = await codec.encode([defaultPayloadConverter.toPayload({ message: 'trainer died in /shared/runs/x', stack_trace: '' })!]);
    expect(await failureMessage(clientWith(codec), { message: 'Encoded failure', encodedAttributes: attrs })).toBe('trainer died in /shared/runs/x');
    expect(await failureMessage(clientWith(codec), { message: 'plain' })).toBe('plain');
  });
});

describe('a malformed INFIR2_CODEC_KEY on the command line', () => {
  const saved = process.env.INFIR2_CODEC_KEY;
  afterEach(() => {
    if (saved === undefined) delete process.env.INFIR2_CODEC_KEY;
    else process.env.INFIR2_CODEC_KEY = saved;
  });

  it.each([['plan', 'recipes/tiny.yaml'], ['status', 'some-run'], ['list'], ['logs', 'some-run'], ['cancel', 'some-run'], ['worker', '--pool', 'local'], ['codec-server'], ['up']])(
    '`infir2 %s` exits 2 with one line and no stack trace',
    async (...args) => {
      process.env.INFIR2_CODEC_KEY = randomBytes(12).toString('base64');
      const r = await runInProcess(args);
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe('error: INFIR2_CODEC_KEY: expected 32 bytes as 64 hex digits or base64 (make one with `openssl rand -hex 32`), got 12 bytes\n');
    },
  );
});
