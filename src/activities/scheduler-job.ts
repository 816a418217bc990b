/**
 * Which batch-scheduler job an attempt runs as. srun gets its job id only once slurmctld has allocated the
 * nodes, and prints it nowhere by default, so the supervisor asks the scheduler (the plan's probe, `squeue
 * --name=<the launch's job name> --format=%i|%N`) until the job shows, then puts it in the progress that
 * `status` shows, and notes it in the step's log: the id an operator needs for `sacct`, `scontrol` or the
 * cluster's own dashboards.
 */
import { execa } from 'execa';
import type { SchedulerJob } from '../plan/contracts.js';
import type { Attempt } from './attempt.js';
import { fillArgv } from './trainer-process.js';

/** How often the scheduler is asked, and for how long (an allocation can queue behind other jobs). */
const PROBE_EVERY_MS = 1_000;
const PROBE_TIMEOUT_MS = 10_000;
const GIVE_UP_AFTER_MS = 30 * 60_000;

/** The first `id|nodes` row of the probe's output; nodes `(null)` or empty while the job is pending. */
export function parseJobRow(scheduler: SchedulerJob['scheduler'], stdout: string): SchedulerJob | null {
  for (const line of stdout.split('\n')) {
    const m = /^\s*(\d+(?:_\d+)?)\|(.*)$/.exec(line.trim());
    if (!m) continue;
    const nodes = m[2]!.trim();
    return { scheduler, id: m[1]!, nodes: nodes === '(null)' ? '' : nodes };
  }
  return null;
}

/**
 * Poll until the job is placed on nodes (then record it and stop), `stop` aborts, or the give-up time passes.
 * Never throws: not finding the job id costs only the line in `status`.
 */
export async function watchSchedulerJob(a: Attempt, env: Record<string, string>, stop: AbortSignal): Promise<void> {
  const spec = a.step.job;
  if (!spec) return;
  const [file, ...args] = fillArgv(spec.probe.argv, a.ids);
  if (!file) return;
  const deadline = Date.now() + GIVE_UP_AFTER_MS;
  let said = '';
  while (!stop.aborted && Date.now() < deadline) {
    const r = await execa(file, args, { env, cwd: a.step.command.cwd, reject: false, timeout: PROBE_TIMEOUT_MS, cancelSignal: stop });
    const job = r.exitCode === 0 ? parseJobRow(spec.scheduler, String(r.stdout)) : null;
    // A pending job (no nodes yet: the previous attempt's job may still hold them) is noted, then again once placed.
    if (job && (job.id !== a.progress.job?.id || job.nodes !== a.progress.job?.nodes)) {
      a.progress.job = job;
      a.note(`${job.scheduler} job ${job.id}${job.nodes ? ` on ${job.nodes}` : ' (pending)'}`);
      a.ctx.heartbeat({ ...a.progress, updatedAt: new Date().toISOString() });
    }
    if (job?.nodes) return;
    if (r.exitCode !== 0 && !stop.aborted) {
      const why = `${spec.probe.argv[0]}: ${String(r.stderr || r.shortMessage).trim().split('\n').at(-1)}`;
      if (why !== said) a.note(`could not ask the scheduler for the job: ${why}`);
      said = why;
    }
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, PROBE_EVERY_MS);
      stop.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
    });
  }
}
