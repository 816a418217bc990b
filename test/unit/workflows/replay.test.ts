/**
 * Histories recorded by earlier workflow code (test/fixtures/histories, by record.ts there: `fake-*` at a86ed8a,
 * before bounded history; `fake-bounded-*` with it) replay with the current code without nondeterminism: runs
 * started before an upgrade go on after it (patched() keeps every changed decision as it was for them).
 */
import proto from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { workflowCode } from './inproc.js';

const DIR = join(import.meta.dirname, '..', '..', 'fixtures', 'histories');
const files = readdirSync(DIR).filter((f) => f.endsWith('.history.bin'));

describe('histories recorded by earlier code', () => {
  it('are there to replay', () => {
    expect(files.length).toBeGreaterThanOrEqual(40);
  });

  it('replay with the current workflow code', async () => {
    const histories = files.map((f) => ({ workflowId: f.replace(/\.history\.bin$/, '').replaceAll('~', '/'), history: proto.temporal.api.history.v1.History.decode(readFileSync(join(DIR, f))) }));
    const failures: string[] = [];
    for await (const r of Worker.runReplayHistories({ workflowBundle: await workflowCode() }, histories)) {
      if (r.error) failures.push(`${r.workflowId}: ${r.error.message}`);
    }
    expect(failures).toEqual([]);
  }, 120_000);
});
