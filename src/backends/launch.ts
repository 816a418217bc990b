/** How a pool starts a distributed PyTorch program: torchrun (rendezvous), srun + torchrun, or standalone. */
import type { Pool, Recipe } from '../recipe/schema.js';

/** A launcher that starts several processes (torchrun or srun + torchrun), as opposed to one (`local`, `ray`). */
export function distributedLauncher(pool: Pick<Pool, 'launcher'>): boolean {
  return pool.launcher === 'torchrun' || pool.launcher === 'slurm';
}

export function torchLaunch(software: Recipe['software'], pool: Pool, nodes: number, ranksPerNode: number): string[] {
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
    return [software.srun, `--nodes=${nodes}`, '--ntasks-per-node=1', ...gpus, '--kill-on-bad-exit=1', ...torchrun];
  }
  return torchrun;
}
