/**
 * Megatron-LM's lines, as core_v0.14.0 prints them (and the local reference trainer, byte for byte). Each pattern
 * names the format string it reads; the real lines of an H100 run are in docs/real-engines.md and
 * every variant has a fixture in test/fixtures/engine-logs.ts.
 */
import type { EvalSplit, MetricsLine, ProgressEvent } from './events.js';
import { NUM, num } from './numbers.js';

// training.py:1523 `' iteration {:8d}/{:8d} |'.format(iteration, args.train_iters)`: the iteration of the line,
// a multiple of --log-interval (or the last). A torchrun `--tee` prefix (`[default0]:`) may come first.
const ITERATION = /iteration\s+(\d+)\/\s*(\d+)\s*\|/;
// training.py:1523 `f" [{datetime.now().strftime('%Y-%m-%d %H:%M:%S')}]"`, just before it.
const TIME = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/;

/**
 * training.py:1524–1578: the ` key: value |` fields after the iteration. `lm loss` is printed only when the
 * interval's average is > 0.0 (`if avg > 0.0`, 1565): a NaN/inf loss or an interval of skipped iterations has
 * none. `grad norm` only when not None; `throughput per GPU` only with --log-throughput. The local RL trainer
 * adds `reward` after `lm loss`. Read by a scan rather than a regex per field: a long run's log has millions.
 */
const FIELDS: Record<string, keyof TrainFields> = {
  'lm loss': 'loss',
  'learning rate': 'lr',
  'grad norm': 'gradNorm',
  reward: 'reward',
  'elapsed time per iteration (ms)': 'msPerIteration',
  'throughput per GPU (TFLOP/s/GPU)': 'tflops',
  'number of skipped iterations': 'skipped',
  'number of nan iterations': 'nan',
};
interface TrainFields {
  loss?: number;
  lr?: number;
  gradNorm?: number;
  reward?: number;
  msPerIteration?: number;
  tflops?: number;
  skipped?: number;
  nan?: number;
}

function fields(line: string, from: number): TrainFields {
  const out: TrainFields = {};
  for (let start = from, bar = line.indexOf('|', start); bar >= 0; start = bar + 1, bar = line.indexOf('|', start)) {
    const colon = line.indexOf(':', start);
    if (colon < 0 || colon > bar) continue;
    const key = FIELDS[line.slice(start, colon).trim()];
    if (!key) continue;
    const v = num(line.slice(colon + 1, bar));
    if (v !== undefined) out[key] = v;
  }
  return out;
}

// checkpointing.py:436 `'saving checkpoint at iteration {:7d} to {} in {} format'`.
const SAVING = /\bsaving checkpoint at iteration\s+\d+/;
// checkpointing.py:615 `'  successfully saved checkpoint from iteration {:7d} to {args.save} [ t …, p … ]'`
// (with --async-save printed when the save is finalised, iterations later). `at iteration`: Megatron before
// core_v0.8. Not `successfully saved local checkpoint` (598): a node-local copy, not in the step's directory.
const SAVED = /successfully saved checkpoint (?:from|at) iteration\s+(\d+)/;
// checkpointing.py:1080–1085 `' loading {dist_infix}checkpoint from {load_dir} at iteration {iteration}'`,
// `' loading release {dist_infix}checkpoint from {load_dir}'`; `local`: a non-persistent local checkpoint.
const LOADING = /\bloading (?:release )?(?:distributed |local )?checkpoint from\b/;
// training.py:1789 `print_datetime('exiting program after receiving SIGTERM.')`.
const SIGTERM_EXIT = /exiting program after receiving SIGTERM/;

/**
 * training.py:2525 `f' validation{suffix} loss at {prefix} | '` then `'{} value: {:.6E} | '` per loss key; the
 * prefix is `iteration N` every --eval-interval (2219), `iteration N on validation set` and `… on test set` once
 * at the end of training (747, 762: not after a SIGTERM or --exit-interval exit); suffix `-k` with
 * --multiple-validation-sets.
 */
