/**
 * The worker's GPUs as slots. A step that needs k GPUs waits for k free ones and runs with exactly those in
 * CUDA_VISIBLE_DEVICES; a CPU-only step (k = 0) takes one of the worker's CPU slots instead.
 */
export class NotEnoughGpusError extends Error {}

export class GpuSlots {
  private free: string[];
  private waiters: Array<() => void> = [];

  constructor(readonly gpus: string[]) {
    this.free = [...gpus];
  }

  /** Resolve with k GPU ids; throws at once if the worker has fewer than k in all. */
  async acquire(k: number, signal?: AbortSignal): Promise<string[]> {
    if (k > this.gpus.length) {
      throw new NotEnoughGpusError(`the step needs ${k} GPUs per node but this worker has ${this.gpus.length} (${this.gpus.join(',') || 'none'})`);
    }
    while (this.free.length < k) {
      if (signal?.aborted) throw signal.reason ?? new Error('aborted');
      await new Promise<void>((resolve) => {
        const wake = () => {
          signal?.removeEventListener('abort', wake);
          resolve();
        };
        this.waiters.push(wake);
        signal?.addEventListener('abort', wake, { once: true });
      });
    }
    return this.free.splice(0, k);
  }

  /** GPUs free right now. */
  get freeCount(): number {
    return this.free.length;
  }

  release(ids: string[]): void {
    this.free.push(...ids);
    this.free.sort((a, b) => this.gpus.indexOf(a) - this.gpus.indexOf(b));
    const ws = this.waiters;
    this.waiters = [];
    ws.forEach((w) => w());
  }
}
