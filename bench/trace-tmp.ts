import { join } from 'node:path';
import { mkdirSync } from 'node:fs';
import { stepWorkflowId } from '../src/temporal/constants.js';
import { fakePlan, fakeStep, journal, setupEnv, startPlan } from '../test/integration/harness.js';
const evSec = (e: any) => Number(e.eventTime?.seconds ?? 0) + (e.eventTime?.nanos ?? 0) / 1e9;
const env = await setupEnv('trace');
await env.startWorker();
try {
  for (let round = 0; round < 2; round++) {
  const runDir = join(env.dir, 'runs', `ov${round}`);
  mkdirSync(runDir, { recursive: true });
  const steps = Array.from({ length: 3 }, (_, i) => fakeStep({ id: `train.${i}`, runDir, iters: 20, sleep: 0.1, saveInterval: 25, dependsOn: i ? [`train.${i - 1}`] : [] }));
  const t0 = Date.now() / 1000;
  const h = await startPlan(env, fakePlan(runDir, `ov${round}`, steps));
  await h.result();
  const t1 = Date.now() / 1000;
  const marks: [number, string][] = [[t0, 'client: start'], [t1, 'client: result']];
  steps.forEach((s) => { const j = journal(runDir, s.id); marks.push([j[0]!.t, `${s.id} first iteration`], [j.at(-1)!.t, `${s.id} last iteration`]); });
  const name = (e: any) => Object.keys(e).find((k) => k.endsWith('Attributes') && e[k]) ?? '?';
  const add = async (id: string, tag: string) => {
    for (const e of (await env.client.workflow.getHandle(id).fetchHistory()).events ?? []) marks.push([evSec(e), `${tag} ${name(e).replace('EventAttributes', '')}${(e as any).activityTaskScheduledEventAttributes ? ' ' + (e as any).activityTaskScheduledEventAttributes.activityType.name : ''}`]);
  };
  await add(h.workflowId, 'run');
  for (const s of steps) await add(stepWorkflowId(h.workflowId, s.id), s.id);
  marks.sort((a, b) => a[0] - b[0]);
  let prev = t0;
  for (const [t, m] of marks) { console.log(`${(t - t0).toFixed(3).padStart(8)} +${((t - prev) * 1000).toFixed(0).padStart(5)} ms  ${m}`); prev = t; }
  console.log('----');
  }
} finally { await env.teardown(); }
