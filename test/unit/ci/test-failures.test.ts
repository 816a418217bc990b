/**
 * scripts/test-failures.mjs: what `make test` prints last when it fails (CI keeps only the tail). From vitest's JSON
 * report and log, and pytest's log: each failed test with its error's first lines, a file that failed outside its
 * tests, an error outside any test, and a missing report.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SCRIPT = resolve(import.meta.dirname, '..', '..', '..', 'scripts', 'test-failures.mjs');
const run = (cwd: string, ...args: string[]) => execFileSync(process.execPath, [SCRIPT, ...args], { cwd, encoding: 'utf8' });

describe('test-failures', () => {
  it('names each failure, with its first error lines, and says when a report is missing', () => {
    const dir = mkdtempSync(join(tmpdir(), 'infir2-failures-'));
    const report = {
      success: false,
      testResults: [
        { name: join(dir, 'test/a.test.ts'), status: 'failed', message: '', assertionResults: [{ fullName: 'a fails', status: 'failed', failureMessages: ['AssertionError: expected 1 to be 2\n    at a.test.ts:3:5'] }, { fullName: 'a passes', status: 'passed', failureMessages: [] }] },
        { name: join(dir, 'test/b.test.ts'), status: 'failed', message: '', assertionResults: [{ fullName: 'b skipped', status: 'skipped', failureMessages: [] }] },
        { name: join(dir, 'test/c.test.ts'), status: 'passed', message: '', assertionResults: [{ fullName: 'c', status: 'passed', failureMessages: [] }] },
      ],
    };
    writeFileSync(join(dir, 'vitest.json'), JSON.stringify(report));
    writeFileSync(join(dir, 'vitest.log'), ' FAIL  test/b.test.ts > b\nError: hook broke\n ❯ test/b.test.ts:2:47\n\n⎯⎯ Unhandled Errors ⎯⎯\nError: late boom\n');
    writeFileSync(join(dir, 'pytest.log'), '..F\nFAILED trainer/tests/test_x.py::test_y - assert 1 == 2\n1 failed, 2 passed\n');
    const out = run(dir, `pytest=${join(dir, 'pytest.log')}`, `vitest=${join(dir, 'vitest.json')}`, `cluster=${join(dir, 'none.json')}`);
    expect(out).toContain('[test] what failed (5):');
    expect(out).toContain('pytest: FAILED trainer/tests/test_x.py::test_y - assert 1 == 2');
    expect(out).toMatch(/vitest: test\/a\.test\.ts > a fails\n\s+AssertionError: expected 1 to be 2/);
    expect(out).not.toContain('a passes');
    expect(out).toMatch(/vitest: test\/b\.test\.ts \(the file, not a test: a hook, an import\)\n\s+Error: hook broke/);
    expect(out).not.toContain('c.test.ts');
    expect(out).toMatch(/vitest: an error outside any test\n[\s\S]*Error: late boom/);
    expect(out).toMatch(/cluster: no report .*none\.json/);
  });

  it('prints nothing when nothing failed', () => {
    const dir = mkdtempSync(join(tmpdir(), 'infir2-failures-'));
    writeFileSync(join(dir, 'vitest.json'), JSON.stringify({ success: true, testResults: [] }));
    expect(run(dir, `vitest=${join(dir, 'vitest.json')}`)).toBe('');
  });
});
