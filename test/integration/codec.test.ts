/**
 * Payload encryption end to end (issue 13, "a shared cluster keeps secrets"): a real dev server and a real
 * worker with INFIR2_CODEC_KEY run fake plans (one with a crash and its retry, one cancelled and resumed). Read
 * without the key, nothing in their histories is readable: every payload is `binary/encrypted`, failure
 * messages are encoded, and neither the run directory nor the trainer's argv appears anywhere. The built CLI
 * with the key works as always (status, status --json, logs, list, cancel, resume, fork as far as the source
 * plan); without it, or with another key, it says so in one line. The Temporal CLI decodes the same history
 * through `infir2 codec-server`.
 */
import { Client } from '@temporalio/client';
import { execFile, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunStatus } from '../../src/plan/contracts.js';
import type { Plan } from '../../src/plan/types.js';
import { defaultKeyId } from '../../src/temporal/codec-key.js';
import { EncryptionCodec } from '../../src/temporal/codec.js';
import { startCodecServer } from '../../src/temporal/codec-server.js';
import { ORCHESTRATOR_TASK_QUEUE, runWorkflowId } from '../../src/temporal/constants.js';
import { fakePlan, fakeStep, journal, recordPlan, ROOT, setupEnv, TEMPORAL_BIN, tmpRunDir, waitFor, type Env } from './harness.js';

const KEY = randomBytes(32);
const KEY_HEX = KEY.toString('hex');
const codec = new EncryptionCodec({ key: KEY, id: defaultKeyId(KEY) });

let env: Env;
/** The test's own client, with the key, as `infir2` makes it. */
let keyed: Client;
let savedKey: string | undefined;
let keyedWorker: ChildProcess;

beforeAll(async () => {
  // The harness hands the test's environment to the workers it starts: they encrypt.
  savedKey = process.env.INFIR2_CODEC_KEY;
  process.env.INFIR2_CODEC_KEY = KEY_HEX;
  env = await setupEnv('codec');
  keyed = new Client({ connection: env.connection, dataConverter: { payloadCodecs: [codec] } });
  keyedWorker = await env.startWorker();
  expect(env.outputOf(keyedWorker)).toContain(`payloads encrypted (key id ${codec.keyId})`);
});

