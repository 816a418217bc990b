/**
 * `docs/recipe-reference.md` is hand-written prose around generated tables. Each table sits between
 *   <!-- generated: fields <path> -->   (a part of the recipe schema: `.` is the top level, `sft[]` an SFT stage)
 *   <!-- generated: fixes -->           (src/backends/fixes.ts)
 * and `<!-- end generated -->`. `renderReferencePage` refills every table from the source; `make docs` writes
 * the result and the unit tests fail while the committed page differs from it.
 */
import type { z } from 'zod';
import { FIXES } from '../backends/fixes.js';
import { type FieldDoc, fieldDocs, fieldTable, schemaAtDocPath } from '../recipe/reference.js';
import { recipeSchema } from '../recipe/schema.js';

const BLOCK_RE = /(<!-- generated: (fields (\S+)|fixes) -->\n)[\s\S]*?(<!-- end generated -->)/g;

export class ReferenceError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join('\n'));
  }
}

function fixesTable(): string {
  const cell = (t: string) => t.replace(/\|/g, '\\|');
  return [
    '| id | the scripts | infir2 | why |',
    '| --- | --- | --- | --- |',
    ...FIXES.map((f) => `| \`${f.id}\` | ${cell(f.original)} | ${cell(f.fix)} | ${cell(f.why)} |`),
  ].join('\n');
}

/**
 * The page with every generated table refilled. Each field goes to the table of the longest path that contains
 * it (`.` takes the rest). Throws when a field has no table or no description.
 */
export function renderReferencePage(page: string, schema: z.ZodType = recipeSchema): string {
  const blocks = [...page.matchAll(BLOCK_RE)].flatMap((m) => (m[3] ? [m[3] === '.' ? '' : m[3]] : []));
  const problems: string[] = [];
  for (const b of blocks) if (!schemaAtDocPath(schema, b)) problems.push(`docs: no recipe field \`${b}\` (a generated: fields block)`);
  const rows = new Map<string, FieldDoc[]>(blocks.map((b) => [b, []]));
  for (const r of fieldDocs(schema)) {
    if (!r.meaning) problems.push(`src/recipe/schema.ts: \`${r.path}\` has no .describe() text`);
    const owner = blocks
      .filter((b) => b === '' || r.path.startsWith(`${b}.`))
      .sort((a, b) => b.length - a.length)[0];
    if (owner === undefined) problems.push(`docs: \`${r.path}\` is in no generated table`);
    else rows.get(owner)!.push(r);
  }
  if (problems.length) throw new ReferenceError(problems);
  return page.replace(BLOCK_RE, (_all, open: string, _kind, path: string | undefined, close: string) => {
    const table = path === undefined ? fixesTable() : fieldTable(rows.get(path === '.' ? '' : path)!, path === '.' ? '' : path);
    return `${open}${table}\n${close}`;
  });
}
