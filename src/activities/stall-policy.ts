/**
 * How long a running attempt may go without progress before it is a hang: learned from the attempt's own rhythm.
 *
 * A fixed stall timeout must cover a step's slowest healthy silence (a 20-minute checkpoint load, a long save),
 * so at 7B scale it was 2 h, as slow as the InfiR2 scripts' NCCL timeout, with every GPU idle meanwhile. Here the
 * limit follows the phase the attempt is in:
 *
 *   startup     from the launch to the first iterations (process start, checkpoint load, data index, the first
 *               slow iterations), and again whenever the trainer says it is loading a checkpoint: `startupSec`
 *   saving      from "saving checkpoint" (or an iteration that is a multiple of the save interval, for trainers
 *               that do not say) to the next progress: `saveSec` until the step has made a save; then
 *               `saveFactor` × the longest save it has made (this attempt's or an earlier one's), at least the
 *               training limit and at most `saveSec`. A rank that hangs during a save of a 7B model, whose
 *               saves took two minutes, is caught in minutes, not after the 30-minute allowance
 *   evaluating  after an iteration that is a multiple of the evaluation interval: at least `evalSec`
 *   training    once `MIN_GAPS` gaps between iterations have been seen: `max(floorSec, factor × g)`, where g is a
 *               high percentile of the gaps (p95: steady training) or their maximum (RL rollouts, evaluations,
 *               whose lengths vary several-fold), the way NVIDIA's fault-tolerance package derives its rank
 *               timeouts from observed heartbeat intervals
 *
 * and `capSec` (the recipe's `stallTimeout`) bounds every limit. Gaps that ended a save, an evaluation or a load
 * are not part of the rhythm. Pure functions of progress events and timestamps: tested with tables.
 */
import type { StallSpec } from '../plan/types.js';
import type { ProgressEvent } from '../engine-logs/progress-parsers.js';

export type StallPhase = 'startup' | 'saving' | 'evaluating' | 'training';

/** Gaps seen before the limit follows the rhythm. */
export const MIN_GAPS = 3;
/** The rhythm is the most recent gaps: an RL curriculum stage or a new data mix changes it. */
export const GAP_WINDOW = 100;

/** What the supervisor has seen of an attempt, folded event by event (`observe`). */
export interface Rhythm {
  /** When the attempt last made progress (a new iteration or a saved checkpoint), ms; the launch before any. */
  lastAdvance: number;
  /** When the last new iteration was seen, ms; null before the first. */
  lastIterationAt: number | null;
  lastIteration: number | null;
  /** Gaps between consecutive iterations of plain training, seconds, newest last (at most GAP_WINDOW). */
  gaps: number[];
  /** Inside a save the trainer announced, until it reports it saved (or trains on). */
  saving: boolean;
  /** The iteration of the last checkpoint the trainer reported saved: a save it has finished is not silence to allow. */
  savedIteration: number | null;
  /** The trainer said it is loading a checkpoint and has not trained since. */
  loading: boolean;
  /** The phase the current silence is in (what the next gap must not be counted as, if not training). */
  phase: StallPhase;
  /** When the current save silence began, ms (null: not in one). */
  savingSince: number | null;
  /** The longest save silence the step has made, seconds: this attempt's and earlier ones' (null: none yet). */
  longestSaveSec: number | null;
}

/** A new attempt's rhythm; `longestSaveSec`: the longest save the step's earlier attempts made. */
export function newRhythm(now: number, longestSaveSec: number | null = null): Rhythm {
  return { lastAdvance: now, lastIterationAt: null, lastIteration: null, gaps: [], saving: false, savedIteration: null, loading: false, phase: 'startup', savingSince: null, longestSaveSec };
}

const multipleOf = (it: number | null, every: number | null) => it !== null && !!every && it > 0 && it % every === 0;

/** Which phase the silence after the current state is in. */
function phaseOf(spec: StallSpec, r: Rhythm): StallPhase {
  if (r.loading || r.lastIteration === null) return 'startup';
  // A trainer that does not announce its saves is presumed saving after a multiple of the interval, until it
  // says it saved: after that the silence is the next iteration's, held to the training limit.
  if (r.saving || (multipleOf(r.lastIteration, spec.saveEvery) && r.savedIteration !== r.lastIteration)) return 'saving';
  if (multipleOf(r.lastIteration, spec.evalEvery)) return 'evaluating';
  return r.gaps.length < MIN_GAPS ? 'startup' : 'training';
}

