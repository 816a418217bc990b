/**
 * Where a step's time went: the accounting that the supervisor records per attempt (activities/time-ledger.ts),
 * the step workflow keeps in the StepState, and `status`, the Web UI and reports read without recomputing.
 *
 * Goodput (effective training time ratio) is the share of a step's wall-clock time that produced kept training
 * progress. The rest is named, after Google's goodput library and the causes large training teams report:
 *
 *   productive  training iterations (and a tool step's whole run) whose work is kept
 *   startup     the trainer's launch to its first iteration: process start, imports, checkpoint load, data index
 *   save        checkpoint saves (from "saving checkpoint" to "successfully saved")
 *   detection   a failed attempt's last progress to the moment it was stopped or found dead (for a hang: the
 *               stall limit; for a lost worker: the heartbeat timeout)
 *   recomputed  iterations trained again after a resume (the ones past the checkpoint the failure threw away)
 *   waiting     the attempt waited for a worker to take it, for GPU slots or for the checkpoint directory's lock
 *   restart     between a failed attempt's end and the next attempt: the retry pause, the next schedule
 *   overhead    infir2's own time around the trainer: stopping a process group, stop commands, the result
 *
 * Every second of an attempt, from the moment it was scheduled to its end, is in exactly one category, so the
 * categories add up to the step's wall-clock time. Pure data and functions; a leaf, so the workflows read it.
 */
import type { FailureClass } from './types.js';

export const TIME_CATEGORIES = ['productive', 'startup', 'save', 'detection', 'recomputed', 'waiting', 'restart', 'overhead'] as const;
export type TimeCategory = (typeof TIME_CATEGORIES)[number];
/** Seconds per category (absent: 0). */
export type TimeSplit = Partial<Record<TimeCategory, number>>;

/** What the time since an attempt's last event is spent on, until the next event says otherwise. */
export type OpenPhase = 'waiting' | 'startup' | 'training' | 'save' | 'overhead';

/** One attempt's time, as the supervisor folds it event by event (and the workflow closes a lost one). */
export interface AttemptTime {
  attempt: number;
  /** When the attempt was asked for (its activity scheduled), ms since the epoch. */
  scheduledAt: number;
  /** When the attempt ended, ms; null while it runs (a heartbeat's view of it). */
  endedAt: number | null;
  /** Time up to here is in `secs`; what follows is `open` until the next event attributes it, ms. */
  attributedTo: number;
  open: OpenPhase;
  secs: TimeSplit;
  /** The highest iteration this attempt reported (null: none). */
  lastIteration: number | null;
  /** Why it ended, when it failed; null while it runs or when it succeeded. */
  failure: FailureClass | null;
  /** The longest checkpoint save the step had made by this attempt, seconds (activities/stall-policy.ts); absent: none. */
  longestSaveSec?: number;
  /** The worker that ran it, as Temporal names it (`pid@host`); absent in records written before it. */
  worker?: string;
  /**
   * Where its trainer started: the iteration of the checkpoint it loaded (null: unknown, 0: fresh), and how many
   * iterations one progress line sums up at most (Megatron's `--log-interval`). The first line's iterations are
   * then training, not startup, although no line came between the launch and it.
   */
  startedFrom?: number | null;
  iterationsPerLine?: number;
}

/** A step's time: its attempts, oldest first (the oldest folded into `earlier` past MAX_ATTEMPT_RECORDS). */
export interface StepTime {
  /** GPUs the step holds per attempt: GPU-hours lost = seconds lost × gpus. */
  gpus: number;
  attempts: AttemptTime[];
  /** Attempts no longer listed one by one: how many, their time and what their failures cost. */
  earlier?: { attempts: number; secs: TimeSplit; lostByClass: Partial<Record<FailureClass, number>> };
}

/** A weeks-long step with hundreds of failures keeps its state (carried over continue-as-new) small. */
export const MAX_ATTEMPT_RECORDS = 50;

export const add = (into: TimeSplit, cat: TimeCategory, sec: number): void => {
  if (sec > 0) into[cat] = (into[cat] ?? 0) + sec;
};

export function sumSplits(...splits: TimeSplit[]): TimeSplit {
  const out: TimeSplit = {};
  for (const s of splits) for (const c of TIME_CATEGORIES) add(out, c, s[c] ?? 0);
  return out;
}

export const totalSec = (s: TimeSplit): number => TIME_CATEGORIES.reduce((t, c) => t + (s[c] ?? 0), 0);

