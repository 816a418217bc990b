/**
 * `infir2 codec-server [--port N] [--cors-origin URL]... [--allow-uid N]...`: decrypt payloads for the Temporal Web
 * UI (Temporal's remote codec protocol) with this shell's INFIR2_CODEC_KEY, until stopped. Run it where the browser
 * is: the key stays with the person reading, and the UI's server never sees it (docs/cluster.md, "Payload
 * encryption"). It serves this user's own processes (the browser), the users --allow-uid names, and callers that
 * send `Authorization: Bearer $INFIR2_CODEC_TOKEN` when that is set.
 */
import { intFlag, parseVerbArgs, positionals, type Options } from './args.js';
import { readEmbedded } from './embedded.js';
import { UsageError } from '../errors.js';
import { CODEC_KEY_ENV } from '../temporal/codec-key.js';
import { codecFromEnv, EncryptionCodec } from '../temporal/codec.js';
import { CODEC_TOKEN_ENV, DEFAULT_CODEC_PORT, startCodecServer } from '../temporal/codec-server.js';

export const USAGE = 'infir2 codec-server [--port N] [--cors-origin URL]... [--allow-uid N]...';
export const OPTIONS = {
  port: { type: 'string' },
  'cors-origin': { type: 'string', multiple: true },
  'allow-uid': { type: 'string', multiple: true },
} satisfies Options;

/** A bearer token short enough to guess is no protection. */
const MIN_TOKEN_CHARS = 16;

/** The UI the embedded default serves when nothing says otherwise. */
const DEFAULT_UI = 'http://localhost:8233';

export async function run(argv: string[]): Promise<number> {
  const { values, positionals: pos } = parseVerbArgs('codec-server', argv, OPTIONS, USAGE);
  positionals('codec-server', pos, [], USAGE);
  const port = intFlag('port', values.port, DEFAULT_CODEC_PORT, 65535);
  const codec = codecFromEnv();
  if (!(codec instanceof EncryptionCodec)) throw new UsageError(`codec-server: ${CODEC_KEY_ENV} is not set: there is no key to decode with`);
  const origins = values['cors-origin']?.length ? values['cors-origin'] : [process.env.INFIR2_UI_URL ?? readEmbedded()?.uiUrl ?? DEFAULT_UI];
  for (const o of origins) {
    if (!/^https?:\/\/[^/\s]+\/?$/.test(o)) throw new UsageError(`--cors-origin: expected the Web UI's origin, like http://localhost:8233, got '${o}'`);
  }
  const own = process.geteuid?.();
  const uids = [...(own === undefined ? [] : [own])];
  for (const u of values['allow-uid'] ?? []) {
    if (!/^\d+$/.test(u)) throw new UsageError(`--allow-uid: expected a numeric uid (\`id -u NAME\`), got '${u}'`);
    if (!uids.includes(Number(u))) uids.push(Number(u));
  }
  const token = process.env[CODEC_TOKEN_ENV]?.trim() || null;
  if (token !== null && (token.length < MIN_TOKEN_CHARS || /\s/.test(token))) {
    throw new UsageError(`${CODEC_TOKEN_ENV}: expected at least ${MIN_TOKEN_CHARS} characters without spaces (make one with \`openssl rand -hex 32\`)`);
  }
  let h;
  try {
    h = await startCodecServer({ codec, port, corsOrigins: origins, access: { token, uids } });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') throw new UsageError(`--port: ${port} is already in use (choose another --port)`);
    throw err;
  }
  process.stdout.write(`codec server: ${h.url} (key id ${codec.keyId}; for the Web UI at ${origins.join(', ')})\n`);
  process.stdout.write(`it answers processes of uid ${uids.join(', ')}${token ? ` and callers sending Authorization: Bearer $${CODEC_TOKEN_ENV}` : ''}\n`);
  process.stdout.write(`point the Web UI at it: its Codec Server setting, or \`temporal server start-dev --ui-codec-endpoint ${h.url}\`\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await h.close();
  return 0;
}
