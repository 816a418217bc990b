/**
 * The Web UI reading an encrypted run through `infir2 codec-server` (issue 13): a dev server whose UI is told the
 * codec endpoint (`--ui-codec-endpoint`, as `infir2 up` does when INFIR2_CODEC_KEY is set), a worker and a client
 * with the key, and headless Chromium (Debian's) on the run's page. The browser calls the codec server itself
 * (cross-origin, so its answer needs the CORS headers); the page then shows the run's input, the Plan, in the clear.
 */
import { Client } from '@temporalio/client';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HAVE_CHROMIUM, openLocalPage, OUT, SKIP_REASON, UI_TIMEOUT } from './browser.js';
import type { Plan } from '../../src/plan/types.js';
import { defaultKeyId } from '../../src/temporal/codec-key.js';
import { EncryptionCodec } from '../../src/temporal/codec.js';
import { startCodecServer, type CodecServerHandle } from '../../src/temporal/codec-server.js';
import { ORCHESTRATOR_TASK_QUEUE, runWorkflowId } from '../../src/temporal/constants.js';
import { fakePlan, fakeStep, freePort, recordPlan, setupEnv, tmpRunDir, type Env } from '../integration/harness.js';


describe.skipIf(!HAVE_CHROMIUM)(`the Web UI decodes an encrypted run through infir2 codec-server${HAVE_CHROMIUM ? '' : ` (skipped: ${SKIP_REASON})`}`, () => {
  const key = randomBytes(32);
  const codec = new EncryptionCodec({ key, id: defaultKeyId(key) });
  let savedKey: string | undefined;
  let env: Env;
  let codecServer: CodecServerHandle;
  const codecRequests: string[] = [];
  let browser: Browser;
  let page: Page;
  let plan: Plan;
  let wfId: string;

  beforeAll(async () => {
    savedKey = process.env.INFIR2_CODEC_KEY;
    process.env.INFIR2_CODEC_KEY = key.toString('base64'); // the worker the harness starts inherits it
    const codecPort = await freePort();
    env = await setupEnv('webui-codec', { ui: true, uiCodecEndpoint: `http://127.0.0.1:${codecPort}` });
    codecServer = await startCodecServer({ codec, port: codecPort, corsOrigins: [env.server.uiUrl!], log: () => undefined });
    codecServer.server.on('request', (req) => codecRequests.push(`${req.method} ${req.url?.split('?')[0]} ${req.headers.origin ?? '-'}`));
    await env.startWorker();

    const runDir = tmpRunDir(env, 'sealed');
    plan = fakePlan(runDir, 'sealed', [fakeStep({ id: 'cpt.warmup', runDir, iters: 2, saveInterval: 2 })]);
    wfId = runWorkflowId(plan.recipe, plan.runId);
    recordPlan(plan);
    const keyed = new Client({ connection: env.connection, dataConverter: { payloadCodecs: [codec] } });
    const h = await keyed.workflow.start('recipeRun', {
      taskQueue: ORCHESTRATOR_TASK_QUEUE,
      workflowId: wfId,
      args: [plan, { heartbeatTimeoutSec: 5, retryDelaySec: 1 }],
    });
    await h.result();

    ({ browser, page } = await openLocalPage());
  });

  afterAll(async () => {
    await browser?.close();
    await codecServer?.close();
    await env?.teardown();
    if (savedKey === undefined) delete process.env.INFIR2_CODEC_KEY;
    else process.env.INFIR2_CODEC_KEY = savedKey;
  });

  it("shows the run's input (its Plan) decoded, the browser having asked the codec server from the UI's origin", async () => {
    await page.goto(`${env.server.uiUrl}/namespaces/default/workflows/${encodeURIComponent(wfId)}`, { waitUntil: 'networkidle', timeout: UI_TIMEOUT });
    await page.getByRole('heading', { name: wfId }).first().waitFor();
    // The Input card holds the start event's first argument, the Plan, with its run directory.
    await page.getByText(plan.runDir).first().waitFor();
    await page.screenshot({ path: join(OUT, 'webui-codec-input.png'), fullPage: true });
    const origin = new URL(env.server.uiUrl!).origin;
    // (UI 2.54 sends a simple request, with no preflight; the unit test covers the preflight for UIs that send one.)
    expect(codecRequests).toContain(`POST /decode ${origin}`);
  });
});
