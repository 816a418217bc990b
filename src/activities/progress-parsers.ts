/**
 * Turn a trainer's output lines into progress. Pure functions, one per log format:
 * Megatron's `training_log` (also what the local trainer prints), slime's `step k: {...}` dicts, evalscope's
 * progress. Formats: docs/infir2-recipe.md §3.5.
 */
import type { ProgressFormat } from '../plan/types.js';

export interface ProgressEvent {
  iteration?: number;
  totalIterations?: number;
  loss?: number;
  throughput?: number;
  throughputUnit?: string;
  /** A checkpoint at this iteration was reported saved. */
  checkpointSaved?: number;
  /** A checkpoint save began (the silence until `checkpointSaved` is the save's). */
  savingCheckpoint?: boolean;
  /** A checkpoint load began (the silence until the next iteration is the load's). */
  loadingCheckpoint?: boolean;
  /** The trainer said it is exiting after SIGTERM (Megatron's signal handler). */
  exitingOnSigterm?: boolean;
  /** Milliseconds per iteration over the iterations this line sums up (Megatron's `elapsed time per iteration`). */
  msPerIteration?: number;
}

export type LineParser = (line: string) => ProgressEvent | null;

const NUM = '([-+]?(?:\\d+\\.?\\d*|\\.\\d+)(?:[eE][-+]?\\d+)?|nan|inf)';
const MEGATRON_ITER = /iteration\s+(\d+)\/\s*(\d+)\s*\|/;
const MEGATRON_LOSS = new RegExp(`\\|\\s*lm loss:\\s*${NUM}\\s*\\|`);
const MEGATRON_TFLOPS = new RegExp(`throughput per GPU \\(TFLOP/s/GPU\\):\\s*${NUM}`);
const MEGATRON_MS = new RegExp(`elapsed time per iteration \\(ms\\):\\s*${NUM}`);
const MEGATRON_SAVED = /successfully saved checkpoint (?:from|at) iteration\s+(\d+)/;
const MEGATRON_SIGTERM = /exiting program after receiving SIGTERM/;
// Megatron's (and the reference trainer's) announcements: ` saving checkpoint at iteration     100 to …`,
// ` loading distributed checkpoint from … at iteration 100` (also `loading checkpoint from`, `loading release …`).
const MEGATRON_SAVING = /\bsaving checkpoint at iteration\s+\d+/;
const MEGATRON_LOADING = /\bloading (?:distributed |release |local )?checkpoint from\b/;

/** The checkpoint lines Megatron prints, in any format that runs Megatron (slime's actors do too). */
function checkpointEvent(line: string): ProgressEvent | null {
  const saved = MEGATRON_SAVED.exec(line);
  if (saved) return { checkpointSaved: Number(saved[1]) };
  if (MEGATRON_SAVING.test(line)) return { savingCheckpoint: true };
  if (MEGATRON_LOADING.test(line)) return { loadingCheckpoint: true };
  return null;
}

function num(s: string | undefined): number | undefined {
  if (s === undefined) return undefined;
  const v = Number(s);
  return Number.isFinite(v) ? v : undefined;
}

export const parseMegatronLine: LineParser = (line) => {
  const ckpt = checkpointEvent(line);
  if (ckpt) return ckpt;
  if (MEGATRON_SIGTERM.test(line)) return { exitingOnSigterm: true };
  const it = MEGATRON_ITER.exec(line);
  if (!it) return null;
  const ev: ProgressEvent = { iteration: Number(it[1]), totalIterations: Number(it[2]) };
  const loss = num(MEGATRON_LOSS.exec(line)?.[1]);
  if (loss !== undefined) ev.loss = loss;
  const tflops = num(MEGATRON_TFLOPS.exec(line)?.[1]);
  const ms = num(MEGATRON_MS.exec(line)?.[1]);
  if (ms !== undefined && ms > 0) ev.msPerIteration = ms;
  // A trainer that cannot count FLOPs (the CPU reference trainer) prints 0.0: fall back to iterations/s.
  if (tflops !== undefined && tflops > 0) {
    ev.throughput = tflops;
    ev.throughputUnit = 'TFLOP/s/GPU';
  } else if (ms !== undefined && ms > 0) {
    ev.throughput = 1000 / ms;
    ev.throughputUnit = 'it/s';
  }
  return ev;
};

