/**
 * Temporal's remote codec protocol over node:http, for the Web UI (and `temporal --codec-endpoint`): POST
 * /decode and POST /encode take `{"payloads":[{"metadata":{k: base64}, "data": base64}]}` (proto3 JSON) and
 * answer the same shape, run through this process's codec. The UI calls it from the browser, so it answers
 * CORS preflights for the allowed origins (the UI's address), with credentials allowed for the UI's "include
 * cross-origin credentials" setting. The `X-Namespace` header is accepted and not used: one key serves all.
 *
 * It decrypts for anyone who can reach it: it listens on 127.0.0.1 only, and a browser page of any other
 * origin gets no CORS answer.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Payload, PayloadCodec } from '@temporalio/common';

/** Where `infir2 codec-server` listens unless told, and where `infir2 up` tells its UI to look: beside the UI's 8233. */
export const DEFAULT_CODEC_PORT = 8234;

/** Larger requests are refused (413): a history's payloads are a few MB at most (2 MB each is the server's cap). */
const MAX_BODY_BYTES = 64 * 1024 * 1024;
const ALLOWED_HEADERS = 'Content-Type, X-Namespace, Authorization';

export interface CodecServerOptions {
  codec: PayloadCodec;
  /** @default 127.0.0.1 */
  host?: string;
  /** 0: any free port. */
  port: number;
  /** Origins (`http://host:port`) whose pages may call it; a loopback origin also admits its other loopback name. */
  corsOrigins: string[];
  /** One line per failed request or payload. @default stderr */
  log?: (line: string) => void;
}

export interface CodecServerHandle {
  server: Server;
  url: string;
  close(): Promise<void>;
}

interface JsonPayload {
  metadata?: Record<string, string> | null;
  data?: string | null;
}

class BadRequest extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** `http://127.0.0.1:8233/` → `http://127.0.0.1:8233`, plus its `localhost` twin (and the other way round). */
export function allowedOrigins(urls: string[]): Set<string> {
  const out = new Set<string>();
  for (const u of urls) {
    let origin: URL;
    try {
      origin = new URL(u);
    } catch {
      throw new Error(`not a URL: '${u}'`);
    }
    out.add(origin.origin);
    for (const [a, b] of [['127.0.0.1', 'localhost'], ['localhost', '127.0.0.1']] as const) {
      if (origin.hostname === a) {
        const twin = new URL(origin.origin);
        twin.hostname = b;
        out.add(twin.origin);
      }
    }
  }
  return out;
}

const b64 = (s: unknown, what: string): Buffer => {
  if (typeof s !== 'string' || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(s)) throw new BadRequest(400, `${what}: expected base64`);
  return Buffer.from(s, 'base64');
};

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

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new BadRequest(413, `request body over ${MAX_BODY_BYTES} bytes`);
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Decode one payload at a time: one the codec cannot read (another key, damage) goes back as it came, so that the
 * UI still shows the rest of a history, and the reason is logged.
 */
async function decodeEach(codec: PayloadCodec, payloads: Payload[], log: (l: string) => void): Promise<Payload[]> {
  return Promise.all(
    payloads.map(async (p) => {
      try {
        return (await codec.decode([p]))[0]!;
      } catch (err) {
        log(`decode: ${err instanceof Error ? err.message : String(err)}`);
        return p;
      }
    }),
  );
}

export function startCodecServer(o: CodecServerOptions): Promise<CodecServerHandle> {
  const log = o.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const origins = allowedOrigins(o.corsOrigins);
  const host = o.host ?? '127.0.0.1';

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const origin = req.headers.origin;
    if (origin !== undefined) {
      // A page of another origin gets no CORS headers (its browser then withholds the answer) and no work done.
      if (!origins.has(origin)) {
        res.writeHead(403, { 'Content-Type': 'text/plain' }).end(`origin ${origin} is not allowed (infir2 codec-server --cors-origin)\n`);
        return;
      }
      res.setHeader('Access-Control-Allow-Origin', origin);
      res.setHeader('Access-Control-Allow-Credentials', 'true');
      res.setHeader('Vary', 'Origin');
    }
    const path = (req.url ?? '/').split('?')[0]!.replace(/\/+$/, '');
    if (path !== '/decode' && path !== '/encode') {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('POST /decode or /encode\n');
      return;
    }
    if (req.method === 'OPTIONS') {
      res.writeHead(204, {
        'Access-Control-Allow-Methods': 'POST, OPTIONS',
        'Access-Control-Allow-Headers': ALLOWED_HEADERS,
        'Access-Control-Max-Age': '600',
      }).end();
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(405, { Allow: 'POST, OPTIONS', 'Content-Type': 'text/plain' }).end('POST only\n');
      return;
    }
    try {
      let body: { payloads?: unknown };
      try {
        body = JSON.parse(await readBody(req)) as { payloads?: unknown };
      } catch (err) {
        if (err instanceof BadRequest) throw err;
        throw new BadRequest(400, 'body: expected JSON');
      }
      if (!Array.isArray(body?.payloads)) throw new BadRequest(400, 'body: expected {"payloads": [...]}');
      const payloads = (body.payloads as JsonPayload[]).map(payloadFromJson);
      const out = path === '/decode' ? await decodeEach(o.codec, payloads, log) : await o.codec.encode(payloads);
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ payloads: out.map(payloadToJson) }));
    } catch (err) {
      const status = err instanceof BadRequest ? err.status : 500;
      const msg = err instanceof Error ? err.message : String(err);
      log(`${req.method} ${path}: ${status} ${msg}`);
      if (!res.headersSent) res.writeHead(status, { 'Content-Type': 'text/plain' });
      res.end(`${msg}\n`);
    }
  };

  const server = createServer((req, res) => void handle(req, res));
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, host, () => {
      server.off('error', reject);
      const { port } = server.address() as { port: number };
      resolve({
        server,
        url: `http://${host}:${port}`,
        close: () =>
          new Promise<void>((r) => {
            server.close(() => r());
            // A browser keeps its connections open: they would hold close() up.
            server.closeAllConnections();
          }),
      });
    });
  });
}
