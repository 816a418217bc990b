/** The key-by-key diff behind `resume`'s note on an edited recipe: dotted paths, short values, a bounded line. */
import { describe, expect, it } from 'vitest';
import { describeChange, describeChanges, diffValues, shortValue } from '../../../src/util/json-diff.js';

describe('diffValues', () => {
  it('equal values, key order aside, have no differences', () => {
    expect(diffValues({ a: 1, b: { c: [1, 2], d: null } }, { b: { d: null, c: [1, 2] }, a: 1 })).toEqual([]);
  });

  it('names a changed leaf of nested mappings by its dotted path', () => {
    const before = { precision: 'fp8', cpt: { iterations: 600, parallel: { tensor: 1, pipeline: 1 } } };
    const after = { precision: 'bf16', cpt: { iterations: 800, parallel: { tensor: 2, pipeline: 1 } } };
    expect(diffValues(before, after)).toEqual([
      { path: 'precision', before: 'fp8', after: 'bf16' },
      { path: 'cpt.iterations', before: 600, after: 800 },
      { path: 'cpt.parallel.tensor', before: 1, after: 2 },
    ]);
  });

  it('an added or removed key is one change, whole, however deep its value', () => {
    const before = { cpt: { seed: 7 }, eval: { benchmarks: { arith: { data: '/d/a.jsonl' } } } };
    const after = { cpt: {}, eval: { benchmarks: { arith: { data: '/d/a.jsonl' }, gsm8k: { data: '/d/g.jsonl', limit: 50 } } } };
    expect(diffValues(before, after)).toEqual([
      { path: 'cpt.seed', before: 7, after: undefined },
      { path: 'eval.benchmarks.gsm8k', before: undefined, after: { data: '/d/g.jsonl', limit: 50 } },
    ]);
  });

  it('a key whose value is undefined counts as absent (what JSON.stringify drops)', () => {
    expect(diffValues({ a: 1, b: undefined }, { a: 1 })).toEqual([]);
  });

  it('lists of mappings are compared index by index; extra or missing items are added or removed', () => {
    const before = { sft: [{ lr: 1e-3, epochs: 1 }, { lr: 5e-4, epochs: 1 }] };
    const after = { sft: [{ lr: 2e-3, epochs: 1 }] };
    expect(diffValues(before, after)).toEqual([
      { path: 'sft.0.lr', before: 1e-3, after: 2e-3 },
      { path: 'sft.1', before: { lr: 5e-4, epochs: 1 }, after: undefined },
    ]);
    expect(diffValues({ sft: [{ lr: 1 }] }, { sft: [{ lr: 1 }, { lr: 2 }] })).toEqual([{ path: 'sft.1', before: undefined, after: { lr: 2 } }]);
  });

  it('a list of plain values is one value: an inserted flag does not shift every index after it', () => {
    expect(diffValues({ extraArgs: ['--a', '1', '--b'] }, { extraArgs: ['--x', '--a', '1', '--b'] })).toEqual([
      { path: 'extraArgs', before: ['--a', '1', '--b'], after: ['--x', '--a', '1', '--b'] },
    ]);
  });

  it('a value that changes kind (scalar to mapping, list to scalar) is one change at its path', () => {
    expect(diffValues({ a: 1, b: [1] }, { a: { x: 1 }, b: 'one' })).toEqual([
      { path: 'a', before: 1, after: { x: 1 } },
      { path: 'b', before: [1], after: 'one' },
    ]);
  });

  it('scalars at the top differ as the whole value', () => {
    expect(diffValues(1, 2)).toEqual([{ path: '(the whole value)', before: 1, after: 2 }]);
  });
});

describe('describeChanges', () => {
  it('writes changed, added and removed keys with their values', () => {
    expect(describeChange({ path: 'cpt.iterations', before: 20, after: 40 })).toBe('cpt.iterations 20→40');
    expect(describeChange({ path: 'cpt.seed', before: undefined, after: 7 })).toBe('cpt.seed added (7)');
    expect(describeChange({ path: 'sft.1', before: { lr: 1 }, after: undefined })).toBe('sft.1 removed (was {…})');
    expect(describeChange({ path: 'cpt.extraArgs', before: [], after: ['--x', 1] })).toBe('cpt.extraArgs []→[--x, 1]');
  });

  it('keeps a long value to its start and end', () => {
    const s = shortValue('/very/long/path/to/a/data/directory/with/the/file/cpt.jsonl');
    expect(s.length).toBe(40);
    expect(s).toMatch(/^\/very\/long.*….*file\/cpt\.jsonl$/);
  });

  it('lists at most ten, then how many more', () => {
    const changes = Array.from({ length: 13 }, (_, i) => ({ path: `k${i}`, before: i, after: i + 1 }));
    const line = describeChanges(changes);
    expect(line.split(', ')).toHaveLength(11);
    expect(line).toMatch(/^k0 0→1, k1 1→2, .*k9 9→10, and 3 more$/);
    expect(describeChanges(changes.slice(0, 2))).toBe('k0 0→1, k1 1→2');
  });
});
