/**
 * The trainer's output as lines, in time linear in the bytes read and memory bounded by one line's cap. The
 * supervisor used to re-join and re-split the whole unfinished line on every chunk: a 300 MB line without a
 * newline (a tensor dump, a `\r` progress bar, an NCCL debug flood) took 20 minutes and 3.4 GB (issue 20).
 * A line longer than the cap is cut: the parser sees its first `maxLine` characters, the log keeps them and a
 * marker, and the rest is dropped as it arrives, never buffered.
 */
import { StringDecoder } from 'node:string_decoder';

/** Longest line kept whole, in characters: no progress line is near it, a tensor dump is far past it. */
export const MAX_LINE = 1 << 20;

const BREAK = /\r\n|\r|\n/g;

export class LineSplitter {
  private readonly decoder = new StringDecoder('utf8');
  /** Pieces of the unfinished line (joined once, when it ends). */
  private pieces: string[] = [];
  private length = 0;
  /** Characters of the current line dropped past the cap. */
  private dropped = 0;

  /**
   * `keepLog: false` for a reader of a log already written (the report): push() then returns '' instead of a
   * copy of every chunk.
   */
  constructor(
    private readonly onLine: (line: string) => void,
    private readonly maxLine = MAX_LINE,
    private readonly keepLog = true,
  ) {}

  /** Feed a chunk; returns the text for the log: the chunk, less what a cut line drops, plus the cut's marker. */
  push(chunk: Buffer | string): string {
    const text = typeof chunk === 'string' ? chunk : this.decoder.write(chunk);
    let log = '';
    let start = 0;
    BREAK.lastIndex = 0;
    for (let m = BREAK.exec(text); m; m = BREAK.exec(text)) {
      const kept = this.take(text.slice(start, m.index));
      const note = this.endLine();
      if (this.keepLog) log += kept + note + m[0];
      start = m.index + m[0].length;
    }
    const rest = this.take(text.slice(start));
    return this.keepLog ? log + rest : '';
  }

  /** The last line, if the output ended without a newline. */
  end(): string {
    const rest = this.take(this.decoder.end());
    return this.length || this.dropped ? rest + this.endLine() : rest;
  }

  /** Keep what fits under the cap; returns what the log gets of it. */
  private take(s: string): string {
    if (!s) return '';
    const room = this.maxLine - this.length;
    if (s.length <= room) {
      this.pieces.push(s);
      this.length += s.length;
      return s;
    }
    const kept = room > 0 ? s.slice(0, room) : '';
    if (kept) {
      this.pieces.push(kept);
      this.length += kept.length;
    }
    const first = this.dropped === 0;
    this.dropped += s.length - kept.length;
    return kept + (first ? ` [infir2: line cut at ${this.maxLine} characters; the rest is not kept]` : '');
  }

  /** Hand the finished line to the parser; returns the log's note of what was dropped, if anything was. */
  private endLine(): string {
    const line = this.pieces.length === 1 ? this.pieces[0]! : this.pieces.join('');
    const dropped = this.dropped;
    this.pieces = [];
    this.length = 0;
    this.dropped = 0;
    this.onLine(line);
    return dropped ? ` [infir2: ${dropped} characters dropped]` : '';
  }
}
