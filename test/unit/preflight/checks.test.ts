/**
 * The verdicts on what a node reported, table by table: pins, needs, import failures, the known-bad entries
 * (each one made to fire from the facts it names), GPUs, disk, skips and several nodes. The reports are what the
 * probe prints (probe-report.ts); probe.test.ts shows the probe producing such reports from real environments.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ResolvedPreflight } from '../../../src/plan/preflight-types.js';
import { checkNode, checkNodes, rowLine, type NodeFacts } from '../../../src/preflight/checks.js';
import type { ImportResult, PackageFacts, ProbeReport } from '../../../src/preflight/probe-report.js';
import { parseReports, MARKER } from '../../../src/preflight/probe-report.js';
import { KNOWN_BAD } from '../../../src/recipe/known-bad.js';
import { PINNABLE } from '../../../src/recipe/software-checks.js';
import { parseRequirement } from '../../../src/recipe/version-spec.js';

const spec = (o: Partial<ResolvedPreflight> = {}): ResolvedPreflight => ({
  launch: [], python: 'python3', env: {}, pythonPath: [], needs: ['torch'], uses: [], versions: {}, skip: [], traits: [], gpus: 0, reads: {}, saves: null, ...o,
});
const pkg = (version: string | null, o: Partial<PackageFacts> = {}): PackageFacts => ({ installed: version !== null, version, commits: [], location: version ? '/site' : null, ...o });

function node(o: { host?: string; packages?: Record<string, PackageFacts>; imports?: Record<string, ImportResult>; findings?: Record<string, string>; nvidia?: ProbeReport['nvidia']; disk?: ProbeReport['disk']; paths?: ProbeReport['paths'] } = {}): NodeFacts {
  const report: ProbeReport = {
    host: o.host ?? 'n1',
    python: { executable: '/usr/bin/python3', version: '3.11.2' },
    packages: { torch: pkg('2.11.0+cu130'), ...o.packages },
    findings: o.findings ?? {},
    fingerprint: 'f',
    imports: {},
    paths: o.paths ?? {},
    seconds: 0.5,
    ...(o.nvidia ? { nvidia: o.nvidia } : {}),
    ...(o.disk ? { disk: o.disk } : {}),
  };
  return { report, imports: { torch: { ok: true, version: '2.11.0+cu130', cuda: '13.0', cublasLt: '13.0.2' }, ...o.imports } };
}
const H100 = { gpus: Array.from({ length: 8 }, () => ({ name: 'NVIDIA H100 80GB HBM3', capability: '9.0', memoryMiB: '81559' })), driver: '580.159.04' };
const lines = (rows: ReturnType<typeof checkNode>, v = 'fail') => rows.filter((r) => r.verdict === v).map(rowLine);

describe('the known-bad table', () => {
  it('has unique ids, sources for every entry, requirements that parse and placeholders that name something', () => {
    expect(new Set(KNOWN_BAD.map((k) => k.id)).size).toBe(KNOWN_BAD.length);
    for (const k of KNOWN_BAD) {
      expect(k.sources.length, k.id).toBeGreaterThan(0);
      for (const set of k.when) for (const c of set) if ('spec' in c) expect(typeof parseRequirement(c.spec), `${k.id}: ${c.spec}`).not.toBe('string');
      for (const m of `${k.says} ${k.expected}`.matchAll(/\{(importError:|finding:)?([A-Za-z.]+)\}/g)) {
        if (!m[1]) expect(PINNABLE as readonly string[], `${k.id}: {${m[2]}}`).toContain(m[2]);
      }
    }
  });

  it('is listed whole in docs/operations.md', () => {
    const page = readFileSync(join(import.meta.dirname, '../../../docs/operations.md'), 'utf8');
    for (const k of KNOWN_BAD) expect(page, k.id).toContain(`| \`${k.id}\` | ${k.level} |`);
  });

  it('NumPy ≥ 2 with a Megatron that calls np.product: a failure naming both, the line and the fix', () => {
    const n = node({
      packages: { numpy: pkg('2.5.2'), megatron: pkg('0.14.0', { commits: ['23e00ed0963c35382dfe8a5a94fb3cda4d21e133'], checkout: '/root/Megatron-LM', tags: ['core_v0.14.0'] }) },
      findings: { 'megatron.npProduct': 'megatron/core/dist_checkpointing/validation.py:512 (and 2 more)' },
    });
    expect(lines(checkNode(spec({ needs: ['torch', 'megatron'], uses: ['numpy'] }), n))).toEqual([
      'numpy2-megatron-np-product: numpy 2.5.2 with Megatron core 0.14.0 (23e00ed, core_v0.14.0): megatron/core/dist_checkpointing/validation.py:512 (and 2 more) calls np.product, which NumPy 2.0 removed: the first checkpoint save (distributed optimizer) dies with AttributeError; expected numpy < 2 (Megatron core_v0.14.0 itself pins numpy<2.0.0), or Megatron core ≥ 0.16.0 (np.prod)',
    ]);
    // NumPy 1.26 with the same checkout, or NumPy 2 with a Megatron that uses np.prod: nothing.
    expect(lines(checkNode(spec(), node({ packages: { numpy: pkg('1.26.4') }, findings: { 'megatron.npProduct': 'x.py:1' } })))).toEqual([]);
    expect(lines(checkNode(spec(), node({ packages: { numpy: pkg('2.1.3'), megatron: pkg('0.16.0') } })))).toEqual([]);
  });

  it('torch < 2.3 with NumPy 2', () => {
    const n = node({ packages: { torch: pkg('2.2.2'), numpy: pkg('2.0.0') }, imports: { torch: { ok: true, version: '2.2.2' } } });
    expect(lines(checkNode(spec(), n))[0]).toMatch(/^torch-numpy2-abi: torch 2\.2\.2 was built against NumPy 1\.x and numpy is 2\.0\.0/);
  });

  it('an extension built for another torch: the ABI entry, not a second line for the package', () => {
    const n = node({
      packages: { transformerEngine: pkg('2.4.0+3cd6870') },
      imports: { transformerEngine: { ok: false, error: 'ImportError: transformer_engine_torch.so: undefined symbol: _ZN3c105ErrorC2E' } },
    });
    expect(lines(checkNode(spec({ needs: ['torch', 'transformerEngine'] }), n))).toEqual([
      'te-torch-abi: TransformerEngine 2.4.0+3cd6870 does not load with torch 2.11.0+cu130: its torch extension was built against another torch (ImportError: transformer_engine_torch.so: undefined symbol: _ZN3c105ErrorC2E); expected a TransformerEngine built for torch 2.11.0+cu130 (rebuild it, or install the torch it was built for)',
    ]);
    // Any other import failure is the package's own line.
    const other = node({ packages: { transformerEngine: pkg('2.4.0') }, imports: { transformerEngine: { ok: false, error: 'RuntimeError: TransformerEngine package version mismatch' } } });
    expect(lines(checkNode(spec({ needs: ['torch', 'transformerEngine'] }), other))).toEqual([
      'transformerEngine: TransformerEngine 2.4.0 does not import: RuntimeError: TransformerEngine package version mismatch; expected it imports: the step needs it',
    ]);
  });

  it('flash-attn outside what TE accepts: a warning', () => {
    const n = node({ packages: { transformerEngine: pkg('2.4.0+3cd6870'), flashAttn: pkg('2.8.3') } });
    expect(lines(checkNode(spec({ uses: ['transformerEngine', 'flashAttn'] }), n), 'warn')[0]).toMatch(/^te-flash-attn-range: flash-attn 2\.8\.3 is outside the versions TransformerEngine 2\.4\.0\+3cd6870 accepts/);
    const ok = node({ packages: { transformerEngine: pkg('2.4.0+3cd6870'), flashAttn: pkg('2.7.4.post1') } });
    expect(lines(checkNode(spec({ uses: ['transformerEngine', 'flashAttn'] }), ok), 'warn')).toEqual([]);
  });

  it('TE blockwise FP8 on an A100, or with a torch built for CUDA 12.4', () => {
    const a100 = node({ nvidia: { gpus: [{ name: 'NVIDIA A100-SXM4-80GB', capability: '8.0', memoryMiB: '81920' }], driver: '550.54' }, packages: { transformerEngine: pkg('2.4.0') } });
    const s = spec({ traits: ['teFp8'], gpus: 1 });
    expect(lines(checkNode(s, a100)).map((l) => l.split(':')[0])).toEqual(['te-blockwise-fp8-gpu']);
    const cuda124 = node({ nvidia: H100, imports: { torch: { ok: true, version: '2.6.0+cu124', cuda: '12.4' } } });
    expect(lines(checkNode(spec({ traits: ['teFp8'], gpus: 8 }), cuda124))).toEqual([
      'te-blockwise-fp8-cuda: FP8 blockwise training needs CUDA ≥ 12.9 and torch 2.6.0+cu124 is built for CUDA 12.4; expected a torch built for CUDA ≥ 12.9',
    ]);
    // BF16 steps are not bound by it.
    expect(lines(checkNode(spec({ gpus: 1 }), a100))).toEqual([]);
  });
});

describe('pins and needs', () => {
  it('a needed package that is missing, a pin that does not hold, a commit that cannot be told', () => {
    const n = node({ packages: { megatron: pkg('0.13.1', { commits: ['ea651a3b78aa'], checkout: '/m' }), slime: pkg('0.1.0', { location: '/root/slime' }) } });
    const rows = checkNode(spec({ needs: ['torch', 'sglang', 'megatron'], uses: ['slime'], versions: { megatron: '==0.14.0', slime: '@8359c9a' } }), n);
    expect(lines(rows)).toEqual([
      'megatron: Megatron core 0.13.1 (ea651a3); expected ==0.14.0 (software.versions.megatron)',
      'sglang: SGLang not found by /usr/bin/python3; expected installed: the step imports it',
    ]);
    expect(lines(rows, 'warn')).toEqual(['slime: slime 0.1.0; expected @8359c9a (software.versions.slime): @8359c9a cannot be told here']);
  });

  it('a pin binds the steps that import the package, not an evaluation image without it', () => {
    expect(lines(checkNode(spec({ needs: ['sglang'], versions: { megatron: '==0.14.0' } }), node({ packages: { sglang: pkg('0.4.6') } })))).toEqual([]);
  });

  it('system facts pinned like versions', () => {
    const rows = checkNode(spec({ gpus: 8, versions: { driver: '>=570', cuda: '>=12.9', computeCapability: '>=9.0' } }), node({ nvidia: { ...H100, driver: '550.54.15' } }));
    expect(lines(rows)).toEqual(['driver: NVIDIA driver 550.54.15; expected >=570 (software.versions.driver)']);
    expect(rows.find((r) => r.check === 'gpu')).toMatchObject({ verdict: 'pass', found: '8× NVIDIA H100 80GB HBM3 (9.0), driver 550.54.15' });
  });

  it('GPUs the step needs: none listed, too few, or a torch without CUDA', () => {
    expect(lines(checkNode(spec({ gpus: 8 }), node({ nvidia: { error: 'nvidia-smi not found' } })))).toEqual(['gpu: nvidia-smi not found; expected 8 GPUs per node']);
    expect(lines(checkNode(spec({ gpus: 8 }), node({ nvidia: { gpus: H100.gpus.slice(0, 4), driver: '580' } })))[0]).toMatch(/^gpu: 4× .*; expected 8 GPUs per node$/);
    const cpuTorch = node({ nvidia: H100, imports: { torch: { ok: true, version: '2.4.0+cpu', cuda: null, cudaAvailable: false } } });
    expect(lines(checkNode(spec({ gpus: 8 }), cpuTorch))[0]).toMatch(/but torch 2\.4\.0\+cpu sees none \(built without CUDA\); expected 8 GPUs per node$/);
  });
});

describe('disk, skips and nodes', () => {
  const saves = { dir: '/data/run/cpt/checkpoints', checkpointBytes: 106.6e9, boundBytes: 5 * 106.6e9, bound: 'at most 5 checkpoints at once (keep last 3)' };
  it('fails below one checkpoint, warns below what the step keeps, passes above', () => {
    const at = (free: number) => checkNode(spec({ saves }), node({ disk: { dir: saves.dir, at: '/data', free } })).find((r) => r.check === 'disk')!;
    expect(rowLine(at(50e9))).toBe("disk: 50.0 GB free on /data; expected ≥ 106.6 GB: one checkpoint with optimizer state (the plan's estimate)");
    expect(at(50e9).verdict).toBe('fail');
    expect(at(200e9)).toMatchObject({ verdict: 'warn', expected: expect.stringContaining('≥ 533.0 GB for at most 5 checkpoints at once (keep last 3)') });
    expect(at(600e9).verdict).toBe('pass');
  });

  it('a check the recipe turns off is shown as skipped, with its reason, and fails nothing', () => {
    const n = node({ packages: { numpy: pkg('2.1.0') }, findings: { 'megatron.npProduct': 'v.py:1' } });
    const rows = checkNode(spec({ skip: [{ check: 'numpy2-megatron-np-product', why: 'our fork calls np.prod' }] }), n);
    expect(lines(rows)).toEqual([]);
    expect(rows.find((r) => r.check === 'numpy2-megatron-np-product')).toMatchObject({ verdict: 'skip', expected: 'skipped: our fork calls np.prod' });
  });

  it('several nodes: what all share once, what one has named by its node', () => {
    const a = node({ host: 'n1', packages: { numpy: pkg('1.26.4') } });
    const b = node({ host: 'n2', packages: { numpy: pkg('2.1.0') } });
    const rows = checkNodes(spec({ uses: ['numpy'], versions: { numpy: '<2' } }), [a, b]);
    expect(rows.filter((r) => r.check === 'torch')).toHaveLength(1);
    expect(lines(rows)).toEqual(['numpy: numpy 2.1.0; expected <2 (software.versions.numpy) [on n2]']);
  });
});

/** A report as probe.py sends it: base64 in numbered lines (probe.test.ts runs the real probe). */
function reportLines(r: ProbeReport, token: string, chunk: number): string[] {
  const data = Buffer.from(JSON.stringify(r)).toString('base64');
  const chunks = data.match(new RegExp(`.{1,${chunk}}`, 'g')) ?? [''];
  return chunks.map((c, i) => `${MARKER}${token} ${i} ${chunks.length} ${c}`);
}

