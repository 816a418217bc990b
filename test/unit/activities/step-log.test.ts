/**
 * The step's log rotated by size (src/activities/step-log.ts) and read back (src/rundir/step-log.ts): after 20×
 * its cap the disk holds about the cap, the head and the newest part are whole, one marker says what was dropped;
 * backpressure, attempts appending to the same log, `--follow` across rotations, and a full disk as the stream's
 * error.
 */
import { MockActivityEnvironment } from '@temporalio/testing';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { failure, openAttempt } from '../../../src/activities/attempt.js';
import { refineVerdict } from '../../../src/activities/failure-evidence.js';
import { closeStream, logFile } from '../../../src/activities/step-files.js';
import { StepLog } from '../../../src/activities/step-log.js';
import { headFile, logLimits, MIB, previousFile, StepLogReader } from '../../../src/rundir/step-log.js';
import { formatBytes } from '../../../src/rundir/storage.js';
import { fill, mountTmpfs, NO_MOUNT, umount } from '../../integration/full-disk.js';
import { fakeStep, ROOT } from '../../integration/harness.js';

let dir: string;
let file: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'infir2-steplog-'));
  file = join(dir, 'cpt.stable.log');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** Line `i` of a flood: 100 bytes, numbered so that order and gaps show. */
const line = (i: number) => `line ${String(i).padStart(9, '0')} ${'x'.repeat(84)}\n`;

/** Write lines `from`…`to - 1` in 64 KiB chunks (a pipe's), waiting on 'drain' as the supervisor does. */
async function flood(log: StepLog, from: number, to: number): Promise<void> {
  const perChunk = 655;
  for (let i = from; i < to && !log.destroyed; i += perChunk) {
    let text = '';
    for (let j = i; j < Math.min(to, i + perChunk); j++) text += line(j);
    if (!log.write(text)) await new Promise((r) => log.once('drain', r));
  }
}

const sizeOf = (f: string) => (existsSync(f) ? statSync(f).size : 0);
const onDisk = () => sizeOf(file) + sizeOf(headFile(file)) + sizeOf(previousFile(file));

/** Everything a reader prints of the log, as `infir2 logs` does. */
function readAll(): string {
  const out: Buffer[] = [];
  const r = new StepLogReader(file, (b) => out.push(b));
  r.pump();
  r.close();
  return Buffer.concat(out).toString('utf8');
}

/** The numbers of the flood's lines in `text`, in order; other lines as null. */
const numbers = (text: string) => text.split('\n').filter(Boolean).map((l) => (/^line (\d{9}) x{84}$/.exec(l) ? Number(l.slice(5, 14)) : null));

const consecutive = (ns: (number | null)[]) => ns.every((n, i) => i === 0 || n === ns[i - 1]! + 1);