/** Fold one progress event seen at `now` into the rhythm. */
export function observe(spec: StallSpec, r: Rhythm, ev: ProgressEvent, now: number): void {
  const advanced = ev.checkpointSaved !== undefined || (ev.iteration !== undefined && ev.iteration !== r.lastIteration);
  // A save silence ends at the next progress: its length (a save, or an iteration and the save after it for
  // trainers that do not announce theirs) is what the next saves are held to.
  if (advanced && r.phase === 'saving' && r.savingSince !== null) {
    const sec = (now - r.savingSince) / 1000;
    r.longestSaveSec = Math.max(r.longestSaveSec ?? 0, sec);
  }
  if (ev.loadingCheckpoint) r.loading = true;
  if (ev.savingCheckpoint) r.saving = true;
  if (ev.checkpointSaved !== undefined) {
    r.saving = false;
    r.savedIteration = ev.checkpointSaved;
    r.lastAdvance = now;
  }
  if (ev.iteration !== undefined && ev.iteration !== r.lastIteration) {
    // The gap that just ended counts only if it was plain training, and only going forward (a resume starts over
    // from its load). The gap is the one between progress lines, whatever iterations it covers: with
    // `--log-interval 10` a trainer is silent ten iterations at a time, and that silence is what the limit holds.
    const plain = r.phase === 'training' || (r.phase === 'startup' && r.lastIteration !== null && !r.loading);
    if (plain && r.lastIterationAt !== null && r.lastIteration !== null && ev.iteration > r.lastIteration) {
      r.gaps.push((now - r.lastIterationAt) / 1000);
      if (r.gaps.length > GAP_WINDOW) r.gaps.shift();
    }
    r.lastIteration = ev.iteration;
    r.lastIterationAt = now;
    r.lastAdvance = now;
    r.loading = false;
    r.saving = false;
  }
  const was = r.phase;
  r.phase = phaseOf(spec, r);
  if (r.phase !== 'saving') r.savingSince = null;
  else if (was !== 'saving' || advanced) r.savingSince = now;
}

/** The q-quantile (0..1) of `xs`, nearest rank. */
export function quantile(xs: readonly number[], q: number): number {
  if (!xs.length) return 0;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/** The limit of plain training from the gaps seen, seconds (before the cap). */
export function rhythmLimitSec(spec: StallSpec, gaps: readonly number[]): number {
  const g = spec.basis === 'max' ? Math.max(0, ...gaps) : quantile(gaps, 0.95);
  return Math.max(spec.floorSec, spec.factor * g);
}

export interface StallLimit {
  phase: StallPhase;
  /** Seconds of silence allowed now. */
  limitSec: number;
}

/**
 * The save allowance: `saveSec` until a save has been seen, then `saveFactor` × the longest one, never above
 * `saveSec` (the floor, the training limit, is applied by the caller). Plans recorded before it have no factor.
 */
export function saveAllowanceSec(spec: StallSpec, longestSaveSec: number | null): number {
  if (!spec.saveFactor || longestSaveSec === null) return spec.saveSec;
  return Math.min(spec.saveSec, spec.saveFactor * longestSaveSec);
}

/** The limit the current silence is held to. */
export function stallLimit(spec: StallSpec, r: Rhythm): StallLimit {
  const rhythm = r.gaps.length >= MIN_GAPS ? rhythmLimitSec(spec, r.gaps) : spec.startupSec;
  const byPhase: Record<StallPhase, number> = {
    startup: spec.startupSec,
    saving: Math.max(rhythm, saveAllowanceSec(spec, r.longestSaveSec)),
    evaluating: Math.max(rhythm, spec.evalSec),
    training: rhythm,
  };
  return { phase: r.phase, limitSec: Math.min(byPhase[r.phase], spec.capSec) };
}

/** A step recorded before adaptive limits (or one that prints no progress): its stall timeout, always. */
export function fixedStallSpec(stallTimeoutSec: number): StallSpec {
  return { startupSec: stallTimeoutSec, factor: 1, floorSec: stallTimeoutSec, basis: 'p95', saveSec: stallTimeoutSec, evalSec: stallTimeoutSec, saveEvery: null, evalEvery: null, capSec: stallTimeoutSec };
}