/** The share of the time that was productive; null for no time at all. */
export function goodputOf(s: TimeSplit): number | null {
  const total = totalSec(s);
  return total > 0 ? (s.productive ?? 0) / total : null;
}

/** Where the open span goes when the attempt ends: a failure's silence is detection; a success's is its phase's. */
function closingCategory(open: OpenPhase, failed: boolean): TimeCategory {
  if (failed) return open === 'waiting' ? 'waiting' : 'detection';
  return open === 'training' ? 'overhead' : open === 'startup' ? 'productive' : open;
}

/**
 * End an attempt at `at`: the time since its last event is attributed (see closingCategory), and time past
 * `stoppedAt` (a kill's grace, stop commands) is overhead. An attempt that saw no iteration and succeeded is a
 * tool (a conversion, an evaluation): its run is its productive time.
 */
export function closeAttempt(t: AttemptTime, at: number, failure: FailureClass | null, stoppedAt: number | null = null): AttemptTime {
  if (t.endedAt !== null) return t;
  const secs = { ...t.secs };
  const cut = Math.min(Math.max(stoppedAt ?? at, t.attributedTo), at);
  add(secs, closingCategory(t.open, failure !== null), (cut - t.attributedTo) / 1000);
  add(secs, 'overhead', (at - cut) / 1000);
  return { ...t, secs, endedAt: at, attributedTo: at, open: 'overhead', failure };
}

/** An attempt's time counted until `now`, as if it ended there successfully (for a live view). */
export function attemptSoFar(t: AttemptTime, now: number): TimeSplit {
  if (t.endedAt !== null) return t.secs;
  const secs = { ...t.secs };
  add(secs, t.open === 'training' ? 'productive' : t.open, (now - t.attributedTo) / 1000);
  return secs;
}

/**
 * A step's time with its newest attempt as last heard (`lastHeard`: the progress a heartbeat or checkpoint signal
 * carried), where the step's own record lacks it: one still running is counted until the reader's `now`, one a
 * cancel ended is closed when the step ended (`endedAt`, ms; what followed its last progress counts as overhead).
 * The workflow records no time for a cancelled attempt: without this, a run cancelled after an hour of training
 * shows the goodput of the steps before it alone.
 */
export function withLastHeard(st: StepTime, lastHeard: AttemptTime | null | undefined, endedAt: number | null): StepTime {
  if (!lastHeard || st.attempts.some((a) => a.attempt === lastHeard.attempt)) return st;
  if (endedAt === null || lastHeard.endedAt !== null) return withAttempt(st, lastHeard);
  return withAttempt(st, closeAttempt(lastHeard, Math.max(endedAt, lastHeard.attributedTo), null, lastHeard.attributedTo));
}

/** Seconds between consecutive attempts: a failed one's end to the next one's schedule. */
function restarts(attempts: AttemptTime[]): number[] {
  return attempts.slice(1).map((t, i) => Math.max(0, (t.scheduledAt - (attempts[i]!.endedAt ?? t.scheduledAt)) / 1000));
}

/** Everything a step's time went on, its running attempt counted until `now`. */
export function stepSplit(st: StepTime, now?: number): TimeSplit {
  const rs = restarts(st.attempts);
  const parts = st.attempts.map((t, i) => {
    const s = t.endedAt === null && now !== undefined ? attemptSoFar(t, now) : { ...t.secs };
    if (i > 0) add(s, 'restart', rs[i - 1]!);
    return s;
  });
  return sumSplits(st.earlier?.secs ?? {}, ...parts);
}

/**
 * Seconds each failure class cost the step: a failed attempt's detection and overhead, the restart after it, and
 * the next attempt's waiting, startup and recomputed iterations. (The first attempt's startup is the price of
 * starting at all, not of a failure; saves are the price of checkpointing.)
 */
export function lostByClass(st: StepTime): Partial<Record<FailureClass, number>> {
  const out: Partial<Record<FailureClass, number>> = { ...(st.earlier?.lostByClass ?? {}) };
  st.attempts.forEach((t, i) => {
    if (t.failure) out[t.failure] = (out[t.failure] ?? 0) + failureCost(st.attempts, i);
  });
  return out;
}

/** What attempt i's failure cost: its detection and overhead, the restart after it, the next one's start. */
function failureCost(attempts: AttemptTime[], i: number): number {
  const t = attempts[i]!;
  const next = attempts[i + 1];
  const n = next?.secs ?? {};
  const restart = next ? restarts([t, next])[0]! : 0;
  return (t.secs.detection ?? 0) + (t.secs.overhead ?? 0) + restart + (n.waiting ?? 0) + (n.startup ?? 0) + (n.recomputed ?? 0);
}

