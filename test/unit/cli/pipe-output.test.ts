/**
 * The built CLI writes its whole output into a pipe before it exits. Writes to a pipe are asynchronous in Node:
 * exiting at once cut `infir2 plan <7B recipe> --json | ...` at the pipe's 64 KiB buffer (the plan is ~90 KB).
 * Each case compares what came through a slow reader (`(sleep; cat)`, so the pipe fills) with the same command
 * redirected to a file.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, ROOT } from './run-cli.js';

const tmp = mkdtempSync(join(tmpdir(), 'infir2-pipe-'));
const CLI = `${JSON.stringify(process.execPath)} bin/infir2.js`;

/** Run a bash script in the project root; `code` is the script's exit status. */
function sh(script: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('bash', ['-c', script], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20, timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

beforeAll(() => ensureBuilt(), 180_000);
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('output through a pipe', () => {
  it('plan --json of the 7B recipe comes through whole (more than the 64 KiB of a pipe)', async () => {
    const args = 'plan recipes/qwen2.5-7b-fp8.yaml --json --run-id pipe-check';
    const r = await sh(`${CLI} ${args} > ${tmp}/file.json && ${CLI} ${args} | (sleep 0.5; cat > ${tmp}/pipe.json); exit \${PIPESTATUS[0]}`);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const file = readFileSync(join(tmp, 'file.json'), 'utf8');
    const piped = readFileSync(join(tmp, 'pipe.json'), 'utf8');
    expect(file.length).toBeGreaterThan(65_536);
    expect(piped.length).toBe(file.length);
    expect(piped).toBe(file);
    expect(JSON.parse(piped)).toMatchObject({ runId: 'pipe-check' });
  });

  it('an error exit (2) prints every error line into a pipe, and still exits 2', async () => {
    // 3000 unknown keys: some 600 KB of `error:` lines on stderr.
    const keys = Array.from({ length: 3000 }, (_, i) => `unknown_key_${String(i).padStart(4, '0')}_with_a_rather_long_name: 1`);
    writeFileSync(join(tmp, 'bad.yaml'), ['name: bad', ...keys].join('\n') + '\n');
    const r = await sh(
      `${CLI} validate ${tmp}/bad.yaml 2> ${tmp}/errors.file; echo "file: $?"; ` +
        `${CLI} validate ${tmp}/bad.yaml 2>&1 >/dev/null | (sleep 0.5; cat > ${tmp}/errors.pipe); echo "pipe: \${PIPESTATUS[0]}"`,
    );
    expect(r.stdout).toBe('file: 2\npipe: 2\n');
    const file = readFileSync(join(tmp, 'errors.file'), 'utf8');
    const piped = readFileSync(join(tmp, 'errors.pipe'), 'utf8');
    expect(piped).toBe(file);
    const lines = piped.trimEnd().split('\n');
    expect(lines.every((l) => l.startsWith('error: '))).toBe(true);
    const reported = new Set(lines.map((l) => /^error: (\w+): unknown key/.exec(l)?.[1]));
    for (const k of keys) expect(reported.has(k.split(':')[0]), k).toBe(true);
    expect(lines.at(-1)).toMatch(/^error: unknown_key_2999_with_a_rather_long_name: unknown key/);
  });

  it('stops quietly when the reader goes away (`| head`)', async () => {
    const r = await sh(`${CLI} plan recipes/qwen2.5-7b-fp8.yaml --json --run-id pipe-check | (sleep 0.5; head -c 10 >/dev/null); exit \${PIPESTATUS[0]}`);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
  });
});
