/**
 * `make docs`: refill the generated tables of docs/recipe-reference.md from the schema.
 * `--check` writes nothing and exits 1 when the page is out of date (the unit tests do the same).
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ReferenceError, renderReferencePage } from '../src/docs/recipe-reference.js';

const file = fileURLToPath(new URL('../docs/recipe-reference.md', import.meta.url));
const page = readFileSync(file, 'utf8');
let next: string;
try {
  next = renderReferencePage(page);
} catch (e) {
  if (!(e instanceof ReferenceError)) throw e;
  for (const p of e.problems) console.error(`error: ${p}`);
  process.exit(2);
}
if (process.argv.includes('--check')) {
  if (next !== page) {
    console.error('docs/recipe-reference.md is out of date: run `make docs`');
    process.exit(1);
  }
} else if (next !== page) {
  writeFileSync(`${file}.tmp`, next);
  renameSync(`${file}.tmp`, file); // never a half-written page
  console.log('docs/recipe-reference.md updated');
} else {
  console.log('docs/recipe-reference.md is up to date');
}
