import { describe, expect, it } from 'vitest';
import { LineSplitter } from '../../../src/engine-logs/line-splitter.js';

function split(chunks: (string | Buffer)[], maxLine = 100) {
  const lines: string[] = [];
  const s = new LineSplitter((l) => lines.push(l), maxLine);
  let log = chunks.map((c) => s.push(c)).join('');
  log += s.end();
  return { lines, log };
}

describe('LineSplitter', () => {
  it('splits on \\n, \\r\\n and \\r, across chunk boundaries, and keeps the log as it came', () => {
    const { lines, log } = split(['it 1\nit', ' 2\r\nbar 10%\rbar 20%\r', '\nlast']);
    expect(lines).toEqual(['it 1', 'it 2', 'bar 10%', 'bar 20%', '', 'last']);
    expect(log).toBe('it 1\nit 2\r\nbar 10%\rbar 20%\r\nlast');
  });

  it('decodes a multi-byte character split between chunks', () => {
    const bytes = Buffer.from('loss 1.0 → 0.9\n');
    const cut = bytes.indexOf(0xe2) + 1;
    expect(split([bytes.subarray(0, cut), bytes.subarray(cut)]).lines).toEqual(['loss 1.0 → 0.9']);
  });

  it('cuts a line past the cap: the parser sees its head, the log the head and a marker, the rest is dropped', () => {
    const { lines, log } = split(['x'.repeat(60), 'y'.repeat(60), 'z'.repeat(500), '\nnext\n'], 100);
    expect(lines).toEqual(['x'.repeat(60) + 'y'.repeat(40), 'next']);
    expect(log).toBe(`${'x'.repeat(60)}${'y'.repeat(40)} [infir2: line cut at 100 characters; the rest is not kept] [infir2: 520 characters dropped]\nnext\n`);
  });

  // Linear, not timed here (bench/supervisor-output.ts measures it): the old re-join would run for minutes.
  it('keeps 1 MB of a 64 MB line without a newline fed in 64 kB chunks', () => {
    const lines: string[] = [];
    const s = new LineSplitter((l) => lines.push(l));
    const chunk = 'a'.repeat(64 * 1024);
    let logged = 0;
    for (let i = 0; i < 1024; i++) logged += s.push(chunk).length;
    s.push('\nafter\n');
    expect(lines.map((l) => l.length)).toEqual([1 << 20, 5]);
    expect(logged).toBeLessThan((1 << 20) + 200);
  });
});