// slime prints Python dict reprs: `step 12: {'train/loss': 0.53, ...}`, `rollout 3: {...}`, and Megatron's
// checkpoint lines from the actor; Ray prefixes lines with `(ActorName pid=123) `.
const SLIME_STEP = /\bstep (\d+):\s*\{(.*)\}\s*$/;
const SLIME_ROLLOUT = /\b(?:rollout|perf) (\d+):\s*\{(.*)\}\s*$/;

function dictValue(body: string, key: string): number | undefined {
  const m = new RegExp(`'${key.replace(/[/]/g, '\\/')}':\\s*(?:np\\.float64\\()?${NUM}`).exec(body);
  return num(m?.[1]);
}

export function slimeParser(stepsPerIteration = 1): LineParser {
  return (line) => {
    const ckpt = checkpointEvent(line);
    if (ckpt) return ckpt;
    const step = SLIME_STEP.exec(line);
    if (step) {
      // Iterations count completed rollouts: `rollout k`, `step k` and `perf k` all belong to rollout k + 1.
      const ev: ProgressEvent = { iteration: Math.floor(Number(step[1]) / stepsPerIteration) + 1 };
      const loss = dictValue(step[2] ?? '', 'train/loss');
      if (loss !== undefined) ev.loss = loss;
      return ev;
    }
    const roll = SLIME_ROLLOUT.exec(line);
    if (roll) {
      const ev: ProgressEvent = { iteration: Number(roll[1]) + 1 };
      const tps = dictValue(roll[2] ?? '', 'perf/tokens_per_gpu_per_sec');
      if (tps !== undefined) {
        ev.throughput = tps;
        ev.throughputUnit = 'tokens/s/GPU';
      }
      return ev;
    }
    return null;
  };
}

// evalscope/tqdm: `Predicting(aime24):  45%|████▌     | 432/960 [..]`
const TQDM = /(\d+)\/(\d+) \[/;
export const parseEvalscopeLine: LineParser = (line) => {
  const m = TQDM.exec(line);
  if (!m) return null;
  return { iteration: Number(m[1]), totalIterations: Number(m[2]) };
};

/**
 * Everything a report charts from one line, in any of the formats above (a step's log may mix them: the local
 * RL trainer prints slime's `rollout k:` dicts beside Megatron's iteration lines). The supervisor's parsers read
 * the few fields it acts on; this reads the rest of the same lines, with the same patterns.
 */
export type MetricsLine =
  | { kind: 'train'; iteration: number; totalIterations?: number; loss?: number; lr?: number; gradNorm?: number; msPerIteration?: number; throughput?: number; throughputUnit?: string; reward?: number; time?: string }
  | { kind: 'validation'; iteration: number; loss: number }
  | { kind: 'step'; step: number; loss?: number; lr?: number; gradNorm?: number }
  | { kind: 'rollout'; rollout: number; reward?: number; responseLength?: number; truncated?: number }
  | { kind: 'perf'; rollout: number; throughput?: number; throughputUnit?: string }
  | { kind: 'eval'; rollout: number; scores: Record<string, number> };

const MEGATRON_LR = new RegExp(`\\|\\s*learning rate:\\s*${NUM}\\s*\\|`);
const MEGATRON_GRAD_NORM = new RegExp(`\\|\\s*grad norm:\\s*${NUM}\\s*\\|`);
const MEGATRON_REWARD = new RegExp(`\\|\\s*reward:\\s*${NUM}\\s*\\|`);
const MEGATRON_TIME = /^\s*\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\]\s+iteration/;
const MEGATRON_VALIDATION = new RegExp(`validation loss at iteration\\s+(\\d+) on validation set \\| lm loss value:\\s*${NUM}`);
const SLIME_EVAL = /\beval (\d+):\s*\{(.*)\}\s*$/;
const DICT_ENTRY = new RegExp(`'([^']+)':\\s*(?:np\\.float64\\()?${NUM}(?=[),}\\s]|$)`, 'g');

