/**
 * Progress parsers against the log formats of docs/infir2-recipe.md §3.5: Megatron's `training_log`, its checkpoint
 * and lifecycle lines, slime's dict lines behind Ray's actor prefix, evalscope/tqdm bars, and noise.
 */
import { describe, expect, it } from 'vitest';
import { parseEvalscopeLine, parseMegatronLine, parserFor, slimeParser, type ProgressEvent } from '../../../src/engine-logs/progress-parsers.js';

// The example line of §3.5, verbatim.
const EXAMPLE =
  ' [2025-10-01 12:00:00] iteration      100/   40000 | consumed samples:        12800 | elapsed time per iteration (ms): 8360.0 | throughput per GPU (TFLOP/s/GPU): 461.0 | learning rate: 2.000000E-06 | global batch size:   128 | lm loss: 2.345678E+00 | loss scale: 1.0 | grad norm: 0.123 | num zeros: 0 | params norm: 1234.567 | number of skipped iterations:   0 | number of nan iterations:   0 |';
// The same line without `--log-throughput`.
const EXAMPLE_NO_TFLOPS = EXAMPLE.replace(' throughput per GPU (TFLOP/s/GPU): 461.0 |', '');

/** Python's `'{:.6E}'.format(x)` (two-digit exponent at least; `NAN`/`INF` in capitals). */
function pyE(x: number): string {
  if (Number.isNaN(x)) return 'NAN';
  if (!Number.isFinite(x)) return x > 0 ? 'INF' : '-INF';
  const [mant, exp] = x.toExponential(6).split('e') as [string, string];
  const sign = exp.startsWith('-') ? '-' : '+';
  return `${mant}E${sign}${exp.replace(/^[-+]/, '').padStart(2, '0')}`;
}

/** A `training_log` line built from Megatron's format strings (training.py), like the reference trainer's. */
function megatronLine(o: { iteration: number; total: number; ms: number; loss: number | string; tflops?: number }): string {
  let s = ' [2025-10-01 12:00:00]';
  s += ` iteration ${String(o.iteration).padStart(8)}/${String(o.total).padStart(8)} |`;
  s += ` consumed samples: ${String(o.iteration * 128).padStart(12)} |`;
  s += ` elapsed time per iteration (ms): ${o.ms.toFixed(1)} |`;
  if (o.tflops !== undefined) s += ` throughput per GPU (TFLOP/s/GPU): ${o.tflops.toFixed(1)} |`;
  s += ` learning rate: ${pyE(2e-6)} |`;
  s += ` global batch size: ${'128'.padStart(5)} |`;
  s += ` lm loss: ${typeof o.loss === 'string' ? o.loss : pyE(o.loss)} |`;
  s += ' loss scale: 1.0 | grad norm: 0.123 | number of skipped iterations:   0 | number of nan iterations:   0 |';
  return s;
}

