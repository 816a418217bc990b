/**
 * The Web UI as cockpit: a real dev server with its UI (Temporal UI 2.54), a real worker, a 3-step fake run
 * started the way `infir2 run` starts one, and headless Chromium (Debian's, never a downloaded one) looking at
 * it. Screenshots land in test-output/.
 *
 * What UI 2.54 shows where:
 * - the workflow list (`/namespaces/default/workflows`) has no summary column, and the list API
 *   (ListWorkflowExecutions) returns no user metadata, so a run's summary is only on its own page;
 * - the list filter is the `?query=` URL parameter (a visibility query);
 * - a run's page redirects to `…/<workflowId>/<runId>/timeline`; its "User Metadata" tab renders Summary,
 *   Details and Current Details as markdown, each in its own iframe (`#user-metadata-summary`,
 *   `#user-metadata-details`, `#user-metadata-current-details`); Current Details comes from the
 *   `__temporal_workflow_metadata` query, so a worker must be up;
 * - the "Relationships" tab lists the child workflows as links.
 */
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HAVE_CHROMIUM, openLocalPage, OUT, SKIP_REASON, UI_TIMEOUT } from './browser.js';
import { planDetails, planSummary } from '../../src/cli/run.js';
import type { Plan } from '../../src/plan/types.js';
import { ORCHESTRATOR_TASK_QUEUE, SA, runWorkflowId, stepWorkflowId } from '../../src/temporal/constants.js';
import type { RunStatus } from '../../src/plan/contracts.js';
import { fakePlan, fakeStep, recordPlan, setupEnv, tmpRunDir, type Env } from '../integration/harness.js';

if (!HAVE_CHROMIUM) console.warn(`skipping test/e2e/webui.test.ts: ${SKIP_REASON}`);

/** Start a plan exactly as `startRun` (src/cli/run.ts) does: static summary/details and search attributes. */
async function startLikeCli(env: Env, plan: Plan) {
  recordPlan(plan);
  return env.client.workflow.start('recipeRun', {
    taskQueue: ORCHESTRATOR_TASK_QUEUE,
    workflowId: runWorkflowId(plan.recipe, plan.runId),
    args: [plan, { heartbeatTimeoutSec: 5, retryDelaySec: 1 }],
    staticSummary: planSummary(plan),
    staticDetails: planDetails(plan),
    typedSearchAttributes: [
      { key: SA.recipeName, value: plan.recipe },
      { key: SA.precision, value: plan.precision },
      { key: SA.runId, value: plan.runId },
      { key: SA.stage, value: [] },
    ],
  });
}

