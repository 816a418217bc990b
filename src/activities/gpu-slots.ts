/**
 * The worker's GPUs as slots. A step that needs k GPUs waits for k free ones and runs with exactly those in
 * CUDA_VISIBLE_DEVICES; a CPU-only step (k = 0) takes one of the worker's CPU slots instead.
 *
 * Free means free in this worker and unclaimed on the host (host-gpu-claims.ts): another worker given the same
 * GPU makes a step wait, with the holder named, instead of sharing the device.
 */
import { GpuClaim, HostGpuClaims, holderWords } from './host-gpu-claims.js';

export class NotEnoughGpusError extends Error {}

/** How often a step waiting on another process's claim looks again: claims elsewhere send no wake-up. */
const HOST_POLL_MS = 1_000;

export class GpuSlots {
  private free: string[];
  private waiters: Array<() => void> = [];
  private claims = new Map<string, GpuClaim>();

  /** `host`: claims across processes; null counts this worker's slots only (tests of the counting alone). */
  constructor(
    readonly gpus: string[],
    private readonly host: HostGpuClaims | null = gpus.length ? new HostGpuClaims() : null,
  ) {
    this.free = [...gpus];
  }

  /**
   * Resolve with k GPU ids; throws at once if the worker has fewer than k in all. `onWait` hears why the step
   * waits (and null once it has them), each time the reason changes.
   */
  async acquire(k: number, signal?: AbortSignal, owner = `pid ${process.pid}`, onWait?: (why: string | null) => void): Promise<string[]> {
    if (k > this.gpus.length) {
      throw new NotEnoughGpusError(`the step needs ${k} GPUs per node but this worker has ${this.gpus.length} (${this.gpus.join(',') || 'none'})`);
    }
    let said = null as string | null;
    const say = (why: string | null) => {
      if (why !== said) onWait?.(why);
      said = why;
    };
    for (;;) {
      if (signal?.aborted) throw signal.reason ?? new Error('aborted');
      if (this.free.length >= k) {
        const got = this.claimHost(k, owner);
        if (Array.isArray(got)) {
          this.free = this.free.filter((g) => !got.includes(g));
          say(null);
          return got;
        }
        say(`GPUs: needs ${k}; ${got}`);
      } else {
        say(`GPUs: needs ${k}, ${this.free.length} of this worker's ${this.gpus.length} free`);
      }
      await this.wake(signal, said?.includes(' is held by ') ? HOST_POLL_MS : null);
    }
  }

  /** Claim k of the free GPUs on the host: their ids, or why not (all claims made are given back). */
  private claimHost(k: number, owner: string): string[] | string {
    if (k === 0 || !this.host) return this.free.slice(0, k);
    const got: GpuClaim[] = [];
    const held: string[] = [];
    for (const g of this.free) {
      if (got.length === k) break;
      const r = this.host.tryClaim(g, owner);
      if ('claim' in r) got.push(r.claim);
      else held.push(holderWords(r.holder));
    }
    if (got.length === k) {
      for (const c of got) this.claims.set(c.gpu, c);
      return got.map((c) => c.gpu);
    }
    for (const c of got) c.release();
    return held.join('; ');
  }

  private wake(signal: AbortSignal | undefined, pollMs: number | null): Promise<void> {
    return new Promise<void>((resolve) => {
      const t: NodeJS.Timeout | null = pollMs === null ? null : setTimeout(() => done(), pollMs);
      const done = () => {
        if (t) clearTimeout(t);
        this.waiters = this.waiters.filter((w) => w !== done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      this.waiters.push(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /** GPUs free in this worker right now. */
  get freeCount(): number {
    return this.free.length;
  }

  /** Record the trainer on the GPUs' host claims: they stay claimed while any process of it lives, even past this worker. */
  setTrainer(ids: string[], pid: number, launch: string): void {
    for (const id of ids) this.claims.get(id)?.setTrainer(pid, launch);
  }

  release(ids: string[]): void {
    for (const id of ids) {
      this.claims.get(id)?.release();
      this.claims.delete(id);
    }
    this.free.push(...ids);
    this.free.sort((a, b) => this.gpus.indexOf(a) - this.gpus.indexOf(b));
    const ws = this.waiters;
    this.waiters = [];
    ws.forEach((w) => w());
  }
}