describe("the probe's output", () => {
  it("puts each node's report together from srun's labelled, interleaved lines and says what else it saw", () => {
    const r = node().report;
    const a = reportLines(r, 'n1-1-1', 64).map((l) => `0: ${l}`);
    const b = reportLines({ ...r, host: 'n2' }, 'n2-1-1', 64).map((l) => `1: ${l}`);
    expect(a.length).toBeGreaterThan(3);
    // Interleaved as two tasks' output arrives, with a stray line, and a report that lost a part.
    const lost = reportLines({ ...r, host: 'n3' }, 'n3-1-1', 64).slice(1);
    const out = [...a.flatMap((l, i) => [l, b[i] ?? '']), ...b.slice(a.length), '1: Traceback: boom', ...lost].join('\n');
    const parsed = parseReports(out);
    expect(parsed.reports.map((x) => x.host)).toEqual(['n1', 'n2']);
    expect(parsed.other).toEqual(['1: Traceback: boom', `an unreadable report from n3-1-1 (${lost.length} of ${lost.length + 1} parts)`]);
    expect(parseReports(`${MARKER}{"host": "x"}`).other[0]).toBe(`${MARKER}{"host": "x"}`);
    // A report of the right frame but a wrong shape is not read (a free space that is no number, say).
    const bad = reportLines({ ...r, disk: { dir: '/d', at: '/d', free: 'lots' as unknown as number } }, 'bad-1-1', 64);
    expect(parseReports(bad.join('\n'))).toMatchObject({ reports: [], other: [`an unreadable report from bad-1-1 (${bad.length} of ${bad.length} parts)`] });
  });
});
