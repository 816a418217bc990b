/**
 * The docs are self-contained: every reason the product gives can be followed inside the repository. Each
 * relative link of a Markdown page resolves (its file, and its `#anchor` to a heading of that file); every
 * citation of a page in any source, doc, recipe or test (`docs/infir2-recipe.md §3.2`, `docs/architecture.md#stage-ids`)
 * names a page that exists and a section it has; and nothing cites what a clone does not hold (a bare `docs §`,
 * DESIGN, the team's shared notes).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../../..');
const SELF = relative(ROOT, import.meta.filename);
const SCANNED = ['README.md', 'Makefile', 'Dockerfile', 'docker-compose.yml', 'docs', 'src', 'trainer', 'recipes', 'test', 'deploy', 'scripts', 'bench', 'bin'];
const SKIP_DIRS = new Set(['node_modules', 'dist', '__pycache__', '.venv']);
const TEXT = /\.(md|ts|js|py|sh|ya?ml|json|args|env|txt|service|example|toml)$|^(Makefile|Dockerfile|infir2)$/;

function walk(p: string): string[] {
  const abs = join(ROOT, p);
  if (!existsSync(abs)) return [];
  if (!statSync(abs).isDirectory()) return TEXT.test(p.split('/').pop()!) ? [p] : [];
  return readdirSync(abs).flatMap((name) => (SKIP_DIRS.has(name) ? [] : walk(join(p, name))));
}

const files = SCANNED.flatMap(walk).filter((f) => f !== SELF);
const read = (f: string) => readFileSync(join(ROOT, f), 'utf8');

/** GitHub's anchor for a heading: lower case, punctuation dropped (letters, digits, `-` and `_` stay), spaces to `-`. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** A page's headings outside code blocks, with GitHub's `-1`, `-2` for repeats. */
function headings(file: string): { text: string; anchor: string }[] {
  const seen = new Map<string, number>();
  const out: { text: string; anchor: string }[] = [];
  let fenced = false;
  for (const line of read(file).split('\n')) {
    if (/^```/.test(line)) fenced = !fenced;
    const m = !fenced && /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.push({ text: m[1]!, anchor: n ? `${base}-${n}` : base });
  }
  return out;
}

/** Whether `file` has a heading numbered `n` (`## 7. …`, `### 3.1 …`). */
const hasSection = (file: string, n: string) => headings(file).some((h) => new RegExp(`^${n.replace(/\./g, '\\.')}\\.?(\\s|$)`).test(h.text));

describe('links between the docs', () => {
  const pages = files.filter((f) => f.endsWith('.md'));

  it('scans the pages (README, docs/, the trainer)', () => {
    expect(pages).toEqual(expect.arrayContaining(['README.md', 'docs/architecture.md', 'docs/cluster.md', 'docs/infir2-recipe.md', 'trainer/README.md']));
  });

  it('every relative link of a page names a file that exists, and an anchor that its headings have', () => {
    const broken: string[] = [];
    for (const page of pages) {
      let fenced = false;
      for (const line of read(page).split('\n')) {
        if (/^```/.test(line)) fenced = !fenced;
        if (fenced) continue;
        for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) {
          const target = m[1]!;
          if (/^[a-z]+:/i.test(target)) continue; // http:, https:, mailto:
          const [path, anchor] = target.split('#') as [string, string | undefined];
          const file = path ? relative(ROOT, resolve(dirname(join(ROOT, page)), path)) : page;
          if (!existsSync(join(ROOT, file))) broken.push(`${page}: (${target}): no file ${file}`);
          else if (anchor && file.endsWith('.md') && !headings(file).some((h) => h.anchor === anchor)) broken.push(`${page}: (${target}): ${file} has no heading #${anchor}`);
        }
      }
    }
    expect(broken).toEqual([]);
  });
});

describe('citations in the sources, recipes and tests', () => {
  it('every `docs/<page>.md` cited names a page of docs/, with the section or anchor it names', () => {
    const broken: string[] = [];
    let cited = 0;
    for (const f of files) {
      // docs/SFT.md, docs/RL.md…: InfiR2's own pages, in capitals; ours are lower case.
      for (const m of read(f).matchAll(/\b((?:docs\/[a-z0-9-]+|README)\.md)(#[a-z0-9_-]+)?((?:,? ?§\s?[0-9][0-9.]*(?:[–-][0-9]+)?)+)?/g)) {
        const [, page, anchor, sections] = m as unknown as [string, string, string | undefined, string | undefined];
        cited += 1;
        if (!existsSync(join(ROOT, page))) {
          broken.push(`${f}: ${page} does not exist`);
          continue;
        }
        if (anchor && !headings(page).some((h) => h.anchor === anchor.slice(1))) broken.push(`${f}: ${page}${anchor}: no such heading`);
        for (const s of sections?.matchAll(/§\s?([0-9][0-9.]*[0-9]|[0-9])(?:[–-]([0-9]+))?/g) ?? []) {
          for (const n of [s[1]!, s[2]].filter((x): x is string => Boolean(x))) if (!hasSection(page, n)) broken.push(`${f}: ${page} §${n}: no such section`);
        }
      }
    }
    expect(broken).toEqual([]);
    expect(cited).toBeGreaterThan(50);
  });

  it('nothing cites a document that is not in the repository', () => {
    const outside = [/\bdocs §/, /\bDESIGN(\.md)?\b/, /\/work\/(shared|notes)\b/, /\bshared\/docs\b/, /style-and-temporal-ts/, /orchestration-anchors/];
    const found = files.flatMap((f) =>
      read(f)
        .split('\n')
        .flatMap((line, i) => (outside.some((re) => re.test(line)) ? [`${f}:${i + 1}: ${line.trim().slice(0, 120)}`] : [])),
    );
    expect(found).toEqual([]);
  });
});

describe('slug', () => {
  it.each([
    ['`cpt`: continued pretraining, one WSD lineage in three steps', 'cpt-continued-pretraining-one-wsd-lineage-in-three-steps'],
    ['11. Payload encryption', '11-payload-encryption'],
    ["The run's view", 'the-runs-view'],
    ['Young–Daly, `keep` and retention', 'youngdaly-keep-and-retention'],
  ])('%s → %s', (h, s) => expect(slug(h)).toBe(s));
});
