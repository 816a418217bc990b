/**
 * GPUs claimed across processes on one host. A worker counts its GPU slots in memory, which two workers given
 * the same `--gpus` (or inheriting the same CUDA_VISIBLE_DEVICES) do not share: both would hand GPU 0 to a
 * trainer, an OOM or a silent 2× slowdown of both jobs. So a GPU is also claimed in the host directory, one file
 * per GPU, for as long as a trainer may run on it.
 *
 * A claim names its worker and, once launched, the trainer and its launch token. It is stale only when both are
 * gone: a trainer outliving a SIGKILLed worker still holds its GPU until the next attempt of its step stops it, and
 * "gone" means no process of the launch is left (ranks outlive a SIGKILLed torchrun in sessions of their own:
 * util/process-tree.ts). The OS releases nothing here, so liveness is read from /proc, with start times to tell a
 * reused pid apart.
 */
import { linkSync, mkdirSync, rmdirSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { writeFileAtomic } from '../util/atomic-write.js';
import { hostSubdir, processAlive, thisProcess, type ProcessId } from '../util/host-dir.js';
import { processStartTicks, trainerGroupAlive } from '../util/process-group.js';
import { treeAlive } from '../util/process-tree.js';
import { processFacts } from '../util/process-identity.js';
import { readFileSafe } from '../util/safe-fs.js';

export interface GpuClaimInfo {
  gpu: string;
  worker: ProcessId;
  /** The process the worker launched (the launcher), once launched. */
  trainer: ProcessId | null;
  /** The launch token every process of the trainer carries (absent: a claim written before it, judged by `trainer`'s group). */
  launch?: string;
  /** Who uses it: the step's workflow id and attempt. */
  owner: string;
  since: string;
  /** Unique per claim: a release removes only its own. */
  token: string;
}

/** A stale-claim sweep left by a process that died inside it is broken after this long. */
const SWEEP_LOCK_STALE_MS = 10_000;

export class GpuClaim {
  constructor(
    readonly file: string,
    private info: GpuClaimInfo,
  ) {}

  get gpu(): string {
    return this.info.gpu;
  }

  /** Record the trainer, so that the GPU stays claimed while any process of it lives even if this worker dies. */
  setTrainer(pid: number, launch: string): void {
    this.info = { ...this.info, trainer: { pid, startTicks: processStartTicks(pid) }, launch };
    writeFileAtomic(this.file, JSON.stringify(this.info));
  }

  release(): void {
    if (readClaim(this.file)?.token !== this.info.token) return;
    try {
      unlinkSync(this.file);
    } catch {
      /* already gone */
    }
  }
}

export class HostGpuClaims {
  constructor(readonly dir: string = hostSubdir('gpus')) {}

  private file(gpu: string): string {
    return join(this.dir, `gpu-${gpu}.json`);
  }

  /** Claim `gpu` for `owner`, or say who holds it. A dead holder's claim is cleared first. */
  tryClaim(gpu: string, owner: string): { claim: GpuClaim } | { holder: GpuClaimInfo } {
    const file = this.file(gpu);
    const info: GpuClaimInfo = { gpu, worker: thisProcess(), trainer: null, owner, since: new Date().toISOString(), token: randomUUID() };
    for (let tries = 0; tries < 3; tries++) {
      // Written whole beside the claim, then linked into place: link fails if the claim exists, so a reader never
      // sees a half-written claim and only one claimant wins.
      const tmp = `${file}.${info.token}`;
      writeFileSync(tmp, JSON.stringify(info), { flag: 'wx' });
      try {
        linkSync(tmp, file);
        return { claim: new GpuClaim(file, info) };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      } finally {
        unlinkSync(tmp);
      }
      const held = readClaim(file);
      if (held && claimLive(held)) return { holder: held };
      this.sweep(file, held?.token ?? null);
    }
    const held = readClaim(file);
    if (held) return { holder: held };
    throw new Error(`could not claim GPU ${gpu} in ${this.dir}`);
  }

  /** The live holder of `gpu`, if any. */
  holder(gpu: string): GpuClaimInfo | null {
    const held = readClaim(this.file(gpu));
    return held && claimLive(held) ? held : null;
  }

  /**
   * Remove a dead holder's claim. Two sweepers must not both remove: the second would remove the fresh claim the
   * first one's owner just made. So the removal happens under a directory made exclusively (mkdir is atomic), and
   * only if the claim still carries the dead holder's token.
   */
  private sweep(file: string, staleToken: string | null): void {
    const gate = `${file}.sweep`;
    try {
      mkdirSync(gate);
    } catch {
      try {
        if (Date.now() - statSync(gate).mtimeMs > SWEEP_LOCK_STALE_MS) rmdirSync(gate);
      } catch {
        /* removed meanwhile */
      }
      return;
    }
    try {
      const now = readClaim(file);
      if (now?.token === staleToken || (now === null && staleToken === null)) {
        try {
          unlinkSync(file);
        } catch {
          /* gone */
        }
      }
    } finally {
      rmdirSync(gate);
    }
  }
}

/**
 * A claim and the uid that wrote it; null while unreadable. The directory is every local user's: a link, a FIFO or
 * a hard link there is no claim (read without following or blocking: util/safe-fs.ts).
 */
function readClaim(file: string): (GpuClaimInfo & { fileUid?: number }) | null {
  try {
    const r = readFileSafe(file, { maxBytes: 64 * 1024, oneLink: true });
    return r && { ...(JSON.parse(r.text) as GpuClaimInfo), fileUid: r.stat.uid };
  } catch {
    return null;
  }
}

function trainerLive(c: GpuClaimInfo): boolean {
  if (typeof c.launch === 'string' && c.launch) return treeAlive(c.launch);
  return c.trainer !== null && trainerGroupAlive(c.trainer.pid, c.trainer.startTicks);
}

/**
 * A live holder, written by the user it runs as (nobody can hold a GPU in the name of root's process). A trainer
 * group whose leader is gone is judged by the claim alone (the kernel reuses no pid a group still holds).
 */
function claimLive(c: GpuClaimInfo & { fileUid?: number }): boolean {
  const own = (pid: number) => {
    const facts = processFacts(pid);
    return c.fileUid === undefined || facts === null || facts.uid === c.fileUid;
  };
  return (processAlive(c.worker) && own(c.worker.pid)) || (trainerLive(c) && (c.trainer === null || own(c.trainer.pid)));
}

/** One line for a wait: who holds a GPU. */
export function holderWords(h: GpuClaimInfo): string {
  const trainer = h.trainer ? `, trainer pid ${h.trainer.pid}` : '';
  const worker = processAlive(h.worker) ? `worker pid ${h.worker.pid}` : `a trainer whose worker (pid ${h.worker.pid}) is gone`;
  return `GPU ${h.gpu} is held by ${h.owner} (${worker}${trainer})`;
}
