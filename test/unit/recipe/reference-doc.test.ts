/** docs/recipe-reference.md documents every key of the schema and every deviation in FIXES. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { FIXES } from '../../../src/backends/fixes.js';
import { objectKeys, schemaAt } from '../../../src/recipe/schema-walk.js';
import { recipeSchema } from '../../../src/recipe/schema.js';

const doc = readFileSync(new URL('../../../docs/recipe-reference.md', import.meta.url), 'utf8');

function allKeys(s: z.ZodType | undefined, out = new Set<string>()): Set<string> {
  if (!s) return out;
  const keys = objectKeys(s);
  if (keys) {
    for (const k of keys) {
      out.add(k);
      allKeys(schemaAt(s, [k]), out);
    }
  } else {
    allKeys(schemaAt(s, [0]), out); // a list's items or a mapping's values
  }
  return out;
}

describe('docs/recipe-reference.md', () => {
  it('names every recipe key', () => {
    const keys = [...allKeys(recipeSchema)];
    expect(keys.length).toBeGreaterThan(100);
    expect(keys.filter((k) => !doc.includes(`\`${k}\``))).toEqual([]);
  });
  it('lists every documented fix', () => {
    expect(FIXES.map((f) => f.id).filter((id) => !doc.includes(`\`${id}\``))).toEqual([]);
  });
});
