/**
 * Walking trees someone else filled (src/rundir/tree-walk.ts, outputs.ts): a symbolic link loop or a link to `/`
 * is an entry, never a way out; the walk is bounded and asynchronous; a step's fingerprint of a plain tree is what
 * the walk before it computed (results recorded by earlier versions still verify).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { iterDirName } from '../../../src/rundir/checkpoints.js';
import { fingerprintOutputs } from '../../../src/rundir/outputs.js';
import { treeBytes, walkTree, type TreeEntry } from '../../../src/rundir/tree-walk.js';
import { fakeStep } from '../../integration/harness.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'infir2-walk-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

async function entries(root: string, limits?: { maxEntries: number; maxDepth: number }): Promise<{ seen: TreeEntry[]; truncated: string | null }> {
  const seen: TreeEntry[] = [];
  const { truncated } = await walkTree(root, (e) => seen.push(e), limits);
  return { seen, truncated };
}

describe('walkTree', () => {
  it('sums a tree; a missing one is 0', async () => {
    mkdirSync(join(dir, 'a', 'b'), { recursive: true });
    writeFileSync(join(dir, 'a', 'x'), 'x'.repeat(100));
    writeFileSync(join(dir, 'a', 'b', 'y'), 'y'.repeat(23));
    expect(await treeBytes(join(dir, 'a'))).toEqual({ bytes: 123, truncated: null });
    expect(await treeBytes(join(dir, 'gone'))).toEqual({ bytes: 0, truncated: null });
  });

  it('a symlink loop (ln -s . a; ln -s . b) and a link to / are entries of their own, never followed', async () => {
    const ck = join(dir, 'iter_0000300');
    mkdirSync(ck);
    writeFileSync(join(ck, 'model.pt'), 'm'.repeat(1000));
    symlinkSync('.', join(ck, 'a'));
    symlinkSync('.', join(ck, 'b'));
    symlinkSync('/', join(ck, 'root'));
    const t0 = Date.now();
    const { seen, truncated } = await entries(ck);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(truncated).toBeNull();
    expect(seen.map((e) => [e.rel, e.type, e.target ?? null])).toEqual([
      ['.', 'dir', null],
      ['a', 'link', '.'],
      ['b', 'link', '.'],
      ['model.pt', 'file', null],
      ['root', 'link', '/'],
    ]);
    expect((await treeBytes(ck)).bytes).toBe(1000);
  });

  it('a root that is itself a link is one entry', async () => {
    symlinkSync('/', join(dir, 'root'));
    const { seen } = await entries(join(dir, 'root'));
    expect(seen).toEqual([{ rel: '.', type: 'link', size: 0, mtimeMs: expect.any(Number), target: '/' }]);
  });

  it('stops after maxEntries entries and below maxDepth levels, saying so', async () => {
    for (let i = 0; i < 10; i++) writeFileSync(join(dir, `f${i}`), 'x');
    const wide = await entries(dir, { maxEntries: 5, maxDepth: 64 });
    expect(wide.seen).toHaveLength(5);
    expect(wide.truncated).toBe('more than 5 entries');
    let deep = join(dir, 'd');
    for (let i = 0; i < 5; i++) deep = join(deep, 'd');
    mkdirSync(deep, { recursive: true });
    const shallow = await entries(join(dir, 'd'), { maxEntries: 100, maxDepth: 3 });
    expect(shallow.truncated).toBe('deeper than 3 levels at d/d/d');
    expect(shallow.seen.map((e) => e.rel)).toEqual(['.', 'd', 'd/d', 'd/d/d']);
  });

  it('lets the event loop run while it walks', async () => {
    for (let i = 0; i < 2000; i++) writeFileSync(join(dir, `f${i}`), 'x');
    let ticks = 0;
    const timer = setInterval(() => (ticks += 1), 0);
    await treeBytes(dir);
    clearInterval(timer);
    expect(ticks).toBeGreaterThan(0);
  });
});

describe('fingerprintOutputs', () => {
  it('is, for a plain tree, the digest the earlier walk computed (path, size, mtime of each file, sorted, depth first)', async () => {
    const step = fakeStep({ id: 'cpt.stable', runDir: dir, iters: 10 });
    const c = step.completion as { kind: 'checkpoint'; dir: string; iteration: number };
    const out = join(c.dir, iterDirName(c.iteration));
    mkdirSync(join(out, 'sub'), { recursive: true });
    writeFileSync(join(out, 'metadata.json'), '{}');
    writeFileSync(join(out, 'sub', 'b.pt'), 'bb');
    writeFileSync(join(out, 'a.pt'), 'a');
    const line = (rel: string) => {
      const st = statSync(join(out, rel));
      return `${rel}\t${st.size}\t${Math.floor(st.mtimeMs)}`;
    };
    const expected = createHash('sha256').update(`${out}\n${['a.pt', 'metadata.json', 'sub/b.pt'].map(line).join('\n')}\n`).digest('hex').slice(0, 32);
    expect(await fingerprintOutputs(step)).toBe(expected);
    // A link planted in it changes the fingerprint (by its text), and is not followed.
    symlinkSync('.', join(out, 'loop'));
    const withLink = await fingerprintOutputs(step);
    expect(withLink).not.toBe(expected);
    expect(await fingerprintOutputs(step)).toBe(withLink);
  });
});
