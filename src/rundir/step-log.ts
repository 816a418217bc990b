/**
 * A step's log on disk, as the worker rotates it (src/activities/step-log.ts writes it) and `infir2 logs` reads
 * it. Once past a tenth of its cap the log is two files, and three after its first rotation:
 *   <step>.log.head   the first tenth of the cap (the launch command, the first iterations), written once
 *   <step>.log.1      the part before the live one (replaced at each rotation: what it held is the dropped middle)
 *   <step>.log        the live part, appended to; it begins with a continuation line saying at which byte of the
 *                     step's whole log it starts
 * Files are only appended to, renamed and deleted, never rewritten: the disk holds about the cap at most.
 * The continuation lines make each file self-describing, so a reader computes what was dropped between the head
 * and the newest part without any other record.
 */
import { closeSync, constants, existsSync, fstatSync, openSync, readSync, statSync } from 'node:fs';
import { basename } from 'node:path';
import { formatBytes } from './storage.js';

/** The head's share of the cap; the rest is split between the previous and the live part. */
const HEAD_SHARE = 0.1;
export const MIB = 2 ** 20;

export const headFile = (log: string) => `${log}.head`;
export const previousFile = (log: string) => `${log}.1`;

/** Bytes each file may hold under a cap of `maxMB` MiB; null: no cap. */
export function logLimits(maxMB: number): { head: number; part: number } | null {
  if (maxMB <= 0) return null;
  const head = Math.floor(maxMB * MIB * HEAD_SHARE);
  return { head, part: Math.floor((maxMB * MIB - head) / 2) };
}

/** The first line of a part that follows the head or another part. */
export function continuationLine(log: string, at: number, maxMB: number, after: 'head' | 'previous', time = new Date()): string {
  const name = basename(log);
  const where =
    after === 'head'
      ? `after ${name}.head, its beginning`
      : `after ${name}.1; ${name}.head holds its beginning, and what lay between them was dropped`;
  return `[infir2 ${time.toISOString()}] log continues at byte ${at} ${where} (logs.maxMB=${maxMB})\n`;
}

const CONTINUATION_RE = /^\[infir2 (\S+)\] log continues at byte (\d+) .*\(logs\.maxMB=(\d+)\)\r?$/;

export interface Continuation {
  /** When the part began (ISO). */
  time: string;
  /** Its first byte's place in the step's whole log (continuation lines included). */
  at: number;
  maxMB: number;
  /** Bytes of the line itself, newline included. */
  length: number;
}

/** The continuation line at the start of an open file, if it begins with one. */
export function readContinuation(fd: number): Continuation | null {
  const buf = Buffer.alloc(4096);
  const n = readSync(fd, buf, 0, buf.length, 0);
  const end = buf.subarray(0, n).indexOf(0x0a);
  if (end < 0) return null;
  const m = CONTINUATION_RE.exec(buf.subarray(0, end).toString('utf8'));
  return m ? { time: m[1]!, at: Number(m[2]), maxMB: Number(m[3]), length: end + 1 } : null;
}

/**
 * A part of the log opened for reading, or null when there is none. Opened without blocking and taken only when it
 * is a regular file: a FIFO planted at a log's name (the run directory is shared storage) would have blocked
 * `logs` and the worker writing the end-of-run report for good; it reads as absent.
 */
function openOrNull(file: string): number | null {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  if (fstatSync(fd).isFile()) return fd;
  closeSync(fd);
  return null;
}

const CHUNK = 1 << 20;

/**
 * Reads a step's log in order, once or following it: the head, one marker line where the middle was dropped,
 * the previous part and the live part without their continuation lines, then whatever is appended. A rotation
 * while following is noticed by the live file's identity (its inode) changing: the rest of the old file is read
 * through the descriptor still open on it, then the new file from its start.
 */
export class StepLogReader {
  private fd: number | null = null;
  private ino = 0;
  private offset = 0;
  /** Where in the step's whole log the reader is: what the next part must start at to follow on without a gap. */
  private at = 0;
  private started = false;
  private lastByte = 0x0a;

  constructor(
    readonly file: string,
    private readonly out: (chunk: Buffer) => void,
  ) {}

  /** Has the step written a log yet? */
  exists(): boolean {
    return existsSync(this.file) || existsSync(headFile(this.file));
  }

  /** Print what is new since the last call (everything, on the first). */
  pump(): void {
    if (!this.started) return this.begin();
    // What was written before a rotation renamed the file is read through the descriptor still open on it.
    if (this.fd !== null) this.copy(this.fd);
    let st;
    try {
      st = statSync(this.file);
    } catch {
      return; // between a rotation's rename and the new file
    }
    if (this.fd !== null && st.ino === this.ino) {
      if (st.size < this.offset) {
        this.offset = 0; // truncated by hand: read it again from its start
        this.copy(this.fd);
      }
      return;
    }
    // A new live file: wait for its continuation line before taking it, so that it is not printed as output.
    if (st.size === 0) return;
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
    const fd = openOrNull(this.file);
    if (fd !== null) this.live(fd);
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }

  private begin(): void {
    // The live file first: a rotation while the others are read then shows as `.1` being this very file.
    let live = openOrNull(this.file);
    const head = openOrNull(headFile(this.file));
    if (live === null && head === null) return;
    if (live !== null && head !== null && fstatSync(live).ino === fstatSync(head).ino) {
      // It became the head in between: the next pump takes the new live file.
      closeSync(live);
      live = null;
    }
    this.started = true;
    if (head !== null) {
      this.copy(head);
      closeSync(head);
    }
    const prev = openOrNull(previousFile(this.file));
    if (prev !== null) {
      if (live === null || fstatSync(prev).ino !== fstatSync(live).ino) this.part(prev);
      closeSync(prev);
    }
    if (live !== null) this.live(live);
  }

  /** Take `fd` as the live file and print it from after its continuation line. */
  private live(fd: number): void {
    this.fd = fd;
    this.ino = fstatSync(fd).ino;
    this.part(fd);
  }

  /** Print a part from its start: a marker first when it does not follow on from what was printed. */
  private part(fd: number): void {
    const c = readContinuation(fd);
    this.offset = c?.length ?? 0;
    const start = c ? c.at : this.at;
    if (c && start > this.at) {
      if (this.lastByte !== 0x0a) this.emit(Buffer.from('\n'));
      this.emit(Buffer.from(`[infir2 ${c.time}] log rotated: ${formatBytes(start - this.at)} dropped between here and the newest part (cap logs.maxMB=${c.maxMB})\n`));
    }
    this.at = start + (c?.length ?? 0);
    this.copy(fd);
  }

  /** Print `fd` from `offset` to its end. */
  private copy(fd: number): void {
    const buf = Buffer.alloc(CHUNK);
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, this.offset);
      if (n <= 0) return;
      this.offset += n;
      this.at += n;
      this.emit(buf.subarray(0, n));
    }
  }

  private emit(chunk: Buffer): void {
    if (!chunk.length) return;
    this.lastByte = chunk[chunk.length - 1]!;
    this.out(Buffer.from(chunk));
  }
}
