import { describe, expect, it } from 'vitest';
import { assign, deepMerge, forbiddenKeyPaths, parseAssignment, type Assignment } from '../../../src/recipe/merge.js';
import { closest, levenshtein } from '../../../src/recipe/suggest.js';

describe('deepMerge (recipe over preset)', () => {
  it('merges mappings key by key, replaces lists and scalars, and drops keys set to null', () => {
    const preset = { cpt: { lr: 1, parallel: { tensor: 4, pipeline: 1 } }, sft: [{ lr: 1 }, { lr: 2 }], rl: { lr: 3 }, name: 'a' };
    const recipe = { cpt: { parallel: { tensor: 2 } }, sft: [{ lr: 9 }], rl: null, name: 'b' };
    expect(deepMerge(preset, recipe)).toEqual({ cpt: { lr: 1, parallel: { tensor: 2, pipeline: 1 } }, sft: [{ lr: 9 }], name: 'b' });
  });
  it('leaves its inputs alone', () => {
    const preset = { cpt: { lr: 1 } };
    deepMerge(preset, { cpt: { lr: 2 } });
    expect(preset).toEqual({ cpt: { lr: 1 } });
  });
});

describe('--set key.path=value', () => {
  const set = (target: Record<string, unknown>, text: string) => {
    const a = parseAssignment(text);
    if (typeof a === 'string') throw new Error(a);
    return assign(target, a);
  };

  it('parses values as YAML scalars and indexes lists with numbers', () => {
    expect(parseAssignment('sft.0.lr=1e-5')).toEqual({ text: 'sft.0.lr=1e-5', path: ['sft', 0, 'lr'], value: 0.00001 });
    expect((parseAssignment('cpt.profile=false') as Assignment).value).toBe(false);
    expect((parseAssignment('eval.models=[rl, fp8]') as Assignment).value).toEqual(['rl', 'fp8']);
    expect((parseAssignment('model.hf=/a=b') as Assignment).value).toBe('/a=b');
    expect((parseAssignment('name=') as Assignment).value).toBeNull();
  });

  it.each([
    ['cpt.iterations', /expected key\.path=value/],
    ['=5', /expected key\.path=value/],
    ['a..b=1', /empty key segment/],
    ['a.b c=1', /invalid key segment 'b c'/],
    ['a=[1,', /not valid YAML/],
  ])('rejects %s', (text, message) => {
    expect(parseAssignment(text)).toMatch(message);
  });

  it('creates missing mappings, replaces list items, appends at the end, deletes with null', () => {
    const t: Record<string, unknown> = { sft: [{ lr: 1 }], cpt: { lr: 1 } };
    expect(set(t, 'sft.0.lr=2')).toBeUndefined();
    expect(set(t, 'sft.1={lr: 3}')).toBeUndefined();
    expect(set(t, 'rl.curriculum=[]')).toBeUndefined();
    expect(set(t, 'cpt=null')).toBeUndefined();
    expect(t).toEqual({ sft: [{ lr: 2 }, { lr: 3 }], rl: { curriculum: [] } });
  });

  it('says where a path cannot be followed', () => {
    const t: Record<string, unknown> = { sft: [{ lr: 1 }], name: 'x' };
    expect(set(t, 'sft.3.lr=1')).toBe('sft has 1 item(s): index 3 is out of range');
    expect(set(t, 'sft.lr=1')).toBe("sft is a list: index it with a number, not 'lr'");
    expect(set(t, 'name.x=1')).toBe('name is a string, not a mapping or a list');
  });

  it('walks only own keys: an inherited one (toString) becomes a key of the recipe, Object.prototype stays untouched', () => {
    const t: Record<string, unknown> = { cpt: {} };
    expect(set(t, 'cpt.toString.x=1')).toBeUndefined();
    expect(t).toEqual({ cpt: { toString: { x: 1 } } });
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });

  it('refuses keys that reach the prototype, in the path and in the value, naming the key path', () => {
    expect(parseAssignment('pools.__proto__.x=1')).toMatch(/^pools\.__proto__: key not allowed/);
    expect(parseAssignment('constructor.prototype.x=1')).toMatch(/^constructor: key not allowed/);
    expect(parseAssignment('cpt.env={a: 1, __proto__: 2}')).toMatch(/^cpt\.env\.__proto__: key not allowed/);
    // assign() refuses on its own too, for an Assignment built elsewhere.
    expect(assign({}, { text: 'x', path: ['a', '__proto__', 'x'], value: 1 })).toMatch(/^a\.__proto__: key not allowed/);
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });
});

describe('forbidden keys in parsed data', () => {
  it('finds them at any depth, in mappings and lists, and stops below each', () => {
    const data = JSON.parse('{"a": {"__proto__": {"constructor": 1}}, "b": [{"prototype": 2}], "c": {"ok": 1}}');
    expect(forbiddenKeyPaths(data)).toEqual([['a', '__proto__'], ['b', 0, 'prototype']]);
  });
  it('makes deepMerge throw rather than set a prototype', () => {
    expect(() => deepMerge({ a: 1 }, JSON.parse('{"__proto__": {"x": 1}}'))).toThrow(/forbidden key '__proto__'/);
  });
});

describe('did you mean', () => {
  it('measures edits', () => {
    expect(levenshtein('kitten', 'sitting')).toBe(3);
    expect(levenshtein('', 'abc')).toBe(3);
  });
  it('finds typos, case and snake_case variants, and nothing for unrelated words', () => {
    const keys = ['warmupIters', 'decayIters', 'iterations', 'saveInterval'];
    expect(closest('warmupIter', keys)).toBe('warmupIters');
    expect(closest('warmup_iters', keys)).toBe('warmupIters');
    expect(closest('SaveInterval', keys)).toBe('saveInterval');
    expect(closest('tokenizer', keys)).toBeUndefined();
  });
});
