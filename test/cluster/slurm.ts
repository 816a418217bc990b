/**
 * A real Slurm cluster on this machine for the cluster tier: munged, slurmctld and two slurmd (nodes n1 and n2,
 * Debian's build allows several on one host), on a private directory and private ports, started and stopped by
 * the tests. Facts it rests on: docs/slurm-on-one-machine.md (munge's directory modes, the cgroup
 * proctrack that alone kills every leftover of a step). Clients find it through SLURM_CONF.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { freePort, sleep } from '../integration/harness.js';

export interface SlurmCluster {
  dir: string;
  /** SLURM_CONF and nothing else: what a worker and a client need to reach the cluster. */
  env: { SLURM_CONF: string };
  nodes: string[];
  /** Seconds from nothing to both nodes idle. */
  startSec: number;
  /** `squeue` rows of this cluster: `jobid|name|state|nodelist`. */
  jobs(): string[];
  /** Job steps still known to slurmctld (`squeue --steps`). */
  steps(): string[];
  stop(): Promise<void>;
}

const NODES = ['n1', 'n2'];

/** Slurm and munge are installed (scripts/setup-cluster.sh installs them as root). */
export function slurmInstalled(): boolean {
  return ['/usr/sbin/slurmctld', '/usr/sbin/slurmd', '/usr/sbin/munged', '/usr/sbin/mungekey'].every((f) => existsSync(f));
}

function slurmConf(d: string, ports: { ctld: number; nodes: number[] }): string {
  const host = hostname();
  return [
    'ClusterName=infir2test',
    'SlurmctldHost=localhost',
    `SlurmctldPort=${ports.ctld}`,
    'SlurmUser=root',
    'SlurmdUser=root',
    'AuthType=auth/munge',
    'CredType=cred/munge',
    `AuthInfo=socket=${d}/munge/run/munge.socket.2`,
    `StateSaveLocation=${d}/state`,
    `SlurmdSpoolDir=${d}/spool/%n`,
    `SlurmctldPidFile=${d}/run/slurmctld.pid`,
    `SlurmdPidFile=${d}/run/slurmd-%n.pid`,
    `SlurmctldLogFile=${d}/log/slurmctld.log`,
    `SlurmdLogFile=${d}/log/slurmd-%n.log`,
    // Only the cgroup tracker kills a step's every process (a setsid child, one that ignores SIGTERM).
    'ProctrackType=proctrack/cgroup',
    'TaskPlugin=task/cgroup',
    'SelectType=select/cons_tres',
    'SelectTypeParameters=CR_Core_Memory',
    'MpiDefault=none',
    'JobAcctGatherType=jobacct_gather/none',
    'AccountingStorageType=accounting_storage/none',
    'ReturnToService=2',
    'KillWait=2',
    'MinJobAge=5',
    'SchedulerParameters=sched_min_interval=0',
    ...NODES.map((n, i) => `NodeName=${n} NodeHostname=${host} NodeAddr=127.0.0.1 Port=${ports.nodes[i]} CPUs=2 RealMemory=4000`),
    `PartitionName=debug Nodes=${NODES.join(',')} Default=YES MaxTime=INFINITE State=UP`,
    '',
  ].join('\n');
}

/** A daemon in the foreground, in its own process group, its output into `log`. */
function daemon(file: string, args: string[], env: NodeJS.ProcessEnv, log: string): ChildProcess {
  const out = spawn('sh', ['-c', `exec "$0" "$@" >>${log} 2>&1`, file, ...args], { env, stdio: 'ignore', detached: true });
  out.unref();
  return out;
}

