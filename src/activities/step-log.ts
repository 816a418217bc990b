/**
 * A step's log, rotated by size (the layout is src/rundir/step-log.ts's): a trainer printing 5,000 lines a second
 * grows it by 100 MB a minute, for days. Up to the head's share of the cap it is one file; then that file becomes
 * `<step>.log.head` for good, and the live `<step>.log` is renamed to `<step>.log.1` (replacing the one before:
 * the dropped middle) each time it reaches its part of the cap. Files are appended to and renamed, never
 * rewritten. Parts are cut at line ends, so no line is split between files (a line may pass a part's size:
 * line-splitter.ts keeps a line under 1 MiB of characters).
 *
 * A `Writable`, as the `fs.WriteStream` before it: `write()` reports backpressure, 'drain', 'close' and
 * `destroyed` behave alike, and a failed write or rotation (a full disk) is the stream's 'error'.
 */
import { closeSync, constants, openSync } from 'node:fs';
import { rename, stat, truncate, type FileHandle } from 'node:fs/promises';
import { Writable } from 'node:stream';
import { continuationLine, headFile, logLimits, previousFile, readContinuation } from '../rundir/step-log.js';
import { openAppendSafe } from '../util/safe-fs.js';

const NEWLINE = 0x0a;

async function sizeOrNull(file: string): Promise<number | null> {
  try {
    return (await stat(file)).size;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** Where the part in `file` ends in the step's whole log, from its continuation line; null if it has none. */
function partEnd(file: string, size: number): number | null {
  const fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK); // a FIFO there must not block the worker
  try {
    const c = readContinuation(fd);
    return c ? c.at + size : null;
  } finally {
    closeSync(fd);
  }
}

export class StepLog extends Writable {
  private fh: FileHandle | null = null;
  private readonly limits: { head: number; part: number } | null;
  /** Bytes in the live file. */
  private size = 0;
  /** The live file's first byte's place in the step's whole log. */
  private start = 0;
  /** Bytes of the live file's continuation line (0 before the first rotation). */
  private lineBytes = 0;
  private hasHead = false;
  /**
   * The live file was past the head's size when opened, with no head yet (written with no cap, or a larger
   * one): the head it becomes is cut to size.
   */
  private oversized = false;
  /** The live file ends with a newline (or is empty): the next byte starts a line. */
  private atLineStart = true;
  /** The write or rotation under way; `_destroy` waits for it before closing the file. */
  private busy: Promise<unknown> = Promise.resolve();

  /** `maxMB`: the cap (`logs.maxMB`); 0: none. */
  constructor(
    readonly file: string,
    readonly maxMB: number,
  ) {
    super();
    this.limits = logLimits(maxMB);
  }

  /**
   * Open the live file for appending, as it is: earlier attempts of the step wrote to it, and what they left
   * counts toward the cap.
   */
  override _construct(callback: (error?: Error | null) => void): void {
    this.run(async () => {
      // Read as well: a part's continuation line says where it starts. The run directory is shared storage: a link
      // planted at the log's name (to make a root worker append trainer output to /etc/…) is refused, not followed.
      this.fh = await openAppendSafe(this.file, true);
      this.size = (await this.fh.stat()).size;
      const head = await sizeOrNull(headFile(this.file));
      this.hasHead = head !== null;
      if (this.size > 0) {
        const c = readContinuation(this.fh.fd);
        this.lineBytes = c?.length ?? 0;
        this.start = c?.at ?? head ?? 0;
        this.oversized = head === null && this.limits !== null && this.size > this.limits.head;
        const last = Buffer.alloc(1);
        await this.fh.read(last, 0, 1, this.size - 1);
        this.atLineStart = last[0] === NEWLINE;
      } else if (head !== null) {
        // The head is there but no live part (a worker died in a rotation): begin one where the last part ended.
        const prev = await sizeOrNull(previousFile(this.file));
        const at = (prev !== null ? partEnd(previousFile(this.file), prev) : null) ?? head;
        await this.begin(at, prev !== null ? 'previous' : 'head');
      }
    }, callback);
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.run(() => this.append(chunk), callback);
  }

  override _writev(chunks: { chunk: Buffer }[], callback: (error?: Error | null) => void): void {
    // Lines queued while the disk was busy go out in one write.
    this.run(() => this.append(Buffer.concat(chunks.map((c) => c.chunk))), callback);
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.run(() => this.closeFile(), callback);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    void this.busy
      .catch(() => undefined)
      .then(() => this.closeFile())
      .then(
        () => callback(error),
        (closeErr: Error) => callback(error ?? closeErr),
      );
  }

  private run(work: () => Promise<void>, callback: (error?: Error | null) => void): void {
    const p = work();
    this.busy = p;
    p.then(
      () => callback(),
      (err: Error) => callback(err),
    );
  }

  private async closeFile(): Promise<void> {
    const fh = this.fh;
    this.fh = null;
    await fh?.close();
  }

  private async append(buf: Buffer): Promise<void> {
    while (buf.length) {
      const limit = this.limits && (this.hasHead ? this.limits.part : this.limits.head);
      if (!limit || this.size + buf.length <= limit) return this.put(buf);
      // The last line end that fits; failing that, the buffer begins a line (rotate first) or ends the current
      // line past the limit (cut there). A line that has not ended yet stays whole in this file.
      let cut = this.size < limit ? buf.lastIndexOf(NEWLINE, limit - this.size - 1) : -1;
      if (cut < 0 && this.atLineStart && this.size > this.lineBytes) {
        await this.rotate();
        continue;
      }
      if (cut < 0) cut = buf.indexOf(NEWLINE);
      if (cut < 0) return this.put(buf);
      await this.put(buf.subarray(0, cut + 1));
      await this.rotate();
      buf = buf.subarray(cut + 1);
    }
  }

  private async put(buf: Buffer): Promise<void> {
    for (let done = 0; done < buf.length; ) {
      const { bytesWritten } = await this.fh!.write(buf, done, buf.length - done);
      done += bytesWritten;
    }
    this.size += buf.length;
    if (buf.length) this.atLineStart = buf[buf.length - 1] === NEWLINE;
  }

  /** The live file becomes the head (the first time) or the previous part, and a new live file begins. */
  private async rotate(): Promise<void> {
    const at = this.start + this.size;
    await this.closeFile();
    if (this.hasHead) {
      await rename(this.file, previousFile(this.file));
    } else {
      await rename(this.file, headFile(this.file));
      // A log that was already past the head's size when the cap first applied: its first tenth stays; the rest
      // counts as dropped, the continuation line says from where. (Cut in place: a truncation writes nothing.)
      if (this.oversized) await truncate(headFile(this.file), this.limits!.head);
    }
    const after = this.hasHead ? 'previous' : 'head';
    this.hasHead = true;
    this.fh = await openAppendSafe(this.file);
    this.size = 0;
    await this.begin(at, after);
  }

  private async begin(at: number, after: 'head' | 'previous'): Promise<void> {
    const line = Buffer.from(continuationLine(this.file, at, this.maxMB, after));
    this.start = at;
    await this.put(line);
    this.lineBytes = line.length;
  }
}
