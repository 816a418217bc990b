/** How a pool starts a distributed PyTorch program: torchrun (rendezvous), srun + torchrun, or standalone. */
import type { Pool } from '../recipe/schema.js';
import type { Recipe } from '../recipe/schema.js';

export function torchLaunch(software: Recipe['software'], pool: Pool, nodes: number, gpusPerNode: number): string[] {
  if (pool.launcher === 'local') {
    // FIXES torchrun-local-pool: a free port, so single-node jobs on one machine never collide.
    return [software.torchrun, '--standalone', '--nnodes=1', `--nproc_per_node=${gpusPerNode}`];
  }
  // The InfiR2 CPT script's DISTRIBUTED_ARGS.
  const torchrun = [
    software.torchrun,
    `--nnodes=${nodes}`,
    `--nproc_per_node=${gpusPerNode}`,
    `--rdzv_endpoint=${pool.rdzvEndpoint}`,
    '--rdzv_backend=c10d',
  ];
  if (pool.launcher === 'slurm') {
    // One torchrun per node; they meet at the rendezvous endpoint.
    return [software.srun, `--nodes=${nodes}`, '--ntasks-per-node=1', `--gpus-per-node=${gpusPerNode}`, '--kill-on-bad-exit=1', ...torchrun];
  }
  return torchrun;
}
