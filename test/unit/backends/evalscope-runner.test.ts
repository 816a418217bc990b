/**
 * src/backends/tools/evalscope-runner.sh against fake SGLang and evalscope programs: it waits for a server
 * that really answers, writes the score from evalscope's report, and leaves no server process behind on any
 * exit path (success, evalscope failure, server crash, timeout, SIGTERM).
 */
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { freePort } from '../../free-port.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVALSCOPE_REPORT_V1 } from '../../fixtures/engine-logs.js';

const RUNNER = fileURLToPath(new URL('../../../src/backends/tools/evalscope-runner.sh', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'infir2-evalrunner-'));
const bin = join(tmp, 'bin');

/** `python3 -m sglang.launch_server --port P`: an HTTP server (and a worker child), per FAKE_SGLANG. */
const FAKE_PYTHON = `#!/usr/bin/env bash
if [[ "$1" == "-m" && "$2" == "sglang.launch_server" ]]; then
  while [[ $# -gt 0 ]]; do [[ "$1" == "--port" ]] && port=$2; shift; done
  case "\${FAKE_SGLANG:-ok}" in
    crash) echo "CUDA error: out of memory" >&2; exit 1 ;;
    never) exec sleep 300 ;;
  esac
  sleep 300 & echo $! > "$FAKE_STATE/worker.pid"
  echo $$ > "$FAKE_STATE/server.pid"
  exec ${'/usr/bin/python3'} -c '
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health_generate" else 404); self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()' "$port"
fi
exec /usr/bin/python3 "$@"
`;

/** `evalscope eval ... --work-dir W --datasets D`: a report (v1.0.0's file, where v1.0.0 puts it), a failure or a hang, per FAKE_EVALSCOPE. */
const FAKE_EVALSCOPE = `#!/usr/bin/env bash
while [[ $# -gt 0 ]]; do
  case "$1" in --work-dir) work=$2 ;; --datasets) ds=$2 ;; --generation-config) gen=$2 ;; esac; shift
done
echo "$gen" > "$FAKE_STATE/generation-config.json"
case "\${FAKE_EVALSCOPE:-ok}" in
  fail) echo "evalscope: dataset not found" >&2; exit 3 ;;
  hang) echo $$ > "$FAKE_STATE/evalscope.pid"; exec sleep 300 ;;
esac
mkdir -p "$work/20250101_000000/reports/served"
cp "$FAKE_REPORT" "$work/20250101_000000/reports/served/$ds.json"
# A symlink loop in its work directory (ln -s . a; ln -s . b): the report search must not follow it.
if [[ "\${FAKE_EVALSCOPE:-ok}" == loop ]]; then ln -s . "$work/20250101_000000/a"; ln -s . "$work/20250101_000000/b"; fi
`;

/** Running (a zombie waiting for a slow init to reap it counts as gone). */
const alive = (pidFile: string) => {
  if (!existsSync(pidFile)) return false;
  const pid = Number(readFileSync(pidFile, 'utf8'));
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = existsSync(`/proc/${pid}/stat`) ? readFileSync(`/proc/${pid}/stat`, 'utf8') : '';
  return !/^\d+ \(.*\) Z/.test(stat);
};

interface Outcome {
  code: number | null;
  stderr: string;
  state: string;
  report: string;
}

