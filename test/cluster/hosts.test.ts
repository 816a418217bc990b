/**
 * The control plane of a cluster with its workers on separate hosts (test/cluster/hosts.ts): the Temporal server
 * on PostgreSQL on the control host, the orchestrator worker and two pool workers each on a host of its own (a
 * network namespace with its own address, working directory, HOME, TMPDIR, host directory and environment).
 * The tiny recipe runs for real with its stages spread over the two pools; the only thing the hosts share is the
 * run directory (and the install), as GPU nodes share a filesystem.
 */
import { execFile, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { poolTaskQueue } from '../../src/temporal/constants.js';
import { processesMentioning, ROOT } from '../integration/harness.js';
import { clusterManifest, secondsSince, setupCluster, type ClusterEnv } from './harness.js';
import { hostEnv, makeHosts, namespaceOf, type HostNetwork, type WorkerHost } from './hosts.js';

const exec = promisify(execFile);
const prereq = clusterManifest();
const report = (msg: string) => console.log(`[cluster] ${msg}`);

/** Which pool runs which stage: the two are interleaved, so that every hand-off crosses from one host to another. */
const POOLS = { 'cpu-a': ['cpt', 'convert', 'eval'], 'cpu-b': ['sft.0', 'sft.1', 'rl'] } as const;
const SECRET = `s3cr3t-${randomBytes(8).toString('hex')}`;

describe.skipIf(!prereq.manifest)('workers on separate hosts run the tiny recipe over two pools', () => {
  let base: string;
  let net: HostNetwork;
  let env: ClusterEnv;
  const workers = new Map<string, ChildProcess>();
  const host = (name: string) => net.hosts.find((h) => h.name === name)!;

  beforeAll(async () => {
    base = mkdtempSync(join(tmpdir(), 'infir2-hosts-'));
    chmodSync(base, 0o755);
    net = makeHosts(base, ['orchestrator', 'node-a', 'node-b']);
    if (!net.namespaces) report(`no network namespaces (${net.why}): the hosts share this machine's loopback`);
    env = await setupCluster('hosts', prereq.manifest!, { bindIp: net.controlAddress });
    const on = (h: WorkerHost, vars: Record<string, string> = {}) => ({
      env: hostEnv(h, { TEMPORAL_ADDRESS: env.address, TEMPORAL_NAMESPACE: env.namespace, ...vars }),
      wrap: h.wrap,
      cwd: h.cwd,
    });
    // The orchestrator runs workflows only; each node serves one pool. Only node b holds the secret RL needs.
    workers.set('orchestrator', await env.startWorker([], [], on(host('orchestrator'))));
    workers.set('node-a', await env.startWorker(['--no-workflows'], ['cpu-a'], on(host('node-a'))));
    workers.set('node-b', await env.startWorker(['--no-workflows'], ['cpu-b'], on(host('node-b'), { INFIR2_HOSTS_SECRET: SECRET })));
  });

  afterAll(async () => {
    try {
      await env?.teardown();
    } finally {
      net?.teardown();
      if (base && !process.env.INFIR2_KEEP_TEST_DIRS) rmSync(base, { recursive: true, force: true });
    }
  });

  it('each stage on its pool\'s host, every hand-off through the shared run directory only', async () => {
    const runs = join(base, 'shared', 'runs');
    mkdirSync(runs, { recursive: true });
    const pools = Object.fromEntries(Object.keys(POOLS).map((p) => [p, { taskQueue: poolTaskQueue(p), gpusPerNode: 0, launcher: 'local' }]));
    const sets = [
      `runDir=${runs}`,
      `pools=${JSON.stringify(pools)}`,
      ...Object.entries(POOLS).flatMap(([pool, stages]) => stages.map((s) => `${s}.pool=${pool}`)),
      'rl.secrets.INFIR2_DEMO_TOKEN=INFIR2_HOSTS_SECRET',
    ];
    const t0 = Date.now();
    const cli = (args: string[]) => exec(process.execPath, [join(ROOT, 'bin', 'infir2.js'), ...args], { env: { ...env.cliEnv(), CI: '1' }, timeout: 900_000, maxBuffer: 64 << 20 });
    const r = await cli(['run', 'recipes/tiny.yaml', '--run-id', 'hosts', ...sets.flatMap((s) => ['--set', s])]);
    expect(r.stdout).toContain('tiny-hosts: completed');
    report(`the tiny recipe over two pools on separate hosts: ${secondsSince(t0)}s`);

    const st = JSON.parse((await cli(['status', 'tiny-hosts', '--json'])).stdout) as { status: string; steps: { id: string; status: string; attempts: number }[] };
    expect(st.status).toBe('completed');
    expect(st.steps).toHaveLength(12);
    for (const s of st.steps) expect([s.id, s.status, s.attempts]).toEqual([s.id, 'completed', 1]);

    // Who did what, from the server's own record: the identity (`pid@host`) of whoever took each task.
    const pidOf = (name: string) => workers.get(name)!.pid!;
    const ranBy: Record<string, Set<number>> = {};
    const note = (what: string, identity: string | null | undefined) => (ranBy[what] ??= new Set()).add(Number(identity?.split('@')[0]));
    const ids: string[] = [];
    for await (const wf of env.client.workflow.list({ query: "RecipeRunId = 'hosts'" })) ids.push(wf.workflowId);
    expect(ids).toHaveLength(13);
    for (const id of ids) {
      const events = (await env.client.workflow.getHandle(id).fetchHistory()).events ?? [];
      const queueOf = new Map<string, string>();
      for (const e of events) {
        const scheduled = e.activityTaskScheduledEventAttributes;
        if (scheduled) queueOf.set(String(e.eventId), scheduled.taskQueue?.name ?? '?');
        const started = e.activityTaskStartedEventAttributes;
        if (started) note(queueOf.get(String(started.scheduledEventId)) ?? '?', started.identity);
        if (e.workflowTaskStartedEventAttributes) note('workflow tasks', e.workflowTaskStartedEventAttributes.identity);
      }
    }
    expect(ranBy).toEqual({
      'workflow tasks': new Set([pidOf('orchestrator')]),
      [poolTaskQueue('cpu-a')]: new Set([pidOf('node-a')]),
      [poolTaskQueue('cpu-b')]: new Set([pidOf('node-b')]),
    });

    // Each worker is on its own host: its own network, and nothing written where it stands. What the steps
    // made is in the shared run directory.
    for (const [name, w] of workers) {
      const h = host(name);
      if (net.namespaces) expect(namespaceOf(w.pid!), name).toBe(h.ns);
      expect(readdirSync(h.cwd), `${name}'s working directory`).toEqual([]);
    }
    for (const s of st.steps) expect(existsSync(join(runs, 'hosts', 'logs', `${s.id}.log`)), `${s.id}'s log`).toBe(true);
    expect(existsSync(join(runs, 'hosts', 'convert.fp8', 'hf', 'config.json'))).toBe(true);
    if (net.namespaces) {
      // The server's end of each worker's connection: every host's own address, none of them the loopback.
      const port = env.address.split(':').at(-1);
      const ss = spawnSync('ss', ['-Htn', 'state', 'established', `( sport = :${port} )`], { encoding: 'utf8' }).stdout;
      const peers = new Set([...ss.matchAll(/\s(\d+\.\d+\.\d+\.\d+):\d+\s*$/gm)].map((m) => m[1]));
      for (const name of workers.keys()) expect(peers, name).toContain(host(name).address);
    }
    expect(processesMentioning(runs)).toEqual([]);
  }, 900_000);
});
