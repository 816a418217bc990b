/**
 * `infir2 codec-server` under hostile and under large requests (`npx tsx bench/codec-server-memory.ts`): the built
 * CLI's server process, its peak memory (VmHWM) and answer for
 *  - the issue's request: 63 MiB of 5.5 M empty payloads (it killed the server after 52 s at 4.5 GB);
 *  - 64 MiB of tiny payloads with metadata, and 64 MiB of nested arrays, each also streamed without a
 *    Content-Length (chunked: read until a limit trips), and 15 MiB of empty payloads (under the body cap);
 *  - the largest request it accepts: 4096 payloads, 10.9 MiB once decoded (an /encode, then its /decode).
 * Goal (issue 30): peak < 300 MB, a clear 413 beyond the limits. Run as root, the peak is reset before each request
 * (/proc/<pid>/clear_refs); otherwise it is the peak so far.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../test/integration/harness.js';
import { freePort } from '../test/free-port.js';

const MiB = 1024 * 1024;

const vm = (pid: number, field: 'VmRSS' | 'VmHWM') => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

const port = await freePort();
const server = spawn(process.execPath, [join(ROOT, 'bin', 'infir2.js'), 'codec-server', '--port', String(port)], {
  env: { ...process.env, INFIR2_CODEC_KEY: randomBytes(32).toString('hex') },
  stdio: ['ignore', 'pipe', 'pipe'],
});
await new Promise<void>((resolve, reject) => {
  server.stdout!.on('data', (d: Buffer) => d.toString().includes('codec server:') && resolve());
  server.once('exit', (code) => reject(new Error(`codec-server exited ${code}`)));
});
const url = `http://127.0.0.1:${port}`;
const pid = server.pid!;

/** `text` as a stream of 64 KiB chunks: fetch sends it chunked, with no Content-Length. */
function streamed(text: string): ReadableStream<Uint8Array> {
  const buf = Buffer.from(text);
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= buf.length) return c.close();
      c.enqueue(buf.subarray(at, (at += 64 * 1024)));
    },
  });
}

async function send(what: string, path: string, body: string | Buffer, chunked = false): Promise<string> {
  try {
    writeClear();
    const before = vm(pid, 'VmRSS');
    const t0 = performance.now();
    const init = chunked ? { body: streamed(body.toString()), duplex: 'half' } : { body };
    const r = await fetch(`${url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, ...init } as RequestInit);
    const text = await r.text();
    const sec = (performance.now() - t0) / 1000;
    const answer = r.status === 200 ? `200 (${(text.length / MiB).toFixed(1)} MiB answer)` : `${r.status} ${text.trim()}`;
    console.log(`${what.padEnd(62)} ${(Buffer.byteLength(body) / MiB).toFixed(1).padStart(5)} MiB  ${sec.toFixed(2).padStart(5)} s  RSS ${before.toFixed(0)} → peak ${vm(pid, 'VmHWM').toFixed(0)} MB   ${answer}`);
    return text;
  } catch (err) {
    console.log(`${what.padEnd(62)} failed: ${(err as Error).message}; server ${server.exitCode === null ? 'alive' : `exited ${server.exitCode}`}`);
    return '';
  }
}

/** Reset the peak (root only; otherwise the peak is since the server started, which only ever makes it larger). */
function writeClear(): void {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
  } catch {
    /* not allowed: the peak stays cumulative */
  }
}

try {
  console.log(`codec server pid ${pid} at ${url}; idle RSS ${vm(pid, 'VmRSS').toFixed(0)} MB`);
  const empties = `{"payloads":[${'{"data":""},'.repeat(5_500_000)}{}]}`;
  await send("the issue's request: 5.5 M empty payloads", '/decode', empties);
  await send('… streamed, no Content-Length', '/decode', empties, true);
  const tiny = `{"payloads":[${'{"metadata":{"encoding":"YQ=="},"data":""},'.repeat(Math.floor((64 * MiB) / 42) - 1)}{}]}`;
  await send('64 MiB of tiny payloads with metadata', '/decode', tiny);
  await send('… streamed, no Content-Length', '/decode', tiny, true);
  const arrays = `{"payloads":${'['.repeat(32 * MiB)}${']'.repeat(32 * MiB)}}`;
  await send('64 MiB of nested arrays', '/decode', arrays);
  await send('… streamed, no Content-Length', '/decode', arrays, true);
  await send('15 MiB of empty payloads (under the body cap)', '/decode', `{"payloads":[${'{"data":""},'.repeat(1_300_000)}{}]}`);
  const one = { metadata: { encoding: Buffer.from('binary/plain').toString('base64') }, data: randomBytes(2800).toString('base64') };
  const largest = JSON.stringify({ payloads: Array.from({ length: 4096 }, () => one) });
  const encoded = await send('the largest accepted: 4096 payloads, 10.9 MiB decoded (/encode)', '/encode', largest);
  if (encoded) await send('… and its /decode', '/decode', encoded);
  await send('one payload more than the limit', '/encode', JSON.stringify({ payloads: Array.from({ length: 4097 }, () => ({ data: '' })) }));
  console.log(`server ${server.exitCode === null ? 'alive' : `exited ${server.exitCode}`} after all requests; RSS ${vm(pid, 'VmRSS').toFixed(0)} MB`);
} finally {
  server.kill('SIGTERM');
}
