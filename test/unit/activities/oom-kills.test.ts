/**
 * watchOomKills: finds the OOM-kill counters of a process (its memory cgroup in v1, v2 or a container's
 * namespaced mount, and the node's /proc/vmstat) on a fake /proc and /sys/fs/cgroup, and reports which rose.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { watchOomKills } from '../../../src/activities/oom-kills.js';

function fakeSystem(files: Record<string, string>) {
  const root = mkdtempSync(join(tmpdir(), 'oom-'));
  const write = (rel: string, text: string) => {
    mkdirSync(dirname(join(root, rel)), { recursive: true });
    writeFileSync(join(root, rel), text);
  };
  for (const [rel, text] of Object.entries(files)) write(rel, text);
  return { root, write, paths: { proc: join(root, 'proc'), cgroupRoot: join(root, 'cg') } };
}

const vmstat = (n: number) => `pgfault 100\noom_kill ${n}\npgmajfault 2\n`;
const v1 = (n: number) => `oom_kill_disable 0\nunder_oom 0\noom_kill ${n}\n`;

describe('watchOomKills', () => {
  it("reports a kill in the process's cgroup v2 memory.events before the node's", () => {
    const sys = fakeSystem({
      'proc/42/cgroup': '0::/slurm/job_9/step_0\n',
      'cg/slurm/job_9/step_0/memory.events': 'low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n',
      'proc/vmstat': vmstat(7),
    });
    const since = watchOomKills(42, sys.paths)!;
    expect(since()).toBeNull();
    sys.write('cg/slurm/job_9/step_0/memory.events', 'low 0\nhigh 0\nmax 5\noom 2\noom_kill 3\n');
    sys.write('proc/vmstat', vmstat(9));
    expect(since()).toEqual({ count: 2, file: join(sys.paths.cgroupRoot, 'slurm/job_9/step_0/memory.events') });
  });

  it('reads cgroup v1 memory.oom_control on a hybrid host', () => {
    const sys = fakeSystem({
      'proc/42/cgroup': '9:pids:/job\n4:memory:/job/trainer\n1:cpu,cpuacct:/job\n0::/\n',
      'cg/memory/job/trainer/memory.oom_control': v1(3),
      'proc/vmstat': vmstat(7),
    });
    const since = watchOomKills(42, sys.paths)!;
    sys.write('cg/memory/job/trainer/memory.oom_control', v1(4));
    expect(since()).toEqual({ count: 1, file: join(sys.paths.cgroupRoot, 'memory/job/trainer/memory.oom_control') });
  });

  it('falls back to the mount root inside a container whose cgroup path is the host one', () => {
    const sys = fakeSystem({ 'proc/42/cgroup': '4:memory:/kubepods/pod1/abc\n', 'cg/memory/memory.oom_control': v1(0) });
    const since = watchOomKills(42, sys.paths)!;
    sys.write('cg/memory/memory.oom_control', v1(1));
    expect(since()?.file).toBe(join(sys.paths.cgroupRoot, 'memory/memory.oom_control'));
  });

  it("catches a kill outside the process's cgroup (a rank moved to its own) through the node's counter", () => {
    const sys = fakeSystem({ 'proc/42/cgroup': '4:memory:/job\n', 'cg/memory/job/memory.oom_control': v1(0), 'proc/vmstat': vmstat(7) });
    const since = watchOomKills(42, sys.paths)!;
    sys.write('proc/vmstat', vmstat(8));
    expect(since()).toEqual({ count: 1, file: join(sys.paths.proc, 'vmstat') });
  });

  it('is null where the kernel exposes no counter', () => {
    const sys = fakeSystem({ 'proc/42/cgroup': '0::/\n', 'proc/vmstat': 'pgfault 1\n' });
    expect(watchOomKills(42, sys.paths)).toBeNull();
    expect(watchOomKills(7, sys.paths)).toBeNull();
  });

  it('reads this machine (any answer but a crash)', () => {
    const since = watchOomKills(process.pid);
    if (since) expect(since()).toBeNull();
  });
});