function dictEntries(body: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const m of body.matchAll(DICT_ENTRY)) {
    const v = num(m[2]);
    if (v !== undefined) out.set(m[1]!, v);
  }
  return out;
}

function set<T extends object, K extends keyof T>(o: T, key: K, v: T[K] | undefined): void {
  if (v !== undefined) o[key] = v;
}

export function parseMetricsLine(line: string): MetricsLine | null {
  if (MEGATRON_ITER.test(line)) {
    const p = parseMegatronLine(line)!;
    const m: MetricsLine & { kind: 'train' } = { kind: 'train', iteration: p.iteration!, totalIterations: p.totalIterations! };
    set(m, 'loss', p.loss);
    set(m, 'lr', num(MEGATRON_LR.exec(line)?.[1]));
    set(m, 'gradNorm', num(MEGATRON_GRAD_NORM.exec(line)?.[1]));
    set(m, 'msPerIteration', num(MEGATRON_MS.exec(line)?.[1]));
    set(m, 'throughput', p.throughput);
    set(m, 'throughputUnit', p.throughputUnit);
    set(m, 'reward', num(MEGATRON_REWARD.exec(line)?.[1]));
    set(m, 'time', MEGATRON_TIME.exec(line)?.[1]);
    return m;
  }
  const val = MEGATRON_VALIDATION.exec(line);
  if (val) {
    const loss = num(val[2]);
    return loss === undefined ? null : { kind: 'validation', iteration: Number(val[1]), loss };
  }
  const step = SLIME_STEP.exec(line);
  if (step) {
    const d = dictEntries(step[2] ?? '');
    const m: MetricsLine & { kind: 'step' } = { kind: 'step', step: Number(step[1]) };
    set(m, 'loss', d.get('train/loss'));
    set(m, 'lr', d.get('train/lr-pg_0'));
    set(m, 'gradNorm', d.get('train/grad_norm'));
    return m;
  }
  const ev = SLIME_EVAL.exec(line);
  if (ev) {
    const scores: Record<string, number> = {};
    for (const [k, v] of dictEntries(ev[2] ?? '')) if (!k.endsWith('-truncated_ratio')) scores[k.replace(/^eval\//, '')] = v;
    return { kind: 'eval', rollout: Number(ev[1]), scores };
  }
  const roll = SLIME_ROLLOUT.exec(line);
  if (roll) {
    const d = dictEntries(roll[2] ?? '');
    if (/\bperf \d+:/.test(line)) {
      const m: MetricsLine & { kind: 'perf' } = { kind: 'perf', rollout: Number(roll[1]) };
      const tps = d.get('perf/tokens_per_gpu_per_sec');
      if (tps !== undefined) Object.assign(m, { throughput: tps, throughputUnit: 'tokens/s/GPU' });
      return m;
    }
    const m: MetricsLine & { kind: 'rollout' } = { kind: 'rollout', rollout: Number(roll[1]) };
    // slime logs `rollout/raw_reward` (before normalisation) and `rollout/rewards`; the reference trainer the latter.
    set(m, 'reward', d.get('rollout/raw_reward') ?? d.get('rollout/rewards'));
    set(m, 'responseLength', d.get('rollout/response_lengths') ?? d.get('rollout/response_length'));
    set(m, 'truncated', d.get('rollout/truncated'));
    return m;
  }
  return null;
}

export function parserFor(format: ProgressFormat): LineParser {
  switch (format) {
    case 'megatron':
      return parseMegatronLine;
    case 'slime':
      return slimeParser();
    case 'evalscope':
      return parseEvalscopeLine;
    case 'none':
      return () => null;
  }
}
