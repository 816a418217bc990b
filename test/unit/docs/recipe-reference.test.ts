/** docs/recipe-reference.md is generated from the schema: the committed page must be what `make docs` writes. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { FIXES } from '../../../src/backends/fixes.js';
import { ReferenceError, renderReferencePage } from '../../../src/docs/recipe-reference.js';
import { count, duration, path } from '../../../src/recipe/fields.js';
import { fieldDocs } from '../../../src/recipe/reference.js';
import { recipeSchema } from '../../../src/recipe/schema.js';

const page = readFileSync(new URL('../../../docs/recipe-reference.md', import.meta.url), 'utf8');
const rowOf = (key: string, section: string) => {
  const start = page.indexOf(`<!-- generated: fields ${section} -->`);
  const end = page.indexOf('<!-- end generated -->', start);
  return page
    .slice(start, end)
    .split('\n')
    .find((l) => l.startsWith(`| \`${key}\` |`))
    ?.split(' | ')
    .map((c) => c.replace(/^\| |\s\|$/g, ''));
};

describe('docs/recipe-reference.md', () => {
  it('is what `make docs` generates from the schema', () => {
    // On failure: run `make docs` and commit the page.
    expect(renderReferencePage(page)).toBe(page);
  });

  it('has a row with type, default and meaning for every field of the schema', () => {
    const fields = fieldDocs(recipeSchema);
    expect(fields.length).toBeGreaterThan(200);
    for (const f of fields) {
      expect(f.meaning, f.path).not.toBe('');
      expect(f.type, f.path).not.toBe('');
    }
    // The leaves a user sets most, as the page shows them.
    expect(rowOf('iterations', 'cpt')?.slice(1, 3)).toEqual(['whole number ≥ 1', 'required']);
    expect(rowOf('stallTimeout', 'cpt')?.slice(1, 3)).toEqual(['duration', '`2h`']);
    expect(rowOf('stallTimeout', 'rl')?.slice(1, 3)).toEqual(['duration', '`3h`']);
    expect(rowOf('retries.preempted', 'convert')?.slice(1, 3)).toEqual(['whole number ≥ 0', '`3`']);
    expect(rowOf('launcher', 'pools.<name>')?.[1]).toBe('one of `local`, `torchrun`, `slurm`, `ray`');
    expect(rowOf('curriculum[].maxResponseLen', 'rl')?.[2]).toBe('required');
    expect(rowOf('models', 'eval')?.[1]).toBe('list of `base`, `hf`, `fp8`, `rl`');
    // A shared mapping is listed once and referred to after that.
    expect(rowOf('arch', 'sft[]')?.[1]).toBe('mapping: the fields of `model.arch`');
    expect(rowOf('parallel', 'rl')?.[1]).toBe('mapping: the fields of `cpt.parallel`');
  });

  it('lists every documented deviation from the scripts', () => {
    for (const f of FIXES) expect(page).toContain(`| \`${f.id}\` |`);
  });

  it('notices a page edited by hand', () => {
    const edited = page.replace('| `logInterval` | whole number ≥ 1 | `1` |', '| `logInterval` | whole number ≥ 1 | `10` |');
    expect(edited).not.toBe(page);
    expect(renderReferencePage(edited)).toBe(page);
  });

  it('refuses a page that leaves fields out, and a field without a meaning', () => {
    // Without its own table a section's fields join the top-level table; without that, they are missing.
    const withoutRl = page.replace(/<!-- generated: fields rl -->[\s\S]*?<!-- end generated -->/, '');
    expect(renderReferencePage(withoutRl)).toContain('| `rl.curriculum[].rollouts` |');
    const withoutTop = page.replace(/<!-- generated: fields \. -->[\s\S]*?<!-- end generated -->/, '');
    expect(() => renderReferencePage(withoutTop)).toThrow(/`precision` is in no generated table/);
    expect(() => renderReferencePage(`${page}\n<!-- generated: fields cpt.nope -->\n<!-- end generated -->\n`)).toThrow(
      /no recipe field `cpt.nope`/,
    );

    const schema = z.strictObject({
      iterations: count().describe('how many'),
      timeout: duration().prefault('5m'),
      data: path().optional().describe('input'),
    });
    const small = '<!-- generated: fields . -->\n<!-- end generated -->\n';
    try {
      renderReferencePage(small, schema);
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(ReferenceError);
      expect((e as ReferenceError).problems).toEqual(['src/recipe/schema.ts: `timeout` has no .describe() text']);
    }
    expect(renderReferencePage(small, schema.extend({ timeout: duration().prefault('5m').describe('per request') }))).toBe(
      [
        '<!-- generated: fields . -->',
        '| key | type | default | meaning |',
        '| --- | --- | --- | --- |',
        '| `iterations` | whole number ≥ 1 | required | how many |',
        '| `timeout` | duration | `5m` | per request |',
        '| `data` | path | – | input |',
        '<!-- end generated -->',
        '',
      ].join('\n'),
    );
  });
});