describe('StepLog', () => {
  it('after 20× its cap: about the cap on disk, the head and the newest part whole, one marker naming what was dropped', async () => {
    const log = new StepLog(file, 1);
    const total = Math.floor((20 * MIB) / 100);
    await flood(log, 0, total);
    await closeStream(log);

    const { head, part } = logLimits(1)!;
    expect(sizeOf(headFile(file))).toBeLessThanOrEqual(head);
    expect(sizeOf(previousFile(file))).toBeLessThanOrEqual(part);
    expect(sizeOf(file)).toBeLessThanOrEqual(part);
    expect(onDisk()).toBeLessThanOrEqual(MIB);
    expect(onDisk()).toBeGreaterThan(head + part); // the newest part is at least a whole part

    // The files themselves: the head from the first line, every part from a line's start to a line's end.
    expect(readFileSync(headFile(file), 'utf8').startsWith(line(0))).toBe(true);
    for (const f of [headFile(file), previousFile(file), file]) expect(readFileSync(f, 'utf8').endsWith('\n')).toBe(true);
    const live = readFileSync(file, 'utf8');
    expect(live).toMatch(/^\[infir2 \S+\] log continues at byte \d+ after cpt\.stable\.log\.1; cpt\.stable\.log\.head holds its beginning, and what lay between them was dropped \(logs\.maxMB=1\)\n/);
    expect(live.endsWith(line(total - 1))).toBe(true);

    // As `infir2 logs` shows it: the head, one marker, then the newest lines up to the last, none missing.
    const text = readAll();
    const ns = numbers(text);
    const marker = ns.indexOf(null);
    expect(ns.filter((n) => n === null)).toHaveLength(1);
    expect(ns[0]).toBe(0);
    expect(consecutive(ns.slice(0, marker))).toBe(true);
    expect(consecutive(ns.slice(marker + 1))).toBe(true);
    expect(ns.at(-1)).toBe(total - 1);
    // What the marker counts: from the head's end to where the previous part begins (its continuation line).
    const prevStart = Number(/log continues at byte (\d+)/.exec(readFileSync(previousFile(file), 'utf8'))![1]);
    const dropped = prevStart - sizeOf(headFile(file));
    expect(text).toContain(`] log rotated: ${formatBytes(dropped)} dropped between here and the newest part (cap logs.maxMB=1)\n`);
    // The lines missing, and a continuation line (under 200 bytes) per part that rotated out with them.
    const missing = (ns[marker + 1]! - ns[marker - 1]! - 1) * 100;
    expect(dropped).toBeGreaterThanOrEqual(missing);
    expect(dropped).toBeLessThan(missing * 1.001);
    expect(dropped).toBeGreaterThan(17 * MIB);
  });

  it('keeps the whole log in one file below the head\'s size, and everything with no cap (0)', async () => {
    const small = new StepLog(file, 1);
    await flood(small, 0, 1000);
    await closeStream(small);
    expect(existsSync(headFile(file))).toBe(false);
    expect(readAll()).toBe(readFileSync(file, 'utf8'));

    rmSync(file);
    const unbounded = new StepLog(file, 0);
    await flood(unbounded, 0, 31_500);
    await closeStream(unbounded);
    expect(sizeOf(file)).toBe(3_150_000);
    expect(existsSync(headFile(file))).toBe(false);
    expect(readAll()).toBe(readFileSync(file, 'utf8')); // all of it (`logs` used to print a log's first MiB only)
  });

  it('applies backpressure: write() says to wait past the high-water mark, and drains', async () => {
    const log = new StepLog(file, 1);
    expect(log.write(line(0).repeat(1000))).toBe(false);
    await new Promise((r) => log.once('drain', r));
    expect(log.write(line(1))).toBe(true);
    await closeStream(log);
    expect(sizeOf(file)).toBe(1001 * 100);
  });

  it('counts what earlier attempts left in the log, and goes on from their parts without a gap', async () => {
    const first = new StepLog(file, 1);
    await flood(first, 0, 1000); // 100 kB: just under the head's 104,857 bytes
    await closeStream(first);
    const second = new StepLog(file, 1);
    await flood(second, 1000, 5000); // past the head and into a part: the head holds the first attempt's start
    await closeStream(second);
    expect(readFileSync(headFile(file), 'utf8').startsWith(line(0))).toBe(true);
    expect(sizeOf(headFile(file))).toBeLessThanOrEqual(logLimits(1)!.head);
    const third = new StepLog(file, 1);
    await flood(third, 5000, 6000);
    await closeStream(third);
    const ns = numbers(readAll());
    expect(ns).toEqual(Array.from({ length: 6000 }, (_, i) => i));
  });

  it('a log already past the head\'s size when the cap first applies keeps its first tenth as the head', async () => {
    writeFileSync(file, Array.from({ length: 30_000 }, (_, i) => line(i)).join('')); // 3 MB, written with no cap
    const log = new StepLog(file, 1);
    await flood(log, 30_000, 30_010);
    await closeStream(log);
    expect(sizeOf(headFile(file))).toBe(logLimits(1)!.head);
    expect(onDisk()).toBeLessThan(MIB);
    const text = readAll();
    expect(text).toMatch(/\n\[infir2 \S+\] log rotated: 3 MB dropped between here and the newest part \(cap logs\.maxMB=1\)\nline 000030000 /);
    expect(text.endsWith(line(30_009))).toBe(true);
  });

  it('follows the log across rotations: nothing lost or repeated, and a marker when parts rotated out unread', async () => {
    const log = new StepLog(file, 1);
    const out: Buffer[] = [];
    const reader = new StepLogReader(file, (b) => out.push(b));
    reader.pump(); // no log yet
    let next = 0;
    const third = Math.floor(logLimits(1)!.part / 300); // lines in a third of a part
    // Less than a part between reads: every line arrives once, in order, and no continuation line shows.
    for (let round = 0; round < 12; round++) {
      await flood(log, next, next + third);
      next += third;
      await new Promise((r) => log.write('', r));
      reader.pump();
    }
    expect(existsSync(previousFile(file))).toBe(true);
    expect(numbers(Buffer.concat(out).toString('utf8'))).toEqual(Array.from({ length: next }, (_, i) => i));
    // Three parts between two reads: the two after the one being read rotated out unread; the marker says so.
    const before = next;
    await flood(log, next, next + 9 * third);
    next += 9 * third;
    await closeStream(log);
    reader.pump();
    reader.close();
    const text = Buffer.concat(out).toString('utf8');
    const ns = numbers(text);
    const marker = ns.indexOf(null);
    expect(ns.filter((n) => n === null)).toHaveLength(1);
    expect(ns.slice(0, marker)).toEqual(Array.from({ length: marker }, (_, i) => i));
    expect(ns[marker - 1]).toBeGreaterThanOrEqual(before - 1);
    expect(consecutive(ns.slice(marker + 1))).toBe(true);
    expect(ns.at(-1)).toBe(next - 1);
    const missing = (ns[marker + 1]! - ns[marker - 1]! - 1) * 100;
    expect(missing).toBeGreaterThan(0);
    expect(text).toMatch(new RegExp(`\\] log rotated: ${formatBytes(missing).replace(/\d+/, '\\d+')} dropped between here and the newest part`));
  });

  it('a write the disk refuses is the stream\'s error, then it closes: nothing thrown, nothing waits on it', async (ctx) => {
    const mnt = join(dir, 'full');
    if (!mountTmpfs(mnt, '64k')) return ctx.skip(NO_MOUNT);
    try {
      fill(mnt);
      const log = new StepLog(join(mnt, 'cpt.stable.log'), 1);
      const errors: NodeJS.ErrnoException[] = [];
      log.on('error', (e) => errors.push(e));
      const closed = new Promise((r) => log.once('close', r));
      log.write(line(0));
      await closed;
      expect(log.destroyed).toBe(true);
      expect(errors.map((e) => e.code)).toEqual(['ENOSPC']);
    } finally {
      umount(mnt);
    }
  });

  it('a rotation that fails (the previous part\'s name taken by a directory) is the stream\'s error', async () => {
    mkdirSync(previousFile(file)); // the head is made first, then the first part meets the directory
    const log = new StepLog(file, 1);
    const errors: NodeJS.ErrnoException[] = [];
    log.on('error', (e) => errors.push(e));
    const closed = new Promise((r) => log.once('close', r));
    void flood(log, 1, (2 * MIB) / 100).catch(() => undefined);
    await closed;
    expect(errors).toHaveLength(1);
    expect(errors[0]!.code).toBe('EISDIR');
  });
});

