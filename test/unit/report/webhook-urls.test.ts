/**
 * A webhook URL written in a recipe (as runs recorded before such URLs were refused hold them) is shown by its
 * host only wherever infir2 shows a recipe: the report's parameters table, compare's warning of what differs
 * between runs' recipes. Its path and query are where receivers put their tokens.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compilePlan } from '../../../src/plan/compile.js';
import { shownChange, shownWebhookUrl } from '../../../src/plan/notify-spec.js';
import { loadRecipe } from '../../../src/recipe/load.js';
import { compareRuns } from '../../../src/report/compare.js';
import { readRunData } from '../../../src/report/run-data.js';
import { writeReport } from '../../../src/report/write-report.js';

const SLACK = 'https://hooks.slack.com/services/T000/B000/secret-token-1';
let dir: string;
const runDirs: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'infir2-hooks-'));
  for (const [i, url] of [SLACK, 'https://bot:hunter2@hooks.example.com/x?token=secret-token-2'].entries()) {
    const { recipe } = await loadRecipe('tiny', { sets: [`runDir=${dir}`] });
    const plan = compilePlan(recipe, { runId: `r${i}`, projectRoot: process.cwd() });
    mkdirSync(plan.runDir, { recursive: true });
    writeFileSync(join(plan.runDir, 'plan.json'), JSON.stringify(plan));
    // Written straight to recipe.json: today's `validate` refuses the second URL; an older run may hold it.
    writeFileSync(join(plan.runDir, 'recipe.json'), JSON.stringify({ ...recipe, notify: { webhooks: [{ url, format: 'slack', events: ['run.failed'] }] } }));
    runDirs.push(plan.runDir);
  }
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('webhook URLs shown', () => {
  it('by scheme and host: never a path, a query or credentials; env:NAME as it is', () => {
    expect(shownWebhookUrl(SLACK)).toBe('https://hooks.slack.com/…');
    expect(shownWebhookUrl('https://bot:hunter2@hooks.example.com:8443/x?token=t')).toBe('https://hooks.example.com:8443/…');
    expect(shownWebhookUrl('env:SLACK_URL')).toBe('env:SLACK_URL');
    expect(shownChange({ path: 'notify.webhooks.0.url', before: SLACK, after: 'env:X' })).toEqual({ path: 'notify.webhooks.0.url', before: 'https://hooks.slack.com/…', after: 'env:X' });
    expect(shownChange({ path: 'cpt.lr', before: 1, after: 2 })).toEqual({ path: 'cpt.lr', before: 1, after: 2 });
  });

  it("in the report's parameters table", () => {
    for (const runDir of runDirs) {
      const page = readFileSync(writeReport(runDir, { png: false }).page, 'utf8');
      expect(page).toMatch(/<td>notify\.webhooks\.0\.url<\/td><td>&quot;https:\/\/hooks\.(slack|example)\.com\/…&quot;<\/td>/);
      expect(page).not.toMatch(/secret-token|hunter2/);
    }
  });

  it("in compare's warning of what differs between the runs' recipes", () => {
    const c = compareRuns(runDirs.map((d) => readRunData(d)));
    const w = c.warnings.find((x) => x.includes('notify.webhooks.0.url'));
    expect(w).toContain('notify.webhooks.0.url https://hooks.slack.com/…→https://hooks.example.com/…');
    expect(c.warnings.join('\n')).not.toMatch(/secret-token|hunter2/);
  });
});
