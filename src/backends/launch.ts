/** How a pool starts a distributed PyTorch program: torchrun (rendezvous), srun + torchrun, or standalone. */
import { join } from 'node:path';
import { LAUNCHER_FILE, LAUNCHER_PYTHON_FLAGS } from '../plan/types.js';
import type { Pool, Recipe } from '../recipe/schema.js';
import type { StepBody } from './types.js';

/** A launcher that starts several processes (torchrun or srun + torchrun), as opposed to one (`local`, `ray`). */
export function distributedLauncher(pool: Pick<Pool, 'launcher'>): boolean {
  return pool.launcher === 'torchrun' || pool.launcher === 'slurm';
}

/**
 * The Slurm job name of a step's launch: unique per attempt and launch (the supervisor fills `{attempt}` and
 * `{launch}`), so that squeue finds this launch's job and scancel ends only it.
 */
export function slurmJobName(runId: string, stepId: string): string {
  return `infir2-${runId}-${stepId.replace(/\./g, '-')}-a{attempt}-{launch}`;
}

/**
 * What a step launched by srun adds to its body: the job squeue finds (its id and nodes, for `status`), and
 * scancel of it when an attempt ends without success, waiting until squeue no longer lists it. srun forwards a
 * SIGTERM to its tasks, and Slurm cancels a step whose srun was SIGKILLed (measured on 22.05); the scancel is for
 * whatever else leaves a job running without its attempt (an srun cut off from its worker), and the attempt
 * that takes over the step's directory runs it too (lock.ts).
 */
export function slurmTracking(software: Recipe['software'], pool: Pool, jobName: string): Pick<StepBody, 'job' | 'onStop' | 'nodeLaunchers'> {
  if (pool.launcher !== 'slurm') return {};
  return {
    // srun runs the launcher on every node (torchLaunch): a stop reaches it through its stop file, never a signal.
    nodeLaunchers: true,
    job: { scheduler: 'slurm', name: jobName, probe: { argv: [software.squeue, '--noheader', `--name=${jobName}`, '--format=%i|%N'] } },
    // scancel returns at once; the ranks exit (saving, on SIGTERM) within the cluster's KillWait: wait for it.
    onStop: { argv: [software.scancel, `--name=${jobName}`], untilGone: { argv: [software.squeue, '--noheader', `--name=${jobName}`, '--format=%i'] } },
  };
}

/**
 * `jobName`: the srun job's name on a slurm pool (slurmJobName); `projectRoot`: the infir2 tree, at the same path
 * on every node (it holds the launcher).
 */
export function torchLaunch(software: Recipe['software'], pool: Pool, nodes: number, ranksPerNode: number, jobName: string, projectRoot: string): string[] {
  if (pool.launcher === 'local') {
    // FIXES torchrun-local-pool: a free port, so single-node jobs on one machine never collide.
    return [software.torchrun, '--standalone', '--nnodes=1', `--nproc_per_node=${ranksPerNode}`, ...software.torchrunArgs];
  }
  // The InfiR2 CPT script's DISTRIBUTED_ARGS.
  const torchrun = [
    software.torchrun,
    `--nnodes=${nodes}`,
    `--nproc_per_node=${ranksPerNode}`,
    `--rdzv_endpoint=${pool.rdzvEndpoint}`,
    '--rdzv_backend=c10d',
    ...software.torchrunArgs,
  ];
  if (pool.launcher === 'slurm') {
    // One torchrun per node; they meet at the rendezvous endpoint. A CPU pool asks Slurm for no GPUs
    // (`--gpus-per-node=0` is refused by a Slurm without GRES configured).
    const gpus = pool.gpusPerNode > 0 ? [`--gpus-per-node=${Math.min(ranksPerNode, pool.gpusPerNode)}`] : [];
    // infir2's launcher is srun's task on every node, torchrun its child: it owns the node's part of the tree and
    // stops it so that Megatron saves (scancel and srun's forwarding signal every process of the step at once).
    const launcher = [software.python, ...LAUNCHER_PYTHON_FLAGS, join(projectRoot, LAUNCHER_FILE), '--'];
    return [software.srun, `--job-name=${jobName}`, `--nodes=${nodes}`, '--ntasks-per-node=1', ...gpus, '--kill-on-bad-exit=1', ...software.srunArgs, ...launcher, ...torchrun];
  }
  return torchrun;
}