afterAll(async () => {
  await env?.teardown();
  if (savedKey === undefined) delete process.env.INFIR2_CODEC_KEY;
  else process.env.INFIR2_CODEC_KEY = savedKey;
});

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** The built CLI against the test's server; `key`: INFIR2_CODEC_KEY as given (null: unset). */
function cli(args: string[], key: string | null = KEY_HEX): Promise<CliResult> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, TEMPORAL_ADDRESS: env.server.address, INFIR2_HOME: join(env.dir, 'cli-home') };
  delete childEnv.INFIR2_CODEC_KEY;
  if (key !== null) childEnv.INFIR2_CODEC_KEY = key;
  return new Promise((resolve) => {
    execFile(process.execPath, [join(ROOT, 'bin', 'infir2.js'), ...args], { env: childEnv, encoding: 'utf8', timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

async function start(plan: Plan) {
  recordPlan(plan);
  return keyed.workflow.start('recipeRun', {
    taskQueue: ORCHESTRATOR_TASK_QUEUE,
    workflowId: runWorkflowId(plan.recipe, plan.runId),
    args: [plan, { heartbeatTimeoutSec: 5, retryDelaySec: 1 }],
    staticSummary: `fake run ${plan.runId} in ${plan.runDir}`,
  });
}

/**
 * Every payload-shaped object ({metadata, data}) under `v`, and every string anywhere, with bytes read as UTF-8.
 * Two kinds of payload are never encrypted, as docs/cluster.md says: search attributes (the server indexes them)
 * and the SDK's own patch markers (a workflow code version's name, written by the SDK's core, not by a codec).
 */
function walk(v: unknown, payloads: Record<string, unknown>[], strings: string[], clear = false): void {
  if (v instanceof Uint8Array) strings.push(Buffer.from(v).toString('utf8'));
  else if (typeof v === 'string') strings.push(v);
  else if (Array.isArray(v)) for (const x of v) walk(x, payloads, strings, clear);
  else if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    if (o.metadata && typeof o.metadata === 'object' && 'data' in o && !clear) payloads.push(o);
    const inClear = clear || o.markerName === 'core_patch';
    for (const [k, x] of Object.entries(o)) walk(x, payloads, strings, inClear || k === 'searchAttributes');
  }
}

/** What anyone who can read the server sees of the run's workflows (the run and its steps), with no key. */
async function rawHistories(runId: string) {
  const payloads: Record<string, unknown>[] = [];
  const strings: string[] = [];
  const ids: string[] = [];
  // Listing decodes memos (so it takes the key); the histories are fetched by a client without one.
  for await (const wf of keyed.workflow.list({ query: `RecipeRunId = '${runId}'` })) {
    ids.push(wf.workflowId);
    const history = await env.client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
    walk(history, payloads, strings);
  }
  const encodings = payloads.map((p) => Buffer.from(((p.metadata as Record<string, Uint8Array>).encoding ?? new Uint8Array())).toString('utf8'));
  return { ids, payloads, encodings, text: strings.join('\n') };
}

describe('payload encryption', () => {
  let plan: Plan;
  let wfId: string;

  it('runs a plan (a crash and its retry included) with every payload in its histories encrypted', async () => {
    const runDir = tmpRunDir(env, 'enc');
    plan = fakePlan(runDir, 'enc', [
      fakeStep({ id: 'cpt.stable', runDir, iters: 6, saveInterval: 3, faults: ['crash@4'] }),
      fakeStep({ id: 'eval.a', runDir, files: true, dependsOn: ['cpt.stable'] }),
    ]);
    wfId = runWorkflowId(plan.recipe, plan.runId);
    const h = await start(plan);
    const res = (await h.result()) as { status: RunStatus };
    expect(res.status.status).toBe('completed');
    expect(res.status.steps[0]!.attempts).toBe(2);

    const raw = await rawHistories(plan.runId);
    expect(raw.ids.sort()).toEqual([wfId, `${wfId}/cpt.stable`, `${wfId}/eval.a`].sort());
    // Start input, activity inputs and results, heartbeats, signals, queries' memo, summaries, failure details.
    expect(raw.payloads.length).toBeGreaterThan(20);
    expect(new Set(raw.encodings)).toEqual(new Set(['binary/encrypted']));
    for (const secret of [runDir, 'fake_trainer.py', 'fake run enc in']) expect(raw.text, secret).not.toContain(secret);
    // The crash's activity failure: its message and stack trace are in an encrypted payload, not in the clear.
    expect(raw.text).toContain('Encoded failure');
  });

  it('the CLI with the key: status, status --json, logs, list', async () => {
    const json = await cli(['status', wfId, '--json']);
    expect(json.stderr).toBe('');
    expect(json.code).toBe(0);
    const st = JSON.parse(json.stdout) as RunStatus;
    expect(st.runDir).toBe(plan.runDir);
    expect(st.steps.map((s) => s.status)).toEqual(['completed', 'completed']);

    const table = await cli(['status', plan.runId]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/cpt\.stable[\s\S]*eval\.a/);

    const logs = await cli(['logs', wfId, '--stage', 'cpt.stable']);
    expect(logs.code).toBe(0);
    expect(logs.stdout).toMatch(/iteration\s+6\/\s+6/);

    const list = await cli(['list', '--json']);
    expect(list.code).toBe(0);
    expect(list.stdout).toContain(wfId);
  });

  it('without the key, or with another, the CLI says which key in one line', async () => {
    const none = await cli(['status', wfId, '--json'], null);
    expect(none.code).toBe(1);
    expect(none.stdout).toBe('');
    expect(none.stderr).toBe(`error: payload encrypted with key id ${codec.keyId}; INFIR2_CODEC_KEY is not set in this process\n`);

    const other = await cli(['status', wfId], randomBytes(32).toString('base64'));
    expect(other.code).toBe(1);
    expect(other.stderr).toMatch(new RegExp(`^error: payload encrypted with key id ${codec.keyId}; this process has key id [0-9a-f]{16} \\(set INFIR2_CODEC_KEY to the key the run was written with\\)\\n$`));

    const bad = await cli(['status', wfId], 'abc');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^error: INFIR2_CODEC_KEY: expected 32 bytes as 64 hex digits or base64 .*\n$/);
  });

  it('cancel and resume with the key: the resumed run keeps its checkpoint, and its history is encrypted too', async () => {
    const runDir = tmpRunDir(env, 'enc-resume');
    const p = fakePlan(runDir, 'enc-resume', [fakeStep({ id: 'cpt.stable', runDir, iters: 24, saveInterval: 3, sleep: 0.2 })]);
    const id = runWorkflowId(p.recipe, p.runId);
    await start(p);
    await waitFor('iteration 4', () => journal(runDir, 'cpt.stable').some((j) => j.iteration >= 4), 30_000);

    const cancel = await cli(['cancel', id]);
    expect(cancel.stderr).toBe('');
    expect(cancel.code).toBe(0);
    expect(cancel.stdout).toContain(`cancel requested for ${id}`);

    const resume = await cli(['resume', id, '--detach']);
    expect(resume.stderr).toBe('');
    expect(resume.code).toBe(0);
    const from = Number(/cpt\.stable\s+resume from (\d+)/.exec(resume.stdout)?.[1]);
    expect(from, resume.stdout).toBeGreaterThanOrEqual(3);
    const res = (await keyed.workflow.getHandle(id).result()) as { status: RunStatus };
    expect(res.status.status).toBe('completed');
    // It went on from its checkpoint: nothing before it was computed again.
    const iters = journal(runDir, 'cpt.stable').map((j) => j.iteration);
    expect(iters.filter((i) => i <= from).length).toBe(new Set(iters.filter((i) => i <= from)).size);
    expect(Math.max(...iters)).toBe(24);

    const raw = await rawHistories(p.runId);
    expect(new Set(raw.encodings)).toEqual(new Set(['binary/encrypted']));
    expect(raw.text).not.toContain(runDir);
  });

  it('fork with the key reads the source plan (and stops where a fake run has no recipe); without it, names the key', async () => {
    const withKey = await cli(['fork', wfId, '--stage', 'cpt.decay', '--from-iteration', '3']);
    expect(withKey.code).toBe(2);
    expect(withKey.stderr).toBe(`error: ${wfId}: its resolved recipe ${join(plan.runDir, 'recipe.json')} is missing\n`);
    const without = await cli(['fork', wfId, '--stage', 'cpt.decay', '--from-iteration', '3'], null);
    expect(without.code).toBe(1);
    expect(without.stderr).toContain(`payload encrypted with key id ${codec.keyId}; INFIR2_CODEC_KEY is not set`);
  });

  it('the Temporal CLI shows the history encrypted, and decoded through `infir2 codec-server`', async () => {
    const show = (extra: string[]) =>
      new Promise<string>((resolve, reject) =>
        execFile(TEMPORAL_BIN, ['workflow', 'show', '-w', wfId, '--address', env.server.address, '-o', 'json', ...extra], { encoding: 'utf8', maxBuffer: 64 << 20 }, (err, out, serr) =>
          err ? reject(new Error(`${err.message}: ${serr}`)) : resolve(out),
        ),
      );
    // Its JSON carries payloads' bytes as base64: read them all back.
    const dataText = (json: string) => [...json.matchAll(/"data": "([A-Za-z0-9+/=]*)"/g)].map((m) => Buffer.from(m[1]!, 'base64').toString('utf8')).join('\n');
    const plain = await show([]);
    expect(plain).toContain(Buffer.from('binary/encrypted').toString('base64'));
    expect(plain).not.toContain(plan.runDir);
    expect(dataText(plain)).not.toContain(plan.runDir);
    const server = await startCodecServer({ codec, port: 0, corsOrigins: [] });
    try {
      // The CLI runs as this user: served without a token.
      const decoded = await show(['--codec-endpoint', server.url]);
      expect(decoded).not.toContain(Buffer.from('binary/encrypted').toString('base64'));
      expect(dataText(decoded)).toContain(plan.runDir);
    } finally {
      await server.close();
    }
    // A server that serves no local user: the CLI passes the bearer token with --codec-auth, and nothing without it.
    const token = 'c0dec-t0ken-for-the-cli-0123456789';
    const locked = await startCodecServer({ codec, port: 0, corsOrigins: [], log: () => undefined, access: { token, uids: [] } });
    try {
      const decoded = await show(['--codec-endpoint', locked.url, '--codec-auth', `Bearer ${token}`]);
      expect(dataText(decoded)).toContain(plan.runDir);
      const refused = await show(['--codec-endpoint', locked.url]).catch((err: Error) => err.message);
      expect(refused).not.toContain(plan.runDir);
      expect(dataText(refused)).not.toContain(plan.runDir);
    } finally {
      await locked.close();
    }
  });

  it('a worker without the key fails the run\'s tasks with the line, and the run goes on once a worker has it', async () => {
    await env.stopWorker(keyedWorker);
    delete process.env.INFIR2_CODEC_KEY;
    const keyless = await env.startWorker();
    process.env.INFIR2_CODEC_KEY = KEY_HEX;
    expect(env.outputOf(keyless)).not.toContain('payloads encrypted');
    const runDir = tmpRunDir(env, 'enc-keyless');
    const p = fakePlan(runDir, 'enc-keyless', [fakeStep({ id: 'cpt.stable', runDir, iters: 3, saveInterval: 3 })]);
    const h = await start(p);
    await waitFor('the keyless worker to refuse the task', () => env.outputOf(keyless).includes(`payload encrypted with key id ${codec.keyId}; INFIR2_CODEC_KEY is not set in this process`), 30_000);
    await env.stopWorker(keyless);
    keyedWorker = await env.startWorker();
    const res = (await h.result()) as { status: RunStatus };
    expect(res.status.status).toBe('completed');
  });
});
