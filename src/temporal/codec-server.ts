/**
 * Temporal's remote codec protocol over node:http, for the Web UI (and `temporal --codec-endpoint`): POST
 * /decode and POST /encode take `{"payloads":[{"metadata":{k: base64}, "data": base64}]}` (proto3 JSON) and
 * answer the same shape, run through this process's codec. The UI calls it from the browser, so it answers
 * CORS preflights for the allowed origins (the UI's address), with credentials allowed for the UI's "include
 * cross-origin credentials" setting. The `X-Namespace` header is accepted and not used: one key serves all.
 *
 * It decrypts only for whom it is meant: it listens on 127.0.0.1; a POST is served for a caller that runs as one
 * of the allowed local users (the server's own unless told: the kernel says who owns the calling socket,
 * util/peer-uid.ts; the browser of the user who started it is that user's), or that sends the bearer token
 * (INFIR2_CODEC_TOKEN: `temporal --codec-auth "Bearer …"`, a proxy); a browser page of another origin gets no
 * CORS answer. A request is bounded in bytes, payloads and decoded bytes (codec-request.ts): past them, 413.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Payload, PayloadCodec } from '@temporalio/common';
import { accessProblem, BadRequest, DEFAULT_LIMITS, payloadsOf, payloadToJson, readBody, type CodecAccess, type CodecLimits } from './codec-request.js';

export { payloadFromJson, payloadToJson } from './codec-request.js';

/** Where `infir2 codec-server` listens unless told, and where `infir2 up` tells its UI to look: beside the UI's 8233. */
export const DEFAULT_CODEC_PORT = 8234;

/** The environment variable holding the bearer token callers may present instead of being the server's user. */
export const CODEC_TOKEN_ENV = 'INFIR2_CODEC_TOKEN';

const ALLOWED_HEADERS = 'Content-Type, X-Namespace, Authorization';

/** Requests decoded at once (each may hold the limits' worth); the rest wait their turn. */
const CONCURRENT = 2;

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
  /** Who may call. @default no token; this process's own uid */
  access?: Partial<CodecAccess>;
  /** @default DEFAULT_LIMITS */
  limits?: Partial<CodecLimits>;
}

export interface CodecServerHandle {
  server: Server;
  url: string;
  close(): Promise<void>;
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

/** A queue of at most `n` holders at a time. */
function slots(n: number): <T>(work: () => Promise<T>) => Promise<T> {
  let free = n;
  const waiting: (() => void)[] = [];
  return async (work) => {
    if (free > 0) free -= 1;
    else await new Promise<void>((r) => waiting.push(r));
    try {
      return await work();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else free += 1;
    }
  };
}

export function startCodecServer(o: CodecServerOptions): Promise<CodecServerHandle> {
  const log = o.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const origins = allowedOrigins(o.corsOrigins);
  const host = o.host ?? '127.0.0.1';
  const own = process.geteuid?.();
  const access: CodecAccess = { token: o.access?.token ?? null, uids: o.access?.uids ?? (own === undefined ? [] : [own]) };
  const limits: CodecLimits = { ...DEFAULT_LIMITS, ...o.limits };
  const inTurn = slots(CONCURRENT);

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
      const denied = accessProblem(req, access);
      if (denied) throw denied;
      const out = await inTurn(async () => {
        let body: { payloads?: unknown };
        try {
          body = JSON.parse(await readBody(req, limits)) as { payloads?: unknown };
        } catch (err) {
          if (err instanceof BadRequest) throw err;
          throw new BadRequest(400, 'body: expected JSON');
        }
        const payloads = payloadsOf(body, limits);
        return path === '/decode' ? await decodeEach(o.codec, payloads, log) : await o.codec.encode(payloads);
      });
      // Written payload by payload: no second copy of the whole answer as one string.
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.write('{"payloads":[');
      out.forEach((p, i) => res.write(`${i ? ',' : ''}${JSON.stringify(payloadToJson(p))}`));
      res.end(']}');
    } catch (err) {
      const status = err instanceof BadRequest ? err.status : 500;
      const msg = err instanceof Error ? err.message : String(err);
      log(`${req.method} ${path}: ${status} ${msg}`);
      // What is left of a refused body is read and dropped (never kept), so that the answer reaches the caller.
      req.resume();
      if (!res.headersSent) res.writeHead(status, { 'Content-Type': 'text/plain', ...(status === 401 ? { 'WWW-Authenticate': 'Bearer' } : {}), Connection: 'close' });
      res.end(`${msg}\n`);
    }
  };

  const server = createServer((req, res) => void handle(req, res));
  // A caller that sends slowly holds a connection, not memory; not for long.
  server.requestTimeout = 60_000;
  server.headersTimeout = 10_000;
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
