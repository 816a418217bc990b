/**
 * A step log past V8's longest string (~512 MiB: issue 30, case 4) is read streamed: the report of such a run
 * is written, with the iterations before and after the bulk. The bulk is a hole in a sparse file (600 MiB of
 * NUL bytes that take no disk): the old reader joined the log into one string and failed with `Cannot create a
 * string longer than 0x1fffffe8 characters`. Figures for a real 1 GiB log: bench/report-big-log.ts.
 */
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readStepSeries } from '../../../src/report/run-data.js';
import { stepSeries } from '../../../src/report/step-series.js';

const line = (i: number) =>
  ` [2026-01-01 00:00:00] iteration ${String(i).padStart(8)}/     100 | consumed samples: ${i * 16} | elapsed time per iteration (ms): 50.0 | learning rate: 1.000000E-03 | global batch size:    16 | lm loss: ${(3 - i / 100).toExponential(6)} | loss scale: 1.0 | grad norm: 0.500 | number of skipped iterations:   0 | number of nan iterations:   0 |\n`;

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'infir2-big-log-'));
  mkdirSync(join(dir, 'logs'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('a step log larger than a string can be', () => {
  it('is read a chunk at a time: the lines before and after 600 MiB of output are all in the series', () => {
    const file = join(dir, 'logs', 'cpt.stable.log');
    writeFileSync(file, `[infir2 2026-01-01T00:00:00.000Z] attempt 1 starting fresh: torchrun\n${[1, 2, 3].map(line).join('')}`);
    truncateSync(file, 600 * 2 ** 20);
    appendFileSync(file, `\n${[98, 99, 100].map(line).join('')}[infir2 2026-01-01T01:00:00.000Z] attempt 1 ended: exit code 0\n`);
    const s = readStepSeries(file)!;
    expect(s.loss.points().map((p) => p.x)).toEqual([1, 2, 3, 98, 99, 100]);
    expect(s.loss.yAt(100)).toBe(2);
    expect(s.attempts).toEqual([{ attempt: 1, start: '2026-01-01T00:00:00.000Z', end: '2026-01-01T01:00:00.000Z', resumedFrom: null }]);
  }, 120_000); // 600 MiB decoded on a loaded 2-core machine: ~10 s, well past vitest's 5 s default

  it('reads a log whose lines straddle the reader chunks exactly as the same text whole', () => {
    const file = join(dir, 'logs', 'sft.log');
    // Lines of every length around the 1 MiB chunk edge, and a CRLF split across it.
    const body = Array.from({ length: 4000 }, (_, i) => line(i + 1) + 'x'.repeat((i * 37) % 900) + '\r\n').join('');
    writeFileSync(file, body);
    expect(JSON.stringify(readStepSeries(file))).toBe(JSON.stringify(stepSeries(body)));
  });
});