/** Append an attempt's record (replacing one of the same number), folding the oldest into `earlier` past MAX_ATTEMPT_RECORDS. */
export function withAttempt(st: StepTime, t: AttemptTime): StepTime {
  const attempts = [...st.attempts.filter((a) => a.attempt !== t.attempt), t];
  if (attempts.length <= MAX_ATTEMPT_RECORDS) return { ...st, attempts };
  // The oldest leaves the list with its own time, the restart after it and what its failure cost (which reads
  // the next attempt's startup: that one stays listed, its own seconds still its own).
  const [oldest, next] = attempts as [AttemptTime, AttemptTime];
  const earlier = st.earlier ?? { attempts: 0, secs: {}, lostByClass: {} };
  const lost: Partial<Record<FailureClass, number>> = { ...earlier.lostByClass };
  if (oldest.failure) lost[oldest.failure] = (lost[oldest.failure] ?? 0) + failureCost(attempts, 0);
  const restart: TimeSplit = {};
  add(restart, 'restart', restarts([oldest, next])[0]!);
  return {
    gpus: st.gpus,
    attempts: attempts.slice(1),
    earlier: { attempts: earlier.attempts + 1, secs: sumSplits(earlier.secs, oldest.secs, restart), lostByClass: lost },
  };
}

/** The highest iteration any attempt reached: a resumed attempt's iterations up to it are recomputed. */
export function highWater(st: StepTime | undefined): number | null {
  const its = (st?.attempts ?? []).map((t) => t.lastIteration).filter((x): x is number => x !== null);
  return its.length ? Math.max(...its) : null;
}

/** The longest save the step's listed attempts made, seconds (null: none): the next attempt's save allowance starts from it. */
export function longestSave(st: StepTime | undefined): number | null {
  const secs = (st?.attempts ?? []).map((t) => t.longestSaveSec).filter((x): x is number => x !== undefined);
  return secs.length ? Math.max(...secs) : null;
}

/** A step's or a run's goodput figures, as `status --json` shows them. */
export interface GoodputFigures {
  /** Productive share of the time (null: no time yet). */
  goodput: number | null;
  /** Seconds per category; they add up to `totalSec`. */
  secs: TimeSplit;
  totalSec: number;
  /** Seconds each failure class cost. */
  lostSecByClass: Partial<Record<FailureClass, number>>;
  /** GPU-hours each failure class cost (seconds × the step's GPUs). */
  gpuHoursLostByClass: Partial<Record<FailureClass, number>>;
}

export function stepGoodput(st: StepTime, now?: number): GoodputFigures {
  const secs = stepSplit(st, now);
  const lost = lostByClass(st);
  const gpuHours = Object.fromEntries(Object.entries(lost).map(([k, v]) => [k, (v * st.gpus) / 3600])) as GoodputFigures['gpuHoursLostByClass'];
  return { goodput: goodputOf(secs), secs, totalSec: totalSec(secs), lostSecByClass: lost, gpuHoursLostByClass: gpuHours };
}

/**
 * A run's figures from its steps': seconds, lost seconds and GPU-hours summed over the steps (step-seconds:
 * steps that ran side by side both count), and goodput weighted by each step's GPUs (a CPU step by 1), so that
 * a 64-GPU stage idle for an hour weighs 64 times a CPU conversion.
 */
export function runGoodput(steps: { gpus: number; figures: GoodputFigures }[]): GoodputFigures {
  const secs: TimeSplit = {};
  const weighted: TimeSplit = {};
  const lostSec: Partial<Record<FailureClass, number>> = {};
  const gpuHours: Partial<Record<FailureClass, number>> = {};
  const sumInto = (into: Partial<Record<FailureClass, number>>, from: Partial<Record<FailureClass, number>>) => {
    for (const [k, v] of Object.entries(from) as [FailureClass, number][]) into[k] = (into[k] ?? 0) + v;
  };
  for (const { gpus, figures } of steps) {
    for (const c of TIME_CATEGORIES) {
      add(secs, c, figures.secs[c] ?? 0);
      add(weighted, c, (figures.secs[c] ?? 0) * Math.max(1, gpus));
    }
    sumInto(lostSec, figures.lostSecByClass);
    sumInto(gpuHours, figures.gpuHoursLostByClass);
  }
  return { goodput: goodputOf(weighted), secs, totalSec: totalSec(secs), lostSecByClass: lostSec, gpuHoursLostByClass: gpuHours };
}
