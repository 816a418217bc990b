/**
 * `notify:` against a real webhook receiver, a real worker and a real dev server: a run that hangs once, crashes
 * in a restart loop until its budget is spent and fails, then is resumed and completes. The receiver fails the
 * first delivery (Temporal retries it, so it arrives twice); after dropping repeats by id it has every event once,
 * in order. The URL (with its token) is in the worker's environment only: not in any history of the run, the
 * plan, status, the logs or the worker's output.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NOTIFY_EVENTS } from '../../src/plan/notify-spec.js';
import { fakePlan, fakeStep, ROOT, setupEnv, startPlan, TEMPORAL_BIN, tmpRunDir, waitFor, type Env } from './harness.js';

const exec = promisify(execFile);
const TOKEN = `tok${randomBytes(12).toString('hex')}`;

interface Delivery {
  id: string;
  event: string;
  body: Record<string, unknown>;
  answered: number;
}
const deliveries: Delivery[] = [];
const receiver = createServer((req, res) => {
  let body = '';
  req.on('data', (d) => (body += d));
  req.on('end', () => {
    // The very first delivery fails: Temporal retries it, so the receiver sees that event twice.
    const answered = deliveries.length === 0 ? 500 : 200;
    deliveries.push({ id: String(req.headers['x-infir2-event-id']), event: String(req.headers['x-infir2-event']), body: JSON.parse(body), answered });
    res.writeHead(answered).end();
  });
});

let env: Env;
let worker: Awaited<ReturnType<Env['startWorker']>>;
let url = '';

beforeAll(async () => {
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/services/T0/B0/${TOKEN}`;
  env = await setupEnv('notify');
  worker = await env.startWorker([], undefined, { INFIR2_TEST_WEBHOOK: url });
});

afterAll(async () => {
  await env?.teardown();
  await new Promise<void>((r) => receiver.close(() => r()));
});

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await exec(process.execPath, [join(ROOT, 'bin', 'infir2.js'), ...args], { env: { ...process.env, TEMPORAL_ADDRESS: env.server.address }, timeout: 120_000 });
    return { code: 0, ...r };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** Every payload of a history as text: `workflow show -o json` carries their bytes in base64. */
const payloadText = (json: string) => [...json.matchAll(/"data": "([A-Za-z0-9+/=]*)"/g)].map((m) => Buffer.from(m[1]!, 'base64').toString('utf8')).join('\n');

