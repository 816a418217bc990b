/**
 * The probe on real environments: Debian's Python with its torch, a git checkout of Megatron core_v0.14.0's
 * files, the NumPy 2 stand-in, a virtualenv without torch, packages that raise, hang or crash the interpreter on
 * import, an unreadable file, a missing path. What it reports is checked through the same code the worker runs.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ResolvedPreflight } from '../../../src/plan/preflight-types.js';
import { rowLine, type CheckRow } from '../../../src/preflight/checks.js';
import { preflight } from '../../../src/preflight/preflight.js';
import { runProbe, scriptInterpreter } from '../../../src/preflight/run-probe.js';
import { bareVenv, brokenPackage, megatronCheckout, NUMPY2_STANDIN } from '../../fixtures/preflight-trees.js';

const PYTHON = '/usr/bin/python3';
let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'infir2-probe-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const spec = (o: Partial<ResolvedPreflight> = {}): ResolvedPreflight => ({
  launch: [], python: PYTHON, env: {}, pythonPath: [], needs: ['torch'], uses: [], versions: {}, skip: [], traits: [], gpus: 0, reads: {}, saves: null, ...o,
});
const fails = (rows: CheckRow[]) => rows.filter((r) => r.verdict === 'fail');

describe('the probe', () => {
  it("passes this project's CPU environment: Debian's torch, a readable input, room on the disk", async () => {
    const data = join(dir, 'data.jsonl');
    writeFileSync(data, '{}\n');
    const r = await preflight(spec({ versions: { torch: '>=1.13.0a0' }, reads: { data }, saves: { dir: join(dir, 'ckpt'), checkpointBytes: 1000, boundBytes: 3000, bound: '3 checkpoints' } }));
    expect(fails(r.rows)).toEqual([]);
    expect(r.rows.map((x) => x.check)).toEqual(expect.arrayContaining(['python', 'torch', 'disk', 'paths']));
    expect(r.rows.find((x) => x.check === 'torch')?.found).toMatch(/^torch 1\.13|^torch 2\./);
  }, 60_000);

  it('finds Megatron core 0.14.0 in a checkout on PYTHONPATH, its commit and tag, and where it calls np.product', async () => {
    const meg = megatronCheckout(join(dir, 'Megatron-LM'));
    const run = await runProbe(spec({ env: { PYTHONPATH: meg.dir }, needs: [], uses: ['megatron'] }));
    const m = run.nodes[0]!.report.packages.megatron!;
    expect(m).toMatchObject({ installed: true, version: '0.14.0', tags: ['core_v0.14.0'], checkout: meg.dir });
    expect(m.commits[0]).toBe(meg.commit);
    expect(run.nodes[0]!.report.findings['megatron.npProduct']).toBe('megatron/core/dist_checkpointing/validation.py:512');
  }, 60_000);

  it('fails NumPy ≥ 2 with that checkout, naming both, and pins by the commit', async () => {
    const meg = megatronCheckout(join(dir, 'Megatron-np'));
    const r = await preflight(spec({
      env: { PYTHONPATH: `${meg.dir}:${NUMPY2_STANDIN}` },
      needs: ['torch', 'megatron'],
      uses: ['numpy'],
      versions: { megatron: `==0.14.0, @${meg.commit.slice(0, 7)}` },
    }));
    const lines = fails(r.rows).map(rowLine);
    const np = lines.find((l) => l.startsWith('numpy2-megatron-np-product:'));
    expect(np).toContain('numpy 2.1.3 with Megatron core 0.14.0');
    expect(np).toContain(meg.commit.slice(0, 7));
    expect(np).toContain('megatron/core/dist_checkpointing/validation.py:512 calls np.product');
    expect(r.rows.find((x) => x.check === 'megatron')?.verdict).toBe('pass');
    // Debian's torch 1.13 was built against NumPy 1.x: the probe says so too.
    if (r.rows.find((x) => x.check === 'torch')?.found.startsWith('torch 1.')) expect(lines.some((l) => l.startsWith('torch-numpy2-abi:'))).toBe(true);
  }, 60_000);

  it('fails a package the step needs when its interpreter has none, naming the interpreter', async () => {
    const python = bareVenv(join(dir, 'venv'));
    const r = await preflight(spec({ python }));
    expect(fails(r.rows).map(rowLine)).toEqual([`torch: torch not found by ${python}; expected installed: the step imports it`]);
  }, 60_000);

  it('fails a wrong pinned version with what was found and what was expected', async () => {
    const r = await preflight(spec({ versions: { torch: '>=2.4' } }));
    const torch = fails(r.rows).map(rowLine);
    expect(torch).toHaveLength(1);
    expect(torch[0]).toMatch(/^torch: torch 1\.13\.0a0; expected >=2\.4 \(software\.versions\.torch\)$/);
  }, 60_000);

  it('reports a package that raises, one that hangs and one that crashes the interpreter, and goes on', async () => {
    const site = join(dir, 'broken');
    brokenPackage(site, 'flash_attn', 'raise', '2.7.4.post1');
    brokenPackage(site, 'transformer_engine', 'hang', '2.4.0');
    brokenPackage(site, 'sglang', 'crash', '0.4.6');
    const t0 = Date.now();
    const r = await preflight(spec({ env: { PYTHONPATH: site }, needs: ['torch', 'flashAttn', 'transformerEngine', 'sglang'], uses: ['numpy'] }), { importTimeoutSec: 3 });
    expect((Date.now() - t0) / 1000).toBeLessThan(30);
    const lines = fails(r.rows).map(rowLine);
    // The undefined symbol is the known-bad ABI mismatch: its entry says it, the package's row does not repeat it.
    expect(lines.find((l) => l.startsWith('flash-attn-torch-abi:'))).toContain('undefined symbol: _ZN3c104cuda9SetDeviceEi');
    expect(lines.some((l) => l.startsWith('flashAttn:'))).toBe(false);
    expect(lines.find((l) => l.startsWith('transformerEngine:'))).toContain('import did not finish in 3 s');
    expect(lines.find((l) => l.startsWith('sglang:'))).toMatch(/the interpreter died importing it \(exit -11\)/);
    // The packages after them were still asked.
    expect(r.rows.find((x) => x.check === 'numpy')?.verdict).toBe('pass');
  }, 60_000);

  it('fails an input the trainer cannot read and a full disk', async () => {
    const data = join(dir, 'secret.jsonl');
    writeFileSync(data, '{}\n');
    chmodSync(data, 0o000);
    // As root, permission bits do not stop a read: the probe runs without the capabilities that override them.
    const launch = process.getuid?.() === 0 ? ['setpriv', '--bounding-set', '-dac_override,-dac_read_search', '--inh-caps', '-dac_override,-dac_read_search', '--'] : [];
    const r = await preflight(spec({ launch, reads: { data, gone: join(dir, 'nope') }, saves: { dir: join(dir, 'ck'), checkpointBytes: 1e15, boundBytes: 2e15, bound: '2 checkpoints' } }));
    const lines = fails(r.rows).map(rowLine);
    expect(lines).toContain(`paths: data cannot be read: ${data}: Permission denied; expected ${data} readable by the trainer's user`);
    expect(lines).toContain(`paths: gone cannot be read: ${join(dir, 'nope')}: No such file or directory; expected ${join(dir, 'nope')} readable by the trainer's user`);
    expect(lines.find((l) => l.startsWith('disk:'))).toMatch(/free on .*; expected ≥ 1000000\.0 GB: one checkpoint with optimizer state/);
  }, 60_000);

  it('names an interpreter that does not exist', async () => {
    const r = await preflight(spec({ python: join(dir, 'no-such-python') }));
    expect(fails(r.rows).map(rowLine)[0]).toMatch(/^python: no answer: .*no-such-python \(.*could not start/);
  }, 30_000);

  it('bounds the whole probe in time, and leaves nothing of it running', async () => {
    // A launcher that never starts the probe (an srun waiting for nodes that never come).
    const marker = `infir2-probe-never-${process.pid}`;
    const t0 = Date.now();
    const r = await preflight(spec({ launch: ['bash', '-c', `exec -a ${marker} sleep 60`, 'bash'] }), { timeoutMs: 1500 });
    expect((Date.now() - t0) / 1000).toBeLessThan(10);
    expect(fails(r.rows).map(rowLine)[0]).toMatch(/^python: no answer: \/usr\/bin\/python3 \(no answer in 2 s\)/);
    const left = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).split('\n').filter((l) => l.startsWith(marker));
    expect(left).toEqual([]);
  }, 30_000);

  it('keeps import results per fingerprint: a second probe of the same environment imports nothing', async () => {
    const first = await runProbe(spec({ uses: ['numpy'] }));
    const second = await runProbe(spec({ uses: ['numpy'] }));
    expect(second.nodes[0]!.report.imports).toBe('cached');
    expect(second.nodes[0]!.imports).toEqual(first.nodes[0]!.imports);
    expect(second.seconds).toBeLessThan(first.seconds);
  }, 60_000);
});

describe("a console script's interpreter (torchrun's)", () => {
  it('reads #!/abs/python, #!/usr/bin/env python3 and pip\'s /bin/sh form', () => {
    const bin = join(dir, 'bin');
    mkdirSync(bin, { recursive: true });
    const script = (name: string, text: string) => {
      writeFileSync(join(bin, name), text);
      chmodSync(join(bin, name), 0o755);
    };
    script('a', '#!/opt/py/bin/python3.11\nimport sys\n');
    script('b', '#!/usr/bin/env python3\nimport sys\n');
    script('c', "#!/bin/sh\n'''exec' /very/long/path/bin/python \"$0\" \"$@\"\n' '''\n");
    script('python3', '#!/bin/sh\n');
    script('d', '#!/bin/bash\necho\n');
    expect(scriptInterpreter('a', bin)).toBe('/opt/py/bin/python3.11');
    expect(scriptInterpreter('b', bin)).toBe(join(bin, 'python3'));
    expect(scriptInterpreter('c', bin)).toBe('/very/long/path/bin/python');
    expect(scriptInterpreter('d', bin)).toBeNull();
    expect(scriptInterpreter('missing', bin)).toBeNull();
  });
});