export async function startSlurm(dir: string): Promise<SlurmCluster> {
  const t0 = Date.now();
  for (const sub of ['munge/key', 'munge/run', 'munge/log', 'etc', 'state', 'spool', 'run', 'log']) mkdirSync(join(dir, sub), { recursive: true });
  // munged refuses a key directory others can read, and a socket directory they cannot.
  execFileSync('chmod', ['0700', join(dir, 'munge', 'key')]);
  execFileSync('chmod', ['0755', join(dir, 'munge', 'run')]);
  const key = join(dir, 'munge', 'key', 'munge.key');
  execFileSync('/usr/sbin/mungekey', ['--create', `--keyfile=${key}`, '--force']);
  const conf = join(dir, 'etc', 'slurm.conf');
  const ports = { ctld: await freePort(), nodes: [await freePort(), await freePort()] };
  writeFileSync(conf, slurmConf(dir, ports));
  writeFileSync(join(dir, 'etc', 'cgroup.conf'), 'CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\nConstrainRAMSpace=yes\nConstrainSwapSpace=yes\n');
  const env = { ...process.env, SLURM_CONF: conf };
  const procs: ChildProcess[] = [];
  const m = join(dir, 'munge');
  procs.push(
    daemon('/usr/sbin/munged', ['-F', `--key-file=${key}`, `--socket=${m}/run/munge.socket.2`, `--pid-file=${m}/run/munged.pid`, `--log-file=${m}/log/munged.log`, `--seed-file=${m}/seed`, '--force'], env, join(dir, 'log', 'munged.out')),
  );
  const socket = join(m, 'run', 'munge.socket.2');
  for (let i = 0; !existsSync(socket); i++) {
    if (i > 100) throw new Error(`munged did not start: ${readFileSync(join(dir, 'log', 'munged.out'), 'utf8')}`);
    await sleep(50);
  }
  procs.push(daemon('/usr/sbin/slurmctld', ['-D', '-c', '-f', conf], env, join(dir, 'log', 'slurmctld.out')));
  for (const n of NODES) procs.push(daemon('/usr/sbin/slurmd', ['-D', '-N', n, '-f', conf], env, join(dir, 'log', `slurmd-${n}.out`)));

  const run = (cmd: string, args: string[]) => execFileSync(cmd, args, { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const states = run('sinfo', ['-h', '-N', '-o', '%N %T']).trim().split('\n');
      if (states.length === NODES.length && states.every((l) => / idle$/.test(l))) break;
    } catch {
      /* slurmctld not answering yet */
    }
    if (Date.now() > deadline) throw new Error(`Slurm did not come up: ${readFileSync(join(dir, 'log', 'slurmctld.log'), 'utf8').slice(-2000)}`);
    await sleep(100);
  }
  const cluster: SlurmCluster = {
    dir,
    env: { SLURM_CONF: conf },
    nodes: NODES,
    startSec: (Date.now() - t0) / 1000,
    jobs: () => run('squeue', ['-h', '-o', '%i|%j|%T|%N']).split('\n').filter(Boolean),
    steps: () => run('squeue', ['-h', '--steps', '-o', '%i|%j']).split('\n').filter(Boolean),
    async stop() {
      // Daemons first (slurmd, then slurmctld), munged last: slurmd talks to munge while it stops.
      for (const p of procs.reverse()) {
        if (p.pid === undefined) continue;
        try {
          process.kill(-p.pid, 'SIGTERM');
        } catch {
          continue;
        }
        for (let i = 0; i < 50 && existsSync(`/proc/${p.pid}`) && !/\) Z/.test(readFileSync(`/proc/${p.pid}/stat`, 'utf8')); i++) await sleep(100);
        try {
          process.kill(-p.pid, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
      // The cgroup plugin's freezer directories outlive the daemons.
      const freezer = '/sys/fs/cgroup/freezer';
      if (existsSync(freezer)) {
        for (const d of readdirSync(freezer).filter((n) => NODES.some((x) => n === `slurm_${x}`))) removeTree(join(freezer, d));
      }
    },
  };
  return cluster;
}

/** rmdir a cgroup tree bottom-up (cgroup directories are removed empty, never with their files). */
function removeTree(dir: string): void {
  try {
    for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) removeTree(join(dir, e.name));
    rmdirSync(dir);
  } catch {
    /* still busy or gone */
  }
}