describe('notify: webhooks', () => {
  it('a failed-then-resumed run: every event once after dropping repeats by id, in order; the URL only in the worker\'s environment', async () => {
    const runDir = tmpRunDir(env, 'told');
    const plan = {
      ...fakePlan(runDir, 'told', [
        // A hang after checkpoint 3: told as a hang, then its retry.
        fakeStep({ id: 'cpt.warmup', runDir, iters: 8, saveInterval: 3, faults: ['hang@5'], stallTimeoutSec: 3 }),
        // Crashes at 8 (after checkpoint 6: retried), at 9 (no new checkpoint: the last retry retries.crash 1 allows)
        // and at 10 (a restart loop: the step, and the run, fail).
        fakeStep({ id: 'sft.stage2', runDir, iters: 12, saveInterval: 6, faults: ['crash@8', 'crash@9', 'crash@10'], retries: { crash: 1 }, dependsOn: ['cpt.warmup'] }),
      ]),
      notify: { webhooks: [{ url: 'env:INFIR2_TEST_WEBHOOK', format: 'json' as const, events: [...NOTIFY_EVENTS] }] },
    };
    const h = await startPlan(env, plan);
    await expect(h.result()).rejects.toThrow();
    const first = (await h.describe()).runId;
    await waitFor('run.failed to be told', () => deliveries.some((d) => d.event === 'run.failed'), 30_000);

    const r = await cli(['resume', h.workflowId]);
    expect(r.code, r.stderr).toBe(0);
    await waitFor('run.completed to be told', () => deliveries.some((d) => d.event === 'run.completed'), 60_000);
    const second = (await env.client.workflow.getHandle(h.workflowId).describe()).runId;
    expect(second).not.toBe(first);

    // Repeats dropped by id, in the order they first arrived.
    const seen = new Set<string>();
    const told = deliveries.filter((d) => (seen.has(d.id) ? false : (seen.add(d.id), true)));
    expect(deliveries.length).toBe(told.length + 1); // the failed first delivery, sent again
    expect(deliveries[1]!.id).toBe(deliveries[0]!.id);
    expect(told.map((d) => `${d.event} ${d.body.step ?? ''} ${d.body.attempt ?? ''}`.trim())).toEqual([
      'step.hang cpt.warmup 1',
      'step.retried cpt.warmup 1',
      'step.retried sft.stage2 1',
      'step.retried sft.stage2 2',
      'step.budget sft.stage2 2',
      'run.failed',
      'run.completed',
    ]);
    expect(told.map((d) => d.id)).toEqual([
      `${h.workflowId}/${first}/cpt.warmup/a1/step.hang`,
      `${h.workflowId}/${first}/cpt.warmup/a1/step.retried`,
      `${h.workflowId}/${first}/sft.stage2/a1/step.retried`,
      `${h.workflowId}/${first}/sft.stage2/a2/step.retried`,
      `${h.workflowId}/${first}/sft.stage2/a2/step.budget`,
      `${h.workflowId}/${first}/run.failed`,
      `${h.workflowId}/${second}/run.completed`,
    ]);
    expect(told[0]!.body).toMatchObject({ id: told[0]!.id, event: 'step.hang', recipe: 'fake', runId: 'told', class: 'hang' });
    expect(told[5]!.body.message).toMatch(/sft\.stage2.*restart loop/);

    // The URL's token: nowhere but the worker's environment.
    const texts: string[] = [];
    for await (const wf of env.client.workflow.list({ query: "RecipeRunId = 'told'" })) {
      const { stdout } = await exec(TEMPORAL_BIN, ['workflow', 'show', '-o', 'json', '--address', env.server.address, '-w', wf.workflowId, '-r', wf.runId], { maxBuffer: 64 << 20 });
      texts.push(stdout, payloadText(stdout));
    }
    expect(texts.length).toBeGreaterThanOrEqual(2 * 5); // both executions of the run, their steps
    const planJson = readFileSync(join(plan.runDir, 'plan.json'), 'utf8');
    expect(planJson).toContain('env:INFIR2_TEST_WEBHOOK');
    texts.push(planJson, (await cli(['status', h.workflowId, '--json'])).stdout, (await cli(['logs', h.workflowId])).stdout, env.outputOf(worker));
    for (const f of readdirSync(join(plan.runDir, 'logs'))) texts.push(readFileSync(join(plan.runDir, 'logs', f), 'utf8'));
    for (const text of texts) expect(text.includes(TOKEN)).toBe(false);
  }, 240_000);

  it('a webhook whose variable the worker lacks costs the run nothing: it completes, and the history names the variable', async () => {
    const runDir = tmpRunDir(env, 'untold');
    const before = deliveries.length;
    const plan = {
      ...fakePlan(runDir, 'untold', [fakeStep({ id: 'cpt.warmup', runDir, iters: 4 })]),
      notify: { webhooks: [{ url: 'env:INFIR2_NOT_SET_ANYWHERE', format: 'slack' as const, events: [...NOTIFY_EVENTS] }] },
    };
    const h = await startPlan(env, plan);
    const res = (await h.result()) as { status: { status: string } };
    expect(res.status.status).toBe('completed');
    expect(deliveries.length).toBe(before);
    const { stdout } = await exec(TEMPORAL_BIN, ['workflow', 'show', '-o', 'json', '--address', env.server.address, '-w', h.workflowId], { maxBuffer: 64 << 20 });
    // One attempt: a missing variable is a configuration error, not retried.
    expect(payloadText(stdout) + stdout).toContain("notify.webhooks.0.url: this worker's environment has no INFIR2_NOT_SET_ANYWHERE");
    expect(stdout.match(/"activityType":\s*\{\s*"name":\s*"notify"/g)).toHaveLength(1); // (and the run's report)
  }, 60_000);
});
