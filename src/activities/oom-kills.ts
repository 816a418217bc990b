/**
 * Did the kernel's OOM killer take the trainer? A process it kills dies by SIGKILL and prints nothing, so the
 * log cannot tell an out-of-memory host from an operator's `kill -9`. The kernel counts its kills: per memory
 * cgroup (v2 `memory.events`, v1 `memory.oom_control`, both `oom_kill N`) and per node (`/proc/vmstat`). The
 * supervisor reads the counters when the trainer starts and again when it has ended.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface OomPaths {
  proc: string;
  cgroupRoot: string;
}

/** OOM kills counted since the watch began, by the first counter that rose; null when none rose. */
export type OomWatch = () => { count: number; file: string } | null;

const SYSTEM: OomPaths = { proc: '/proc', cgroupRoot: '/sys/fs/cgroup' };

function readOomKill(file: string): number | null {
  try {
    const m = /^oom_kill (\d+)$/m.exec(readFileSync(file, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/** Counter files that may hold the process's memory cgroup, most specific first. */
function candidates(pid: number, p: OomPaths): string[] {
  let lines: string[];
  try {
    lines = readFileSync(join(p.proc, String(pid), 'cgroup'), 'utf8').split('\n');
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const line of lines) {
    const [, controllers, path] = /^\d+:([^:]*):(.*)$/.exec(line) ?? [];
    if (path === undefined) continue;
    // Inside a container the cgroup file system is often mounted at the process's own cgroup (a cgroup
    // namespace, or a bind mount), so the path from /proc may not exist under the mount: try the mount's root too.
    if (controllers === '') out.push(join(p.cgroupRoot, path, 'memory.events'), join(p.cgroupRoot, 'memory.events'));
    else if (controllers!.split(',').includes('memory')) {
      out.push(join(p.cgroupRoot, 'memory', path, 'memory.oom_control'), join(p.cgroupRoot, 'memory', 'memory.oom_control'));
    }
  }
  return out;
}

/**
 * Watch the OOM-kill counters that cover process `pid`: its memory cgroup's (kills of its own processes;
 * a v1 parent does not count its children's) and the node's (any kill on the node, which also catches a rank
 * that moved to a cgroup of its own). null when the kernel exposes none (not Linux, an old kernel).
 */
export function watchOomKills(pid: number, paths: OomPaths = SYSTEM): OomWatch | null {
  const cgroup = candidates(pid, paths).find((f) => readOomKill(f) !== null);
  const files = [...(cgroup ? [cgroup] : []), join(paths.proc, 'vmstat')];
  const start = new Map<string, number>();
  for (const f of files) {
    const n = readOomKill(f);
    if (n !== null) start.set(f, n);
  }
  if (start.size === 0) return null;
  return () => {
    for (const [file, before] of start) {
      const count = (readOomKill(file) ?? before) - before;
      if (count > 0) return { count, file };
    }
    return null;
  };
}
