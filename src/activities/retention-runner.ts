/**
 * The step's checkpoint retention while it trains: after each checkpoint the trainer reports saved (and once at
 * the attempt's start), the policy is applied to the step's checkpoint root (rundir/retention.ts), one pass at a
 * time, in the background of the supervisor. The step's own lock keeps every other writer out of the root; pins
 * keep readers safe. A deletion that fails is noted in the step's log, never fails the step.
 */
import { applyRetention } from '../rundir/retention.js';
import { errnoWords } from '../util/dir-probe.js';
import type { Attempt } from './attempt.js';

export class Pruner {
  private running: Promise<void> = Promise.resolve();
  private pending = false;

  constructor(private readonly a: Attempt) {}

  /** Apply the policy soon (a request while a pass is queued joins it). */
  request(): void {
    const ck = this.a.step.checkpoint;
    if (!ck?.retention || this.pending) return;
    this.pending = true;
    const spec = ck.retention;
    this.running = this.running.then(async () => {
      this.pending = false;
      try {
        const gone = await applyRetention(ck.dir, spec, `${this.a.step.id} attempt ${this.a.input.attempt}`);
        if (gone.length) this.a.note(`retention (${spec.summary}): deleted checkpoint${gone.length > 1 ? 's' : ''} ${gone.join(', ')}`);
      } catch (err) {
        this.a.note(`retention: could not apply ${spec.summary} to ${ck.dir}: ${errnoWords(err)}`);
      }
    });
  }

  /** Resolves when no pass is running or queued. */
  async idle(): Promise<void> {
    let seen: Promise<void>;
    do {
      seen = this.running;
      await seen;
    } while (seen !== this.running);
  }
}
