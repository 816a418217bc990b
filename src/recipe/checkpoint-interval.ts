/**
 * How often to checkpoint: the expected goodput of a save interval and the Young–Daly optimum, from an
 * iteration time, a save time, a restart time and a failure rate. Pure arithmetic; `goodput-advice.ts` applies
 * it to a recipe's stages, lint and `infir2 plan` show the result.
 *
 * The model, first order (Young 1974, Daly 2006). A step on G GPUs fails as a Poisson process of rate λ·G, so
 * the job's mean time between failures is M = 1 / (λ·G). Saving every τ seconds of training costs δ per save:
 * a share δ/τ of the time. Each failure costs the restart R (noticing it, starting again, loading the
 * checkpoint) plus, on average, half a period of lost iterations recomputed: a share (R + τ/2)/M. So
 *
 *     goodput(τ) = 1 − δ/τ − (τ/2 + R)/M,   highest at τ* = √(2δM)   (Young–Daly)
 *
 * R does not move the optimum, only the level. The model holds while δ ≪ τ ≪ M, which is where checkpointing
 * matters; outside it the numbers are rough (goodput is clamped to [0, 1]).
 */

// Llama 3 (Meta, "The Llama 3 Herd of Models", 2024, §3.3.4): 419 unexpected interruptions during a 54-day
// snapshot of the 405B model's pre-training on 16,384 H100 GPUs.
const LLAMA3_INTERRUPTIONS = 419;
const LLAMA3_DAYS = 54;
const LLAMA3_GPUS = 16384;
/** Unexpected interruptions per GPU-hour in Llama 3's pre-training: ≈ 1.97e-5, one per ~50,700 GPU-hours. */
export const LLAMA3_FAILURES_PER_GPU_HOUR = LLAMA3_INTERRUPTIONS / (LLAMA3_DAYS * 24 * LLAMA3_GPUS);

/**
 * Time lost per failure besides the recomputed iterations, where the recipe says nothing: a crash noticed at
 * once, the retry's pause, the trainer started again and the checkpoint (and Megatron's data index) loaded.
 */
export const DEFAULT_RESTART = '10m';

/**
 * Goodput an interval may lose against the optimum before lint hints: 3 percentage points. Less is within the
 * error of the estimates and the first-order model; more is hours a week on a cluster.
 */
export const HINT_LOSS = 0.03;

/** Mean time between failures of a job on `gpus` GPUs, seconds; Infinity without GPUs (the rate is per GPU). */
export function jobMtbfSec(failuresPerGpuHour: number, gpus: number): number {
  return gpus > 0 ? 3600 / (failuresPerGpuHour * gpus) : Infinity;
}

export interface FailureCosts {
  /** δ: seconds training waits for one checkpoint to be written. */
  saveSec: number;
  /** R: seconds lost per failure besides recomputation. */
  restartSec: number;
  /** M: the job's mean time between failures, seconds. */
  mtbfSec: number;
}

/** Expected share of wall time spent on new iterations when saving every `periodSec` seconds of training. */
export function goodput(periodSec: number, c: FailureCosts): number {
  const lost = c.saveSec / periodSec + (periodSec / 2 + c.restartSec) / c.mtbfSec;
  return Math.min(1, Math.max(0, 1 - lost));
}

/** The Young–Daly period τ* = √(2δM), seconds. */
export function youngDalySec(saveSec: number, mtbfSec: number): number {
  return Math.sqrt(2 * saveSec * mtbfSec);
}

export interface IntervalInputs {
  iterationSec: number;
  saveSec: number;
  restartSec: number;
  failuresPerGpuHour: number;
  gpus: number;
  /**
   * The longest stretch of iterations that ends in a checkpoint whatever the interval (a CPT phase, an SFT
   * stage): a longer interval saves no less often than this, and the optimum is capped at it.
   */
  span?: number;
  /** Intervals must divide this (lint's alignment with phase boundaries or RL curriculum stages). */
  alignTo?: number;
}

export interface Interval {
  iterations: number;
  goodput: number;
}

export interface IntervalAdvice {
  mtbfSec: number;
  /** The interval asked about. */
  current: Interval;
  /** The whole number of iterations nearest to τ* with the better goodput (capped at `span`). */
  optimum: Interval & { sec: number };
  /** The best interval that divides `alignTo` (the optimum when nothing constrains it). */
  suggested: Interval;
}

/** Goodput and Young–Daly optimum of saving every `saveInterval` iterations. */
export function adviseInterval(saveInterval: number, x: IntervalInputs): IntervalAdvice {
  const mtbfSec = jobMtbfSec(x.failuresPerGpuHour, x.gpus);
  const costs: FailureCosts = { saveSec: x.saveSec, restartSec: x.restartSec, mtbfSec };
  const span = x.span ?? Infinity;
  const at = (iterations: number): Interval => ({ iterations, goodput: goodput(Math.min(iterations, span) * x.iterationSec, costs) });
  const best = (cands: number[]) => cands.map(at).reduce((a, b) => (b.goodput > a.goodput ? b : a));

  const ideal = youngDalySec(x.saveSec, mtbfSec) / x.iterationSec;
  const capped = Math.min(ideal, span);
  // goodput is concave in τ: the best whole number is one of the two around the ideal.
  const optimum = Number.isFinite(capped) ? best([Math.max(1, Math.floor(capped)), Math.max(1, Math.ceil(capped))]) : at(saveInterval);
  const suggested = x.alignTo ? best(divisors(x.alignTo)) : optimum;
  return { mtbfSec, current: at(saveInterval), optimum: { ...optimum, sec: optimum.iterations * x.iterationSec }, suggested };
}

/** Every divisor of n ≥ 1, ascending. */
export function divisors(n: number): number[] {
  const low: number[] = [];
  const high: number[] = [];
  for (let d = 1; d * d <= n; d++) {
    if (n % d !== 0) continue;
    low.push(d);
    if (d * d !== n) high.unshift(n / d);
  }
  return [...low, ...high];
}