const VALIDATION = new RegExp(`\\bvalidation(?:-(\\d+))? loss at iteration (\\d+)( on (validation|test) set)? \\| lm loss value:\\s*${NUM}`);

/** The checkpoint lines Megatron prints, in any format that runs Megatron (slime's actors do too). */
export function checkpointEvent(line: string): ProgressEvent | null {
  if (!line.includes('checkpoint')) return null;
  const saved = SAVED.exec(line);
  if (saved) return { checkpointSaved: Number(saved[1]) };
  if (SAVING.test(line)) return { savingCheckpoint: true };
  if (LOADING.test(line)) return { loadingCheckpoint: true };
  return null;
}

/** The supervisor's reading of a Megatron line: progress, checkpoints, the SIGTERM exit. */
export function parseMegatronLine(line: string): ProgressEvent | null {
  const ckpt = checkpointEvent(line);
  if (ckpt) return ckpt;
  if (SIGTERM_EXIT.test(line)) return { exitingOnSigterm: true };
  const t = trainingLog(line);
  if (!t) return null;
  const ev: ProgressEvent = { iteration: t.iteration, totalIterations: t.totalIterations! };
  if (t.loss !== undefined) ev.loss = t.loss;
  if (t.msPerIteration !== undefined && t.msPerIteration > 0) ev.msPerIteration = t.msPerIteration;
  if (t.throughput !== undefined) Object.assign(ev, { throughput: t.throughput, throughputUnit: t.throughputUnit });
  return ev;
}

/** A `training_log` line, every field the report charts; null for any other line. */
export function trainingLog(line: string): (MetricsLine & { kind: 'train' }) | null {
  const it = ITERATION.exec(line);
  if (!it) return null;
  const f = fields(line, it.index + it[0].length);
  const m: MetricsLine & { kind: 'train' } = { kind: 'train', iteration: Number(it[1]), totalIterations: Number(it[2]) };
  if (f.loss !== undefined) m.loss = f.loss;
  if (f.lr !== undefined) m.lr = f.lr;
  if (f.gradNorm !== undefined) m.gradNorm = f.gradNorm;
  if (f.reward !== undefined) m.reward = f.reward;
  if (f.msPerIteration !== undefined) m.msPerIteration = f.msPerIteration;
  // A trainer that cannot count FLOPs (the CPU reference trainer) prints 0.0: iterations/s instead.
  if (f.tflops !== undefined && f.tflops > 0) {
    m.throughput = f.tflops;
    m.throughputUnit = 'TFLOP/s/GPU';
  } else if (f.msPerIteration !== undefined && f.msPerIteration > 0) {
    m.throughput = 1000 / f.msPerIteration;
    m.throughputUnit = 'it/s';
  }
  if (f.skipped !== undefined) m.skipped = f.skipped;
  if (f.nan !== undefined) m.nan = f.nan;
  // `[YYYY-mm-dd HH:MM:SS] ` right before the iteration.
  if (it.index >= 21 && line.charCodeAt(it.index - 2) === 0x5d) {
    const time = line.slice(it.index - 21, it.index - 2);
    if (TIME.test(time)) m.time = time;
  }
  return m;
}

/** A validation or test line (`validation loss at iteration N …`); null for any other line or a NaN loss. */
export function validationLine(line: string): (MetricsLine & { kind: 'validation' }) | null {
  if (!line.includes(' loss at iteration ')) return null;
  const v = VALIDATION.exec(line);
  if (!v) return null;
  const loss = num(v[5]);
  if (loss === undefined) return null;
  return { kind: 'validation', iteration: Number(v[2]), loss, split: (v[4] as EvalSplit | undefined) ?? 'validation', final: v[3] !== undefined, set: v[1] === undefined ? null : Number(v[1]) };
}
