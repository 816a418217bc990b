/**
 * Files of ours in directories others can write (src/util/safe-fs.ts, atomic-write.ts): a planted symbolic link,
 * hard link, FIFO or device is refused on the open descriptor, never written through and never blocked on.
 */
import { execFileSync } from 'node:child_process';
import { chownSync, linkSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { writeFileAtomic } from '../../../src/util/atomic-write.js';
import { appendFileSafe, openAppendSafe, readFileSafe, UnsafeFileError } from '../../../src/util/safe-fs.js';

let dir: string;
let victim: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'infir2-safefs-'));
  victim = join(dir, 'victim');
  writeFileSync(victim, 'precious\n');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const isRoot = process.geteuid?.() === 0;

describe('appendFileSafe', () => {
  it('creates and appends to a file of ours', () => {
    const f = join(dir, 'journal.jsonl');
    appendFileSafe(f, 'a\n');
    appendFileSafe(f, 'b\n');
    expect(readFileSync(f, 'utf8')).toBe('a\nb\n');
  });

  it('refuses a symbolic link (dangling or not), a hard link, a FIFO and a device, leaving each target alone', () => {
    const cases: [string, () => void, RegExp][] = [
      ['link', () => symlinkSync(victim, join(dir, 'link')), /is a symbolic link: refused/],
      ['dangling', () => symlinkSync(join(dir, 'nowhere'), join(dir, 'dangling')), /is a symbolic link/],
      ['hard', () => linkSync(victim, join(dir, 'hard')), /has 2 hard links/],
      ['fifo', () => execFileSync('mkfifo', [join(dir, 'fifo')]), /is a FIFO/], // no reader: refused at the open (ENXIO), never blocked on
      ['dev', () => symlinkSync('/dev/null', join(dir, 'dev')), /is a symbolic link/],
    ];
    for (const [name, plant, message] of cases) {
      plant();
      expect(() => appendFileSafe(join(dir, name), 'evil\n'), name).toThrow(message);
    }
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
    expect(readdirSync(dir)).not.toContain('nowhere');
  });

  it.skipIf(!isRoot)('refuses a file that belongs to another user (run as root: the file is given to nobody)', () => {
    const f = join(dir, 'theirs');
    writeFileSync(f, '');
    chownSync(f, 65534, 65534);
    expect(() => appendFileSafe(f, 'x')).toThrow(/belongs to uid 65534, not to this process's uid 0/);
  });

  it('the async open for a log does the same', async () => {
    symlinkSync(victim, join(dir, 'log'));
    await expect(openAppendSafe(join(dir, 'log'), true)).rejects.toBeInstanceOf(UnsafeFileError);
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
  });
});

describe('readFileSafe', () => {
  it('reads a small file; absent is null', () => {
    writeFileSync(join(dir, 'r'), 'hello');
    expect(readFileSafe(join(dir, 'r'), { maxBytes: 100 })?.text).toBe('hello');
    expect(readFileSafe(join(dir, 'none'), { maxBytes: 100 })).toBeNull();
  });

  it('a FIFO is refused at once instead of blocking the reader forever', () => {
    execFileSync('mkfifo', [join(dir, 'fifo')]);
    const t0 = Date.now();
    expect(() => readFileSafe(join(dir, 'fifo'), { maxBytes: 100, follow: true })).toThrow(/is a FIFO/);
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  it('an endless or oversized file is refused; a link is followed only when asked', () => {
    symlinkSync('/dev/zero', join(dir, 'zero'));
    expect(() => readFileSafe(join(dir, 'zero'), { maxBytes: 100, follow: true })).toThrow(/is a device/);
    writeFileSync(join(dir, 'big'), 'x'.repeat(101));
    expect(() => readFileSafe(join(dir, 'big'), { maxBytes: 100 })).toThrow(/is 101 bytes, more than the 100/);
    symlinkSync(victim, join(dir, 'link'));
    expect(() => readFileSafe(join(dir, 'link'), { maxBytes: 100 })).toThrow(/is a symbolic link/);
    expect(readFileSafe(join(dir, 'link'), { maxBytes: 100, follow: true })?.text).toBe('precious\n');
  });
});

describe('writeFileAtomic', () => {
  it('replaces a link planted at the final name instead of writing through it, and leaves no temp file', () => {
    const f = join(dir, 'results.json');
    symlinkSync(victim, f);
    writeFileAtomic(f, '{"ok": true}\n');
    expect(readFileSync(f, 'utf8')).toBe('{"ok": true}\n');
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
    expect(readdirSync(dir).filter((n) => n.includes('.tmp'))).toEqual([]);
  });

  it('never writes through a link planted at a guessable temp name (<file>.tmp-<pid>, <file>.tmp)', () => {
    const f = join(dir, 'plan.json');
    for (const guess of [`${f}.tmp-${process.pid}`, `${f}.tmp`]) symlinkSync(victim, guess);
    writeFileAtomic(f, '{}\n');
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
    expect(readFileSync(f, 'utf8')).toBe('{}\n');
  });
});