describe.skipIf(!HAVE_CHROMIUM)(`the Web UI as cockpit${HAVE_CHROMIUM ? '' : ` (skipped: ${SKIP_REASON})`}`, () => {
  let env: Env;
  let browser: Browser;
  let page: Page;
  let ui: string;
  let plan: Plan;
  let wfId: string;
  let decoyId: string;

  const workflowsUrl = (query?: string) => `${ui}/namespaces/default/workflows${query ? `?query=${encodeURIComponent(query)}` : ''}`;
  /** The Workflow ID cell's link in the list (the Run ID cell links by run id, so this one is unique). */
  const idLink = (id: string) => page.getByRole('link', { name: id, exact: true });
  const goto = async (url: string) => {
    await page.goto(url, { waitUntil: 'networkidle', timeout: UI_TIMEOUT });
  };

  beforeAll(async () => {
    env = await setupEnv('webui', { ui: true });
    ui = env.server.uiUrl!;
    await env.startWorker();

    const runDir = tmpRunDir(env, 'cockpit');
    plan = fakePlan(runDir, 'cockpit', [
      fakeStep({ id: 'cpt.warmup', runDir, iters: 4, saveInterval: 2 }),
      fakeStep({ id: 'sft.stage1', runDir, iters: 3, saveInterval: 3, dependsOn: ['cpt.warmup'] }),
      fakeStep({ id: 'eval.a', runDir, files: true, dependsOn: ['sft.stage1'] }),
    ]);
    wfId = runWorkflowId(plan.recipe, plan.runId);
    // A run of another recipe, so that a filter has something to leave out.
    const decoyDir = tmpRunDir(env, 'decoy');
    const decoy: Plan = { ...fakePlan(decoyDir, 'decoy', [fakeStep({ id: 'cpt.warmup', runDir: decoyDir, iters: 2 })]), recipe: 'other' };
    decoyId = runWorkflowId(decoy.recipe, decoy.runId);

    const [h, d] = await Promise.all([startLikeCli(env, plan), startLikeCli(env, decoy)]);
    const [res] = (await Promise.all([h.result(), d.result()])) as [{ status: RunStatus }, unknown];
    expect(res.status.status).toBe('completed');

    ({ browser, page } = await openLocalPage());
  });

  afterAll(async () => {
    await browser?.close();
    await env?.teardown();
  });

  it('lists the run and its steps', async () => {
    await goto(workflowsUrl());
    await expect.poll(() => idLink(wfId).count(), { timeout: UI_TIMEOUT }).toBe(1);
    for (const s of plan.steps) await idLink(stepWorkflowId(wfId, s.id)).waitFor();
    const row = page.getByRole('row').filter({ has: idLink(wfId) });
    await expect.poll(() => row.innerText()).toMatch(/completed[\s\S]*recipeRun/i);
    await page.screenshot({ path: join(OUT, 'webui-list.png'), fullPage: true });
  });

  it('filters the list by search attribute (?query=)', async () => {
    await goto(workflowsUrl(`RecipeName = '${plan.recipe}'`));
    await idLink(wfId).waitFor();
    await idLink(stepWorkflowId(wfId, 'eval.a')).waitFor();
    expect(await idLink(decoyId).count()).toBe(0);
    // The filter is shown as a chip the user can clear.
    await page.getByText(`RecipeName = "${plan.recipe}"`).first().waitFor();
    await page.screenshot({ path: join(OUT, 'webui-list-filtered.png'), fullPage: true });

    await goto(workflowsUrl(`RecipeName = 'other'`));
    await idLink(decoyId).waitFor();
    expect(await idLink(wfId).count()).toBe(0);
    expect(await idLink(stepWorkflowId(wfId, 'cpt.warmup')).count()).toBe(0);

    // Stage is a keyword list on each step's workflow: it finds the step, not its siblings.
    await goto(workflowsUrl(`RecipeRunId = '${plan.runId}' AND Stage = 'sft.stage1'`));
    await idLink(stepWorkflowId(wfId, 'sft.stage1')).waitFor();
    expect(await idLink(stepWorkflowId(wfId, 'cpt.warmup')).count()).toBe(0);
    expect(await idLink(wfId).count()).toBe(0);
  });

  it("shows the run's summary, details and stage table on its page", async () => {
    await goto(`${ui}/namespaces/default/workflows/${encodeURIComponent(wfId)}`);
    await page.getByRole('heading', { name: wfId }).first().waitFor();
    await page.getByRole('tab', { name: 'User Metadata' }).click();
    await page.waitForURL(/\/user-metadata/);
    await page.getByRole('heading', { name: 'Current Details' }).waitFor();

    const summary = page.frameLocator('#user-metadata-summary');
    await summary.getByText(planSummary(plan), { exact: true }).waitFor();

    // The plan table (static details) and the live stage table (current details), rendered from markdown.
    const details = page.frameLocator('#user-metadata-details');
    await details.getByRole('cell', { name: 'sft.stage1', exact: true }).first().waitFor();
    // Its cells are padded like the stage table's, so that neighbours do not run together ("cpt.warmuplocal").
    // (Row 0 is the header; eval.a's row names sft.stage1 too, in its "after" cell.)
    const planRow = details.getByRole('row').nth(2);
    const sft = plan.steps[1]!;
    expect((await planRow.getByRole('cell').allInnerTexts()).map((c) => c.replace(/\s+/g, ' ').trim())).toEqual(
      ['sft.stage1', sft.backend, sft.pool, String(sft.gpus), 'cpt.warmup'],
    );
    const gpus = planRow.getByRole('cell').nth(3);
    expect(await gpus.getAttribute('align')).toBe('right');
    expect(await planRow.getByRole('cell').first().textContent()).toBe('\u00a0sft.stage1\u00a0');

    const current = page.frameLocator('#user-metadata-current-details');
    await current.getByText(/run\s+cockpit\s+—\s+completed/).waitFor();
    // Two tables name each step: the stage table first, then where each step's time went.
    const stages = current.getByRole('table').first();
    const stageRow = (id: string) => stages.getByRole('row').filter({ has: current.getByRole('cell', { name: id, exact: true }) });
    for (const s of plan.steps) {
      await expect.poll(() => stageRow(s.id).innerText(), { timeout: UI_TIMEOUT }).toMatch(/✔\s+completed/);
    }
    // A finished step shows its final result (not the last intermediate checkpoint's progress), an evaluation
    // its accuracy; the number cells are right-aligned and padded so that neighbours do not run together.
    const cellsOf = async (id: string) => (await stageRow(id).getByRole('cell').allInnerTexts()).map((c) => c.replace(/\s+/g, ' ').trim());
    expect((await cellsOf('cpt.warmup')).slice(2, 5)).toEqual(['4 / 4', expect.stringMatching(/^\d+\.\d+$/), '4']);
    expect((await cellsOf('sft.stage1')).slice(2, 5)).toEqual(['3 / 3', expect.stringMatching(/^\d+\.\d+$/), '3']);
    expect((await cellsOf('eval.a'))[3]).toBe('acc 50.0 %');
    const loss = stageRow('cpt.warmup').getByRole('cell').nth(3);
    expect(await loss.getAttribute('align')).toBe('right');
    expect(await loss.textContent()).toMatch(/^\u00a0.*\u00a0$/);
    // The time table: the run's goodput line, and a row per step with its goodput.
    await current.getByText(/goodput\s+\d+(\.\d+)?\s*%/).first().waitFor();
    const times = current.getByRole('table').nth(1);
    const timeRow = times.getByRole('row').filter({ has: current.getByRole('cell', { name: 'cpt.warmup', exact: true }) });
    expect((await timeRow.getByRole('cell').allInnerTexts())[1]!.trim()).toMatch(/^\d+(\.\d+)?\s*%$/);
    await page.waitForLoadState('networkidle');
    await page.screenshot({ path: join(OUT, 'webui-run.png'), fullPage: true });
  });

  it("shows the run's child workflows", async () => {
    await goto(`${ui}/namespaces/default/workflows/${encodeURIComponent(wfId)}`);
    const tab = page.getByRole('tab', { name: /Relationships/ });
    await expect.poll(() => tab.innerText()).toMatch(/Relationships\s*3/);
    await tab.click();
    await page.waitForURL(/\/relationships/);
    for (const s of plan.steps) {
      const child = stepWorkflowId(wfId, s.id);
      const link = page.getByRole('link', { name: child, exact: true });
      await link.waitFor();
      expect(await link.getAttribute('href')).toContain(`/workflows/${encodeURIComponent(child)}/`);
    }
    await page.waitForLoadState('networkidle');
    await page.screenshot({ path: join(OUT, 'webui-run-children.png'), fullPage: true });
  });
});
