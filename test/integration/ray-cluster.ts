/**
 * A real single-node Ray cluster for the Ray integration test: `ray start --head --block` in its own process
 * group, on free ports and a private temp dir, so that stopping it (the whole group) touches no other Ray on
 * the machine — `ray stop` would stop every Ray of the user.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { groupAlive, terminateGroup } from '../../src/util/process-group.js';
import { freePort, ROOT, waitFor } from './harness.js';

export const RAY_BIN = process.env.INFIR2_RAY_BIN ?? join(ROOT, '.ray-venv', 'bin', 'ray');

export interface RayCluster {
  /** The dashboard's address, what `ray job submit --address` takes. */
  address: string;
  tempDir: string;
  stop(): Promise<void>;
}

export async function startRayCluster(): Promise<RayCluster> {
  if (!existsSync(RAY_BIN)) throw new Error(`no Ray CLI at ${RAY_BIN}: run \`make test\` (it installs .ray-venv) or set INFIR2_RAY_BIN`);
  // Short: Ray puts unix sockets under it (at most 107 bytes a path).
  const tempDir = mkdtempSync('/tmp/ray-infir2-');
  const p: number[] = [];
  for (let i = 0; i < 9; i++) p.push(await freePort());
  const dashboard = p[1]!;
  // Ray's worker ports: a window below the kernel's ephemeral range (where the free ports above come from), off
  // any of them; random, so that two test runs on one machine rarely share it.
  let workerMin = 0;
  do workerMin = 11000 + Math.floor(Math.random() * 20) * 1000;
  while (p.some((x) => x >= workerMin && x < workerMin + 1000));
  const args = [
    'start', '--head', '--block', '--disable-usage-stats', '--num-cpus=4', '--num-gpus=0',
    `--temp-dir=${tempDir}`, '--node-ip-address=127.0.0.1',
    `--port=${p[0]}`, '--include-dashboard=true', '--dashboard-host=127.0.0.1', `--dashboard-port=${dashboard}`,
    `--ray-client-server-port=${p[2]}`, `--dashboard-agent-listen-port=${p[3]}`, `--dashboard-agent-grpc-port=${p[4]}`,
    `--metrics-export-port=${p[5]}`, `--runtime-env-agent-port=${p[6]}`, `--node-manager-port=${p[7]}`, `--object-manager-port=${p[8]}`,
    `--min-worker-port=${workerMin}`, `--max-worker-port=${workerMin + 999}`,
  ];
  const proc: ChildProcess = spawn(RAY_BIN, args, {
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, RAY_USAGE_STATS_ENABLED: '0' },
  });
  let stderr = '';
  proc.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const address = `http://127.0.0.1:${dashboard}`;
  const stop = async () => {
    if (proc.pid && groupAlive(proc.pid)) await terminateGroup(proc.pid, 15_000);
    rmSync(tempDir, { recursive: true, force: true });
  };
  try {
    await waitFor('the Ray dashboard', async () => {
      if (proc.exitCode !== null) throw new Error(`ray start exited ${proc.exitCode}: ${stderr}`);
      try {
        return (await fetch(`${address}/api/version`)).ok;
      } catch {
        return false;
      }
    }, 120_000);
  } catch (err) {
    await stop();
    throw err;
  }
  return { address, tempDir, stop };
}
