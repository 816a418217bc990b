/**
 * The order vitest hands test files to its workers (vitest.config.ts): the integration and e2e files first, the
 * longest first — each waits minutes on trainers, heartbeats and servers, so started late one alone would hold
 * the suite's end — then the unit files, which fill the workers' last minutes. Longest: as long as the file took
 * last time on this machine (vitest's cache), else the largest file (a fresh clone has no cache).
 */
import { statSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const slow = (f: TestSpecification) => /[\\/]test[\\/](integration|e2e)[\\/]/.test(f.moduleId);

export class SlowFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const weight = new Map<TestSpecification, number>();
    for (const f of files) {
      const key = `${f.project.name}:${relative(this.ctx.config.root, f.moduleId)}`;
      const last = this.ctx.cache.getFileTestResults(key)?.duration;
      // A duration in ms outweighs any size in bytes of a test file: known durations first, then sizes.
      weight.set(f, last !== undefined ? 1e9 + last : statSync(f.moduleId).size);
    }
    const order = (a: TestSpecification, b: TestSpecification) => weight.get(b)! - weight.get(a)!;
    return [...files.filter(slow).sort(order), ...files.filter((f) => !slow(f)).sort(order)];
  }
}