describe('parseMegatronLine: training_log', () => {
  it('reads iteration, total, loss and TFLOP/s from the §3.5 example line', () => {
    expect(parseMegatronLine(EXAMPLE)).toEqual({
      iteration: 100,
      totalIterations: 40000,
      loss: 2.345678,
      throughput: 461,
      throughputUnit: 'TFLOP/s/GPU',
      // The time per iteration too: the ledger takes the first line's compute out of the startup before it.
      msPerIteration: 8360,
    });
  });

  it('falls back to iterations per second from the elapsed time when there is no throughput field', () => {
    const ev = parseMegatronLine(EXAMPLE_NO_TFLOPS)!;
    expect(ev).toMatchObject({ iteration: 100, totalIterations: 40000, loss: 2.345678, throughputUnit: 'it/s' });
    expect(ev.throughput).toBeCloseTo(1000 / 8360, 10);
  });

  it('my line builder reproduces the §3.5 example exactly (so the generated lines below are faithful)', () => {
    const built = megatronLine({ iteration: 100, total: 40000, ms: 8360, tflops: 461, loss: 2.345678 });
    expect(parseMegatronLine(built)).toEqual(parseMegatronLine(EXAMPLE));
    expect(built).toContain(' iteration      100/   40000 |');
    expect(built).toContain(' lm loss: 2.345678E+00 |');
  });

  it.each([
    ['first iteration', 1, 40000, 1, 'iteration        1/   40000 |'],
    ['last iteration', 40000, 40000, 40000, 'iteration    40000/   40000 |'],
    ['9 digits (no padding left)', 123456789, 999999999, 123456789, 'iteration 123456789/999999999 |'],
    ['beyond 32 bits', 5000000000, 9000000000, 5000000000, 'iteration 5000000000/9000000000 |'],
  ])('parses %s', (_name, iteration, total, expected, fragment) => {
    const line = megatronLine({ iteration, total, ms: 1000, loss: 1.5 });
    expect(line).toContain(fragment);
    expect(parseMegatronLine(line)).toMatchObject({ iteration: expected, totalIterations: total, loss: 1.5 });
  });

  it.each([
    ['a loss below 1 with a negative exponent', 1.234567e-3, 0.001234567],
    ['a large loss', 11.75, 11.75],
    ['zero', 0, 0],
  ])('parses %s', (_name, loss, expected) => {
    const ev = parseMegatronLine(megatronLine({ iteration: 7, total: 10, ms: 250, loss }))!;
    expect(ev.loss).toBeCloseTo(expected, 12);
    expect(ev.throughput).toBe(4); // 1000 / 250 ms
    expect(ev.throughputUnit).toBe('it/s');
  });

  it.each(['NAN', 'nan', 'INF', 'inf', '-INF'])('keeps the iteration but reports no loss when the loss is %s', (bad) => {
    const ev = parseMegatronLine(megatronLine({ iteration: 321, total: 400, ms: 500, loss: bad, tflops: 300.5 }))!;
    expect(ev).toEqual({ iteration: 321, totalIterations: 400, throughput: 300.5, throughputUnit: 'TFLOP/s/GPU', msPerIteration: 500 });
    expect('loss' in ev).toBe(false);
  });

  it('reports no throughput when the elapsed time is zero and there is no TFLOP/s field', () => {
    expect(parseMegatronLine(megatronLine({ iteration: 3, total: 9, ms: 0, loss: 2 }))).toEqual({ iteration: 3, totalIterations: 9, loss: 2 });
  });

  it('prefers TFLOP/s over the elapsed time when both are present', () => {
    expect(parseMegatronLine(megatronLine({ iteration: 3, total: 9, ms: 2000, loss: 2, tflops: 12.5 }))).toMatchObject({
      throughput: 12.5,
      throughputUnit: 'TFLOP/s/GPU',
    });
  });

  it('is not confused by a torchrun/rank prefix before the line', () => {
    expect(parseMegatronLine(`[default7]:${EXAMPLE}`)).toMatchObject({ iteration: 100, totalIterations: 40000, loss: 2.345678 });
  });
});

describe('parseMegatronLine: checkpoint and lifecycle lines', () => {
  it.each([
    ['  successfully saved checkpoint from iteration     100 to /ckpt/root [ t 1/4, p 1/1 ]', 100],
    ['  successfully saved checkpoint from iteration   35000 to exp/InfiR2_CPT_FP8_7B/checkpoints [ t 1/1, p 1/1 ]', 35000],
    ['  successfully saved checkpoint at iteration       5 to /x', 5],
    ['  successfully saved checkpoint from iteration 12345678 to /x [ t 1/1, p 1/1 ]', 12345678],
  ])('%s → checkpointSaved', (line, it) => {
    expect(parseMegatronLine(line)).toEqual({ checkpointSaved: it });
  });

  it("recognises Megatron's SIGTERM exit line", () => {
    expect(parseMegatronLine('[exiting program after receiving SIGTERM.] datetime: 2025-10-01 12:34:56 ')).toEqual({ exitingOnSigterm: true });
  });

  it.each([
    [' saving checkpoint at iteration     100 to /ckpt/root in torch_dist format', { savingCheckpoint: true }],
    [' loading distributed checkpoint from /ckpt/root at iteration 100', { loadingCheckpoint: true }],
    [' loading checkpoint from /ckpt/root at iteration 100', { loadingCheckpoint: true }],
    ['(MegatronTrainRayActor pid=4242)  saving checkpoint at iteration      20 to /ckpt', { savingCheckpoint: true }],
  ])('%s → a phase of the stall limits', (line, ev) => {
    expect(parseMegatronLine(line)).toEqual(ev);
    expect(slimeParser()(line)).toEqual(ev);
  });

  it.each([
    ['a finished load', '  successfully loaded checkpoint from /ckpt/root [ t 1/4, p 1/1 ] at iteration 100'],
    ['a validation line', ' validation loss at iteration 100 on validation set | lm loss value: 2.300000E+00 | lm loss PPL: 9.974182E+00 | '],
    ['a test-set line', ' validation loss at iteration 100 on test set | lm loss value: 2.300000E+00 | lm loss PPL: 9.974182E+00 | '],
    ['the dashed rule', '-'.repeat(100)],
    ['training is done', '[after training is done] datetime: 2025-10-01 12:34:56 '],
    ['a time-limit exit', '[exiting program after 30 minutes] datetime: 2025-10-01 12:34:56 '],
    ['an exit-interval exit', '[exiting program at iteration 500] datetime: 2025-10-01 12:34:56 '],
    ['the missing-tracker warning', 'WARNING: could not find the metadata file /ckpt/latest_checkpointed_iteration.txt'],
    ['a traceback', 'RuntimeError: CUDA error: an illegal memory access was encountered'],
    ['an empty line', ''],
    ['a slime step line', "step 12: {'train/loss': 0.5}"],
    ['a tqdm bar', 'Predicting(aime24):  45%|████▌     | 432/960 [01:23<01:40,  5.21it/s]'],
  ])('ignores %s', (_name, line) => {
    expect(parseMegatronLine(line)).toBeNull();
  });
});