describe('the attempt\'s log', () => {
  it('takes its cap from the plan step, the default for plans recorded before it', async () => {
    const step = fakeStep({ id: 'capped', runDir: dir });
    const caps = (await new MockActivityEnvironment().run(async () => {
      const old = openAttempt({ recipe: 'r', runId: 'r1', runDir: dir, step, attempt: 1 });
      const set = openAttempt({ recipe: 'r', runId: 'r1', runDir: dir, step: { ...step, logMaxMB: 7 }, attempt: 2 });
      await Promise.all([closeStream(old.log), closeStream(set.log)]);
      return [old.log.maxMB, set.log.maxMB];
    })) as number[];
    expect(caps).toEqual([1024, 7]);
  });

  it('a full disk under the log fails the attempt as storage, naming the log', async (ctx) => {
    const step = fakeStep({ id: 'full', runDir: dir });
    if (!mountTmpfs(join(dir, 'logs'), '64k')) return ctx.skip(NO_MOUNT);
    try {
      fill(join(dir, 'logs'));
      const seen = (await new MockActivityEnvironment().run(async () => {
        const a = openAttempt({ recipe: 'r', runId: 'r1', runDir: dir, step, attempt: 1 });
        a.note('a line the disk refuses');
        await a.flushLog();
        return { code: (a.logError as NodeJS.ErrnoException | null)?.code, verdict: await refineVerdict(a, { cls: 'crash', reason: 'exit code 1' }, []), message: failure(a, 'crash', 'x').message };
      })) as { code?: string; verdict: { cls: string; reason: string }; message: string };
      expect(seen.code).toBe('ENOSPC');
      expect(seen.verdict.cls).toBe('storage');
      expect(seen.verdict.reason).toContain(logFile(dir, 'full'));
      expect(seen.message).toContain(`the step's log could not be written (${logFile(dir, 'full')}: `);
    } finally {
      umount(join(dir, 'logs'));
    }
  });
});

describe('a link planted at the log\'s name (the run directory is shared storage)', () => {
  it('is refused, not followed: the file it points at is untouched and the attempt names the log', async () => {
    const step = fakeStep({ id: 'planted', runDir: dir });
    const victim = join(dir, 'victim.txt');
    writeFileSync(victim, 'precious\n');
    mkdirSync(join(dir, 'logs'), { recursive: true });
    symlinkSync(victim, logFile(dir, 'planted'));
    const seen = (await new MockActivityEnvironment().run(async () => {
      const a = openAttempt({ recipe: 'r', runId: 'r1', runDir: dir, step, attempt: 1 });
      a.note('trainer output that must not reach the victim');
      await a.flushLog();
      return { code: (a.logError as NodeJS.ErrnoException | null)?.code, message: failure(a, 'crash', 'x').message };
    })) as { code?: string; message: string };
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
    expect(seen.code).toBe('EUNSAFE');
    expect(seen.message).toContain(`${logFile(dir, 'planted')} is a symbolic link: refused`);
  });
});

describe('a FIFO planted at a log part\'s name', () => {
  it('reads as no log, at once, instead of blocking `logs` and the report', () => {
    execFileSync('mkfifo', [file]);
    // In a child with a deadline: an open that blocks would block this test's thread for good, not fail it.
    const code = `import { readStepSeries } from './src/report/run-data.ts'; const s = readStepSeries(${JSON.stringify(file)}); console.log(JSON.stringify(s && { attempts: s.attempts.length, iterations: s.loss.length }));`;
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { cwd: ROOT, timeout: 20_000, encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual({ attempts: 0, iterations: 0 });
  });
});
