/**
 * Where `report --out` and `compare --out` may write (util/dir-probe.ts pageDirProblem): never into a directory
 * that holds someone's files (`report --out /etc` wrote /etc/index.html and /etc/charts/), never through a
 * symbolic link; into a fresh or empty directory, or over a page of ours (the marker it writes, or a page written
 * before the marker existed). The end-of-run report keeps to the same rule in the run directory.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compilePlan } from '../../../src/plan/compile.js';
import { loadRecipe } from '../../../src/recipe/load.js';
import { writeReport } from '../../../src/report/write-report.js';
import { PAGE_MARKER } from '../../../src/util/dir-probe.js';
import { ROOT } from '../../integration/harness.js';
import { runInProcess } from './run-cli.js';

let dir: string;
let runDir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'infir2-outdir-'));
  const { recipe } = await loadRecipe('tiny', { sets: [`runDir=${dir}`] });
  const plan = compilePlan(recipe, { runId: 'r1', projectRoot: process.cwd() });
  runDir = plan.runDir;
  mkdirSync(runDir, { recursive: true });
  writeFileSync(join(runDir, 'plan.json'), JSON.stringify(plan));
  writeFileSync(join(runDir, 'recipe.json'), JSON.stringify(recipe));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A directory that is someone's: a file of theirs in it. */
function theirs(name: string, files: Record<string, string> = { 'passwd': 'root:x:0:0\n' }): string {
  const d = join(dir, name);
  mkdirSync(d, { recursive: true });
  for (const [f, text] of Object.entries(files)) writeFileSync(join(d, f), text);
  return d;
}

const report = (out: string) => runInProcess(['report', runDir, '--out', out, '--no-png']);

describe('report --out and compare --out', () => {
  it('refuse a directory that holds files of someone else, one line, exit 2, nothing written', async () => {
    const etc = theirs('etc');
    const r = await report(etc);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`error: --out: ${etc} is not empty and holds no infir2 report or comparison (no ${PAGE_MARKER}): expected a directory the report can be written to\n`);
    expect(readdirSync(etc)).toEqual(['passwd']);
    const c = await runInProcess(['compare', runDir, runDir, '--out', etc]);
    expect(c.code).toBe(2);
    expect(c.stderr).toMatch(/^error: --out: .* is not empty and holds no infir2 report or comparison/);
    expect(readdirSync(etc)).toEqual(['passwd']);
  });

  it('refuse a web root whose index.html is not a page of ours', async () => {
    const www = theirs('www', { 'index.html': '<html><title>my site</title></html>' });
    expect((await report(www)).code).toBe(2);
    expect(readFileSync(join(www, 'index.html'), 'utf8')).toBe('<html><title>my site</title></html>');
  });

  it('refuse a symbolic link, leaving its target alone', async () => {
    const target = theirs('target', {});
    const link = join(dir, 'link');
    symlinkSync(target, link);
    const r = await report(link);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`error: --out: ${link} is a symbolic link (to ${target}): give the directory itself: expected a directory the report can be written to\n`);
    expect(readdirSync(target)).toEqual([]);
  });

  it('write into a fresh directory, marking it, and over it again; over a page written before the marker', async () => {
    const out = join(dir, 'fresh');
    expect((await report(out)).code).toBe(0);
    expect(readdirSync(out).sort()).toEqual([PAGE_MARKER, 'charts', 'index.html']);
    expect((await report(out)).code).toBe(0);
    const older = join(dir, 'older');
    mkdirSync(join(older, 'charts'), { recursive: true });
    writeFileSync(join(older, 'index.html'), '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>infir2 report: r0</title>');
    writeFileSync(join(older, 'charts', 'cpt-loss.png'), 'png');
    expect((await report(older)).code).toBe(0);
  });

  it('the end-of-run report refuses a link planted at <run>/report, writing nothing through it', () => {
    const elsewhere = theirs('elsewhere', {});
    const planted = mkdtempSync(join(tmpdir(), 'infir2-planted-run-'));
    try {
      writeFileSync(join(planted, 'plan.json'), readFileSync(join(runDir, 'plan.json')));
      symlinkSync(elsewhere, join(planted, 'report'));
      expect(() => writeReport(planted, { png: false })).toThrow(/report is a symbolic link/);
      expect(readdirSync(elsewhere)).toEqual([]);
    } finally {
      rmSync(planted, { recursive: true, force: true });
    }
  });

  it('a FIFO planted among the run\'s results is a result that could not be read, not a report that never ends', () => {
    const planted = mkdtempSync(join(tmpdir(), 'infir2-fifo-run-'));
    try {
      writeFileSync(join(planted, 'plan.json'), readFileSync(join(runDir, 'plan.json')));
      mkdirSync(join(planted, 'results'));
      execFileSync('mkfifo', [join(planted, 'results', 'cpt.stable.json')]);
      // In a child with a deadline: a read that blocks would block this test's thread for good, not fail it.
      const code = `import { writeReport } from './src/report/write-report.ts'; console.log(JSON.stringify(writeReport(${JSON.stringify(planted)}, { png: false }).problems));`;
      const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { cwd: ROOT, timeout: 30_000, encoding: 'utf8' });
      expect(JSON.parse(out)).toContainEqual(expect.stringMatching(/^the result of cpt\.stable \(.*\) could not be read: .* is a FIFO: refused/));
    } finally {
      rmSync(planted, { recursive: true, force: true });
    }
  }, 40_000);
});