describe('slimeParser', () => {
  const parse = slimeParser();
  const ACTOR = '(MegatronTrainRayActor pid=123) ';

  it('reads the step and train/loss of an SFT step line behind the Ray prefix', () => {
    expect(parse(`${ACTOR}step 12: {'train/loss': 0.5312, 'train/grad_norm': 1.25, 'train/lr-pg_0': 1e-06}`)).toEqual({ iteration: 13, loss: 0.5312 });
  });

  it('takes train/loss, not train/pg_loss or train/kl_loss, from an RL step line', () => {
    const line =
      `${ACTOR}step 40: {'train/pg_loss': -0.0123, 'train/kl_loss': 0.004, 'train/loss': -0.0117, 'train/entropy_loss': 0.61, ` +
      `'train/pg_clipfrac': 0.002, 'train/ppo_kl': 1.5e-05, 'train/tis': 1.0, 'train/grad_norm': 0.08, 'train/lr-pg_0': 1e-06}`;
    expect(parse(line)).toEqual({ iteration: 41, loss: -0.0117 });
  });

  it('reads numpy reprs and exponents', () => {
    expect(parse(`${ACTOR}step 3: {'train/loss': np.float64(0.25), 'train/grad_norm': np.float64(2.0)}`)).toEqual({ iteration: 4, loss: 0.25 });
    expect(parse(`${ACTOR}step 4: {'train/loss': 1.5e-05}`)).toEqual({ iteration: 5, loss: 1.5e-5 });
  });

  it('reports the step without a loss when the dict has none (or it is nan)', () => {
    expect(parse(`${ACTOR}step 5: {'train/grad_norm': 0.5}`)).toEqual({ iteration: 6 });
    expect(parse(`${ACTOR}step 6: {'train/loss': nan, 'train/grad_norm': nan}`)).toEqual({ iteration: 7 });
  });

  it('divides the step by the steps per iteration', () => {
    const p4 = slimeParser(4);
    expect(p4(`${ACTOR}step 0: {'train/loss': 1.0}`)).toEqual({ iteration: 1, loss: 1 });
    expect(p4(`${ACTOR}step 13: {'train/loss': 1.0}`)).toEqual({ iteration: 4, loss: 1 });
    expect(p4(`${ACTOR}step 16: {'train/loss': 1.0}`)).toEqual({ iteration: 5, loss: 1 });
  });

  it('counts a rollout line as that rollout done (id + 1), without throughput', () => {
    expect(parse(`(RolloutManager pid=77) rollout 3: {'rollout/raw_reward': 0.41, 'rollout/response_lengths': 5123.4}`)).toEqual({ iteration: 4 });
    expect(parse(`${ACTOR}rollout 0: {'rollout/log_probs': -0.3}`)).toEqual({ iteration: 1 });
  });

  it('reads tokens/s/GPU from a perf line', () => {
    const line = `${ACTOR}perf 3: {'perf/rollout_time': 80.2, 'perf/tokens_per_gpu_per_sec': 1523.75, 'perf/longest_sample_tokens_per_sec': 88.1, 'perf/actor_train_tflops': 310.1}`;
    expect(parse(line)).toEqual({ iteration: 4, throughput: 1523.75, throughputUnit: 'tokens/s/GPU' });
    expect(parse(`${ACTOR}perf 9: {'perf/rollout_time': 80.2}`)).toEqual({ iteration: 10 });
  });

  it('handles the huge ids of a long RL run', () => {
    expect(parse(`${ACTOR}perf 10239: {'perf/tokens_per_gpu_per_sec': 1.0}`)).toMatchObject({ iteration: 10240 });
    expect(parse(`${ACTOR}step 987654321: {'train/loss': 0.1}`)).toEqual({ iteration: 987654322, loss: 0.1 });
  });

  it("survives Ray's ANSI colour codes around the prefix", () => {
    expect(parse(`\u001b[36m(MegatronTrainRayActor pid=123)\u001b[0m step 7: {'train/loss': 0.75}`)).toEqual({ iteration: 8, loss: 0.75 });
  });

  it('reports a Megatron save line from the actor as a checkpoint', () => {
    expect(parse(`${ACTOR}  successfully saved checkpoint from iteration      19 to /save [ t 1/1, p 1/1 ]`)).toEqual({ checkpointSaved: 19 });
  });

  it.each([
    ['an eval line', `${ACTOR}eval 20: {'eval/aime': 0.31, 'eval/aime-truncated_ratio': 0.02}`],
    ['a rollout tqdm bar', 'Rollout generation:  45%|████▌     | 58/128 [00:10<00:12,  5.6it/s]'],
    ['a weight-update bar', 'Update weights (pipelined): 100%|██████████| 28/28 [00:03<00:00,  8.1it/s]'],
    ['a Megatron training_log line', EXAMPLE],
    ['a step line cut off before its dict closes', `${ACTOR}step 12: {'train/loss': 0.53, 'train/grad`],
    ['a log message mentioning a step', `${ACTOR}Starting step 12 of training`],
    ['Ray noise', '(raylet) [2025-10-01 12:00:00] worker.cc:123: ...'],
    ['an empty line', ''],
  ])('ignores %s', (_name, line) => {
    expect(parse(line)).toBeNull();
  });

  // slime logs `rollout k`, then the training `step k` (k = rollout_id × steps_per_rollout + step, one step per
  // rollout in the InfiR2 scripts), then `perf k`, all for rollout id k: all three must report k + 1 completed.
  it('never moves progress backwards within one rollout (rollout k, step k, perf k)', () => {
    const seq = [
      `${ACTOR}rollout 5: {'rollout/raw_reward': 0.4}`,
      `${ACTOR}step 5: {'train/loss': 0.2, 'train/grad_norm': 0.1}`,
      `${ACTOR}perf 5: {'perf/tokens_per_gpu_per_sec': 1500.0}`,
    ];
    const its = seq.map((l) => parse(l)?.iteration);
    expect(its.every((x) => x !== undefined)).toBe(true);
    for (let i = 1; i < its.length; i++) expect(its[i]!, `line ${i}: ${seq[i]}`).toBeGreaterThanOrEqual(its[i - 1]!);
  });
});

