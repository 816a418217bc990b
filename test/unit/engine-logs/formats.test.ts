/**
 * Every format the engines print (test/fixtures/engine-logs.ts: a line from a real run or the source's format
 * string, with its source at the pinned version) read by the supervisor's parser and by the report's as the
 * fixture says; and docs/report.md's table of formats naming exactly these.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseMetricsLine } from '../../../src/engine-logs/metrics.js';
import { parserFor } from '../../../src/engine-logs/progress-parsers.js';
import { FORMATS } from '../../fixtures/engine-logs.js';

/** Numbers compared to 12 digits (1000 / 57.1 is computed, not printed). */
function close(actual: unknown, expected: unknown): void {
  if (typeof expected === 'number') return void expect(actual).toBeCloseTo(expected, 12);
  if (expected && typeof expected === 'object') {
    expect(actual).toBeTypeOf('object');
    expect(Object.keys(actual as object).sort()).toEqual(Object.keys(expected).sort());
    for (const [k, v] of Object.entries(expected)) close((actual as Record<string, unknown>)[k], v);
    return;
  }
  expect(actual).toEqual(expected);
}

describe('the formats the engines print', () => {
  it.each(FORMATS.map((f) => [f.id, f] as const))('%s: the supervisor reads what the fixture says', (_id, f) => {
    close(parserFor(f.format)(f.line), f.progress);
  });

  it.each(FORMATS.map((f) => [f.id, f] as const))('%s: the report reads what the fixture says', (_id, f) => {
    close(parseMetricsLine(f.line), f.metrics);
  });

  it('ids are unique, and every line is read by no other format as progress', () => {
    expect(new Set(FORMATS.map((f) => f.id)).size).toBe(FORMATS.length);
    // A Megatron line never moves a slime or evalscope step, nor the reverse (checkpoint lines aside: slime's
    // actors print Megatron's).
    for (const f of FORMATS) {
      for (const other of ['megatron', 'slime', 'evalscope'] as const) {
        if (other === f.format) continue;
        const ev = parserFor(other)(f.line);
        if (ev && (ev.checkpointSaved !== undefined || ev.savingCheckpoint || ev.loadingCheckpoint)) continue;
        expect(ev, `${f.id} read as ${other}`).toBeNull();
      }
    }
  });

  it("docs/report.md's table of formats lists every fixture, and no other", () => {
    const doc = readFileSync(join(import.meta.dirname, '../../../docs/report.md'), 'utf8');
    const table = doc.slice(doc.indexOf('## The lines read'));
    const listed = [...table.matchAll(/^\| [^|]+ \| [^|]+ \| `([a-z0-9.-]+)` \|/gm)].map((m) => m[1]);
    expect(listed.sort()).toEqual(FORMATS.map((f) => f.id).sort());
  });
});
