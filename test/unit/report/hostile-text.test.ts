/**
 * Terminal control sequences in a trainer's output or a recipe (issue 30, case 9: `ESC ]0;…` retitles a terminal,
 * `ESC [2J` clears it) reach neither the terminal through `report`/`compare` nor the page raw: they are written
 * out (`\x1b]0;…`). A failure's reason, a log-rotation note, a step id and a recipe's value carry them here.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compilePlan } from '../../../src/plan/compile.js';
import { loadRecipe } from '../../../src/recipe/load.js';
import { visible, visibleJson } from '../../../src/util/visible.js';
import { runInProcess } from '../cli/run-cli.js';

const TITLE = '\u001b]0;pwned\u0007';
const CLEAR = '\u001b[2J\u001b[H';
const BIDI = '\u202e';
// Any control character but newline and tab, and the direction overrides: none may come out raw.
const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

let dir: string;
async function runDir(name: string, env: Record<string, string>): Promise<string> {
  const { recipe } = await loadRecipe('tiny', { sets: [`runDir=${dir}`, ...Object.entries(env).map(([k, v]) => `cpt.env.${k}=${v}`)] });
  const plan = compilePlan(recipe, { runId: name, projectRoot: process.cwd() });
  plan.steps = plan.steps.filter((s) => s.id === 'cpt.stable');
  mkdirSync(join(plan.runDir, 'logs'), { recursive: true });
  writeFileSync(join(plan.runDir, 'plan.json'), JSON.stringify(plan));
  writeFileSync(join(plan.runDir, 'recipe.json'), JSON.stringify(recipe));
  const it = (i: number) => ` [2026-01-01 00:00:00] iteration ${String(i).padStart(8)}/     480 | elapsed time per iteration (ms): 50.0 | learning rate: 1.000000E-03 | lm loss: ${(3 - i / 100).toExponential(6)} | loss scale: 1.0 |`;
  writeFileSync(
    join(plan.runDir, 'logs', 'cpt.stable.log'),
    [
      '[infir2 2026-01-01T00:00:00.000Z] attempt 1 starting fresh: python main.py pretrain',
      it(11), it(12),
      // What a trainer can print: a line that looks like the supervisor's, carrying escapes.
      `[infir2 2026-01-01T00:00:05.000Z] attempt 1 failed: crash: ${TITLE}${CLEAR}RuntimeError${BIDI}`,
      `[infir2 2026-01-01T00:00:06.000Z] log rotated: ${CLEAR}12 MB dropped${TITLE}`,
      '[infir2 2026-01-01T00:00:10.000Z] attempt 2 resuming from iteration 12: python main.py pretrain',
      it(13), it(14),
      '',
    ].join('\n'),
  );
  return plan.runDir;
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'infir2-hostile-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('control sequences from logs and recipes', () => {
  it('visible() writes out every control character and direction override, and nothing else', () => {
    expect(visible(`a${TITLE}b${CLEAR}c\r\nd\te${BIDI}f\u009bg é ✓`)).toBe('a\\x1b]0;pwned\\x07b\\x1b[2J\\x1b[Hc\\x0d\\x0ad\te\\u202ef\\x9bg é ✓');
    expect(JSON.parse(visibleJson({ a: `x${BIDI}\u009b\u001b` }))).toEqual({ a: `x${BIDI}\u009b\u001b` });
    expect(visibleJson({ a: `x${BIDI}\u009b\u001b` })).not.toMatch(RAW);
  });

  it('`report` prints its notes escaped and writes none of them raw into the page', async () => {
    const run = await runDir('hostile', {});
    const r = await runInProcess(['report', run, '--no-png']);
    expect(r.code).toBe(0);
    expect(r.stdout).not.toMatch(RAW);
    expect(r.stdout).toContain('note: cpt.stable: its log was rotated (\\x1b[2J\\x1b[H12 MB dropped\\x1b]0;pwned\\x07)');
    const html = readFileSync(join(run, 'report', 'index.html'), 'utf8');
    expect(html).not.toMatch(RAW);
    expect(html).toContain('\\x1b]0;pwned\\x07\\x1b[2J\\x1b[HRuntimeError\\u202e'); // the failure's reason, visible
  });

  it('`compare` prints warnings quoting a recipe value escaped, in text and JSON, and a clean page', async () => {
    const a = await runDir('ra', { NCCL_DEBUG: 'INFO' });
    const b = await runDir('rb', { NCCL_DEBUG: `${TITLE}WARN` });
    const out = join(dir, 'cmp');
    const r = await runInProcess(['compare', a, b, '--out', out]);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/^warning: rb differs from ra in cpt\.env\.NCCL_DEBUG .*\\x1b\]0;pwned\\x07WARN/m);
    expect(r.stderr + r.stdout).not.toMatch(RAW);
    expect(readFileSync(join(out, 'index.html'), 'utf8')).not.toMatch(RAW);
    const j = await runInProcess(['compare', a, b, '--json']);
    expect(j.stdout + j.stderr).not.toMatch(RAW);
    expect((JSON.parse(j.stdout) as { warnings: string[] }).warnings[0]).toContain(`${TITLE}WARN`); // the value itself, in JSON
  });
});