describe('parseEvalscopeLine', () => {
  it.each([
    ['Predicting(aime24):  45%|████▌     | 432/960 [01:23<01:40,  5.21it/s]', 432, 960],
    ['Predicting(gpqa_diamond):   0%|          | 0/198 [00:00<?, ?it/s]', 0, 198],
    ['Predicting(aime25): 100%|██████████| 960/960 [05:00<00:00,  3.20it/s]', 960, 960],
    ['Evaluating: 12%|█▏ | 12345/100000 [00:01<00:10, 9000.00it/s]', 12345, 100000],
  ])('%s', (line, done, total) => {
    expect(parseEvalscopeLine(line)).toEqual({ iteration: done, totalIterations: total });
  });

  it.each([
    ['a log line with a fraction', '2025-10-01 12:00:00 - evalscope - INFO - 3/4 subsets loaded'],
    ['a Megatron save line', '  successfully saved checkpoint from iteration     100 to /x [ t 1/4, p 1/1 ]'],
    ['a date', '2025/10/01 started'],
    ['an empty line', ''],
  ])('ignores %s', (_name, line) => {
    expect(parseEvalscopeLine(line)).toBeNull();
  });
});

describe('parserFor', () => {
  it('picks the parser of each format', () => {
    expect(parserFor('megatron')(EXAMPLE)).toMatchObject({ iteration: 100, loss: 2.345678 });
    expect(parserFor('slime')("step 2: {'train/loss': 0.5}")).toEqual({ iteration: 3, loss: 0.5 });
    expect(parserFor('slime')(EXAMPLE)).toBeNull();
    expect(parserFor('evalscope')('x:  1%| | 1/100 [00:01<?, ?it/s]')).toEqual({ iteration: 1, totalIterations: 100 });
    expect(parserFor('evalscope')(EXAMPLE)).toBeNull();
  });

  it("'none' never reports progress", () => {
    const p = parserFor('none');
    for (const line of [EXAMPLE, "step 2: {'train/loss': 0.5}", 'x: 1/100 [', '[exiting program after receiving SIGTERM.] datetime: x']) {
      expect(p(line)).toBeNull();
    }
  });

  it('returns plain data events (what becomes heartbeat details)', () => {
    const ev = parserFor('megatron')(EXAMPLE) as ProgressEvent;
    expect(JSON.parse(JSON.stringify(ev))).toEqual(ev);
  });
});
