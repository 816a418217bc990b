/**
 * Worker hosts for the cluster tier: machines a worker runs on, apart from the control host (this machine, where
 * PostgreSQL, the Temporal server and the CLI are). Each host has its own directory with a working directory,
 * HOME, TMPDIR and infir2 host directory (INFIR2_HOST_DIR: its worker registry and GPU claims), and its own
 * environment, which is all its worker sees. Everything the hosts share is what a cluster shares: the run
 * directory and the install (the repository, its .venv) on a shared filesystem.
 *
 * As root, each host is also a network namespace (`ip netns`) joined to the control host by its own veth link:
 * its worker has its own address, no loopback shared with the server, and reaches the server only over its link,
 * as a GPU node reaches a control host. Nothing leaves the machine: the links end in this kernel. Without root
 * (or without `ip`), the hosts are directories only and `namespaces` says so.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { pidAlive } from '../../src/util/process-group.js';

export interface WorkerHost {
  name: string;
  /** Its network namespace, or null when the hosts share this machine's network. */
  ns: string | null;
  /** Its own address (on its link), or 127.0.0.1. */
  address: string;
  /** The control host's address on this host's link. */
  gateway: string;
  dir: string;
  cwd: string;
  home: string;
  tmp: string;
  hostDir: string;
  /** What goes before a command line to run it on this host (`ip netns exec NS`, which execs it). */
  wrap: string[];
}

export interface HostNetwork {
  hosts: WorkerHost[];
  namespaces: boolean;
  /** Why there are no namespaces, when there are none. */
  why: string | null;
  /** An address of the control host that every host reaches: what the Temporal server binds. */
  controlAddress: string;
  teardown(): void;
}

const NS_PREFIX = 'infir2t-';

function ip(args: string[]): void {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${(r.stderr || r.error?.message || '').trim()}`);
}


/** Namespaces a test process that has died left behind (named `infir2t-<pid>-<i>`). */
function sweepStale(): void {
  const r = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  for (const line of (r.stdout ?? '').split('\n')) {
    const m = /^(infir2t-(\d+)-\d+)\b/.exec(line);
    if (m && !pidAlive(Number(m[2]))) spawnSync('ip', ['netns', 'del', m[1]!]);
  }
}

function canNamespace(): string | null {
  if (process.getuid?.() !== 0) return 'not root';
  const r = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) return `ip netns: ${(r.stderr || r.error?.message || '').trim()}`;
  return null;
}

/**
 * The hosts `names`, under `base`. Link i (from 1) is 10.<b>.i.0/24: the control host is .1 on it, the worker
 * host .2, and the worker host's default route is its link. `b` is taken from our pid, so that two test
 * processes at once do not pick the same subnets.
 */
export function makeHosts(base: string, names: string[]): HostNetwork {
  const why = canNamespace();
  const b = 200 + (process.pid % 50);
  const made: string[] = [];
  const teardown = () => {
    for (const ns of made.splice(0)) spawnSync('ip', ['netns', 'del', ns]); // the veth pair goes with it
  };
  const hosts: WorkerHost[] = [];
  try {
    if (!why) sweepStale();
    names.forEach((name, i) => {
      const dir = join(base, name);
      const host: WorkerHost = {
        name,
        ns: null,
        address: '127.0.0.1',
        gateway: '127.0.0.1',
        dir,
        cwd: join(dir, 'work'),
        home: join(dir, 'home'),
        tmp: join(dir, 'tmp'),
        hostDir: join(dir, 'infir2-host'),
        wrap: [],
      };
      for (const d of [host.cwd, host.home, host.tmp]) mkdirSync(d, { recursive: true });
      if (!why) {
        const ns = `${NS_PREFIX}${process.pid}-${i + 1}`;
        const link = `i2t${process.pid}h${i + 1}`.slice(-15); // IFNAMSIZ
        const net = `10.${b}.${i + 1}`;
        ip(['netns', 'add', ns]);
        made.push(ns);
        ip(['link', 'add', link, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
        ip(['addr', 'add', `${net}.1/24`, 'dev', link]);
        ip(['link', 'set', link, 'up']);
        ip(['-n', ns, 'link', 'set', 'lo', 'up']);
        ip(['-n', ns, 'addr', 'add', `${net}.2/24`, 'dev', 'eth0']);
        ip(['-n', ns, 'link', 'set', 'eth0', 'up']);
        ip(['-n', ns, 'route', 'add', 'default', 'via', `${net}.1`]);
        Object.assign(host, { ns, address: `${net}.2`, gateway: `${net}.1`, wrap: ['ip', 'netns', 'exec', ns] });
      }
      hosts.push(host);
    });
  } catch (err) {
    teardown();
    throw err;
  }
  // One address of the control host for all: that of its first link. The others reach it through their own link
  // (their default route), as a node reaches a server bound to one of its control host's interfaces.
  return { hosts, namespaces: !why, why, controlAddress: hosts[0]?.gateway ?? '127.0.0.1', teardown };
}

/** The environment a worker on `host` has: nothing of the test's, only what an operator would set on that node. */
export function hostEnv(host: WorkerHost, vars: Record<string, string>): Record<string, string> {
  return {
    PATH: '/usr/local/bin:/usr/bin:/bin',
    LANG: 'C.UTF-8',
    HOME: host.home,
    TMPDIR: host.tmp,
    INFIR2_HOST_DIR: host.hostDir,
    ...vars,
  };
}

/** The network namespace a process is in, as `ip netns identify` names it ('' for this machine's). */
export function namespaceOf(pid: number): string {
  return spawnSync('ip', ['netns', 'identify', String(pid)], { encoding: 'utf8' }).stdout.trim();
}
