/**
 * Secrets by reference against a real dev server and worker (issue 13): the trainer gets the value from the
 * worker's environment, while history and the step's log hold only the name; a worker without the variable fails
 * the step at once as a configuration error naming the variable, never retried.
 */
import { WorkflowFailedError } from '@temporalio/client';
import type { ApplicationFailure } from '@temporalio/common';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunStatus } from '../../src/plan/contracts.js';
import type { PlanStep } from '../../src/plan/types.js';
import { stepWorkflowId } from '../../src/temporal/constants.js';
import { fakePlan, fakeStep, PYTHON, setupEnv, startPlan, tmpRunDir, type Env } from './harness.js';

const SECRET = `tok-${randomBytes(16).toString('hex')}`;
let env: Env;
beforeAll(async () => {
  env = await setupEnv('secrets');
  await env.startWorker([], undefined, { INFIR2_TEST_TOKEN: SECRET });
});
afterAll(async () => {
  await env?.teardown();
});

/** A one-shot step whose process writes the digest of its HF_TOKEN (never the value) to report.json. */
function tokenStep(runDir: string, from: string): PlanStep {
  const base = fakeStep({ id: 'eval.token', runDir, files: true });
  const out = join(base.command.cwd, 'report.json');
  const code = 'import hashlib, json, os, sys; v = os.environ.get("HF_TOKEN", ""); json.dump({"sha256": hashlib.sha256(v.encode()).hexdigest()}, open(sys.argv[1], "w"))';
  return { ...base, command: { ...base.command, argv: [PYTHON, '-c', code, out], secrets: { HF_TOKEN: from } }, outputs: { report: out }, completion: { kind: 'files', paths: [out] } };
}

describe('secrets by reference', () => {
  it('reach the trainer from the worker environment; history and the log hold only the name', async () => {
    const runDir = tmpRunDir(env, 'sec-ok');
    const plan = fakePlan(runDir, 'sec-ok', [tokenStep(runDir, 'INFIR2_TEST_TOKEN')]);
    const h = await startPlan(env, plan);
    await h.result();
    const got = JSON.parse(readFileSync(join(runDir, 'eval.token', 'report.json'), 'utf8')) as { sha256: string };
    expect(got.sha256).toBe(createHash('sha256').update(SECRET).digest('hex'));
    const histories = [await h.fetchHistory(), await env.client.workflow.getHandle(stepWorkflowId(h.workflowId, 'eval.token')).fetchHistory()].map((x) => JSON.stringify(x));
    const log = readFileSync(join(runDir, 'logs', 'eval.token.log'), 'utf8');
    for (const text of [...histories, log, readFileSync(join(runDir, 'plan.json'), 'utf8')]) expect(text.includes(SECRET)).toBe(false);
    expect(readFileSync(join(runDir, 'plan.json'), 'utf8')).toContain('INFIR2_TEST_TOKEN');
  });

  it('missing from the worker: a configuration error naming the variable, not retried, nothing launched', async () => {
    const runDir = tmpRunDir(env, 'sec-missing');
    const plan = fakePlan(runDir, 'sec-missing', [tokenStep(runDir, 'INFIR2_NOT_SET_ANYWHERE')]);
    const h = await startPlan(env, plan);
    const err = (await h.result().catch((e: unknown) => e)) as WorkflowFailedError;
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const st = (err.cause as ApplicationFailure).details![0] as RunStatus;
    const step = st.steps[0]!;
    expect(step.attempts).toBe(1);
    expect(step.lastFailure).toEqual({
      class: 'config',
      message: "eval.token: config: secret missing from this worker's environment: INFIR2_NOT_SET_ANYWHERE (for HF_TOKEN ← INFIR2_NOT_SET_ANYWHERE); set it where the worker starts (e.g. its EnvironmentFile)",
    });
    expect(readFileSync(join(runDir, 'logs', 'eval.token.log'), 'utf8')).not.toContain('starting fresh');
  });
});