let counter = 0;
async function runRunner(env: Record<string, string>, opts: { readyTimeout?: number; onStart?: (pid: number, state: string) => void } = {}): Promise<Outcome> {
  const state = join(tmp, `case${++counter}`);
  const model = join(state, 'model');
  const report = join(state, 'report.json');
  mkdirSync(model, { recursive: true });
  const port = await freePort();
  const args = [
    RUNNER,
    '--python', join(bin, 'python3'),
    '--model-path', model, '--served-name', 'served', '--port', String(port), '--tp', '1', '--warmups', '1',
    '--max-running-requests', '8', '--chunked-prefill-size', '4096', '--ready-timeout', String(opts.readyTimeout ?? 30),
    '--work-dir', join(state, 'evalscope'), '--benchmark', 'aime24', '--dataset', 'aime24', '--dataset-args', '{"aime24": {}}',
    '--generation-config', '{"do_sample": true, "temperature": 0.65, "top_p": 0.95, "max_tokens": 31000, "n": 32}',
    '--eval-batch-size', '32', '--timeout', '18000', '--api-key', 'EMPTY', '--report', report,
  ];
  const child = spawn('bash', args, { env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, FAKE_STATE: state, FAKE_REPORT: join(tmp, 'report-v1.0.0.json'), ...env } });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += String(d)));
  child.stdout.on('data', () => undefined);
  opts.onStart?.(child.pid!, state);
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c, sig) => resolve(c ?? (sig ? 128 : null))));
  return { code, stderr, state, report };
}

beforeAll(() => {
  mkdirSync(bin, { recursive: true });
  writeFileSync(join(bin, 'python3'), FAKE_PYTHON);
  writeFileSync(join(bin, 'evalscope'), FAKE_EVALSCOPE);
  chmodSync(join(bin, 'python3'), 0o755);
  chmodSync(join(bin, 'evalscope'), 0o755);
  // What evalscope v1.0.0 writes (report/report.py Report.to_dict), at the layout of its run.py and cache.py.
  writeFileSync(join(tmp, 'report-v1.0.0.json'), JSON.stringify(EVALSCOPE_REPORT_V1, null, 4));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('evalscope-runner.sh', () => {
  it('waits for the server, runs evalscope, writes the score and stops the server', async () => {
    const r = await runRunner({});
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(readFileSync(r.report, 'utf8'));
    expect(report).toMatchObject({ benchmark: 'aime24', dataset: 'aime24', accuracy: 0.4375, n_samples: 32, temperature: 0.65, top_p: 0.95, max_tokens: 31000 });
    expect(alive(join(r.state, "server.pid")), "server").toBe(false);
    expect(alive(join(r.state, "worker.pid")), "worker").toBe(false);
  });

  it('finds the report past a symlink loop in the work directory, without following it', async () => {
    const r = await runRunner({ FAKE_EVALSCOPE: 'loop' });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(readFileSync(r.report, 'utf8'))).toMatchObject({ accuracy: 0.4375 });
  }, 30_000);

  it('stops the server and its workers when evalscope fails, and passes the failure on', async () => {
    const r = await runRunner({ FAKE_EVALSCOPE: 'fail' });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/evalscope exited with 3/);
    expect(existsSync(r.report)).toBe(false);
    expect(alive(join(r.state, "server.pid")), "server").toBe(false);
    expect(alive(join(r.state, "worker.pid")), "worker").toBe(false);
  });

  it('fails early, with the server log, when the server dies before it is ready', async () => {
    const r = await runRunner({ FAKE_SGLANG: 'crash' });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/SGLang server exited before it was ready/);
    expect(r.stderr).toMatch(/CUDA error: out of memory/);
  });

  it('gives up after the ready timeout when the server never answers', async () => {
    const started = Date.now();
    const r = await runRunner({ FAKE_SGLANG: 'never' }, { readyTimeout: 3 });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/did not answer \/health_generate within 3s/);
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it('on SIGTERM stops evalscope and the server at once', async () => {
    let state = '';
    const started = Date.now();
    const r = await runRunner({ FAKE_EVALSCOPE: 'hang' }, {
      onStart: (pid, s) => {
        state = s;
        const poll = setInterval(() => {
          if (existsSync(join(s, 'evalscope.pid'))) {
            clearInterval(poll);
            process.kill(pid, 'SIGTERM');
          }
        }, 100);
      },
    });
    expect(r.code).toBe(143);
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(alive(join(state, 'server.pid'))).toBe(false);
    expect(alive(join(state, 'worker.pid'))).toBe(false);
    expect(alive(join(state, 'evalscope.pid'))).toBe(false);
  });
});
