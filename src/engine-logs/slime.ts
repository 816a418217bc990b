/**
 * slime's lines (THUDM/slime 8359c9a): Python dicts printed as `<what> <id>: {...}`, behind Ray's actor prefix
 * (`(MegatronTrainRayActor pid=123) `, sometimes in ANSI colour), and Megatron's checkpoint lines from the
 * actor. Fixtures of each in test/fixtures/engine-logs.ts.
 */
import type { LineParser, MetricsLine, ProgressEvent } from './events.js';
import { checkpointEvent } from './megatron.js';
import { dictEntries } from './numbers.js';

/**
 * backends/megatron_utils/model.py:614 `print(f"{role_tag}step {accumulated_step_id}: {log_dict}")`, with
 * `accumulated_step_id = rollout_id × steps_per_rollout + step_id` and keys `train/<loss key>`,
 * `train/grad_norm`, `train/lr-pg_<k>` (the FSDP actor, fsdp_utils/actor.py:507, prints the same). The role tag
 * is empty for the actor, `critic-` for a critic (`critic-step 3: {'train/critic-loss': …}`): not the actor's
 * progress, not read.
 */
const STEP = /(?<![\w-])step (\d+):\s*\{(.*)\}\s*$/;
/**
 * `rollout <id>: {'rollout/<key>': …}` (megatron_utils/data.py:116, gather_log_data('rollout', …), from
 * log_rollout_data, 341), `perf <id>: {...}` twice a rollout (ray/rollout.py:467 with
 * `perf/tokens_per_gpu_per_sec`; megatron_utils/data.py:480 with the actor's times and TFLOP/s) and
 * `eval <id>: {'eval/<set>': <mean reward>, 'eval/<set>-truncated_ratio': …}` (ray/rollout.py:435).
 * `passrate <id>:` and `multi_turn <id>:` (the same gather_log_data) are not read.
 */
const PER_ROLLOUT = /(?<![\w-])(rollout|perf|eval) (\d+):\s*\{(.*)\}\s*$/;

/** The supervisor's reading: progress in rollouts done (`stepsPerIteration` optimizer steps a rollout). */
export function slimeParser(stepsPerIteration = 1): LineParser {
  return (line) => {
    const ckpt = checkpointEvent(line);
    if (ckpt) return ckpt;
    if (!line.includes(': {')) return null;
    const step = STEP.exec(line);
    if (step) {
      // Iterations count completed rollouts: `rollout k`, `step k` and `perf k` all belong to rollout k + 1.
      const ev: ProgressEvent = { iteration: Math.floor(Number(step[1]) / stepsPerIteration) + 1 };
      const loss = dictEntries(step[2]!).get('train/loss');
      if (loss !== undefined) ev.loss = loss;
      return ev;
    }
    const roll = PER_ROLLOUT.exec(line);
    if (!roll || roll[1] === 'eval') return null;
    const ev: ProgressEvent = { iteration: Number(roll[2]) + 1 };
    const tps = roll[1] === 'perf' ? dictEntries(roll[3]!).get('perf/tokens_per_gpu_per_sec') : undefined;
    if (tps !== undefined) Object.assign(ev, { throughput: tps, throughputUnit: 'tokens/s/GPU' });
    return ev;
  };
}

/** A slime dict line, every figure the report charts; null for any other line. */
export function slimeMetrics(line: string): MetricsLine | null {
  if (!line.includes(': {')) return null;
  const step = STEP.exec(line);
  if (step) {
    const d = dictEntries(step[2]!);
    const m: MetricsLine & { kind: 'step' } = { kind: 'step', step: Number(step[1]) };
    put(m, 'loss', d.get('train/loss'));
    put(m, 'lr', d.get('train/lr-pg_0'));
    put(m, 'gradNorm', d.get('train/grad_norm'));
    return m;
  }
  const roll = PER_ROLLOUT.exec(line);
  if (!roll) return null;
  const rollout = Number(roll[2]);
  const d = dictEntries(roll[3]!);
  if (roll[1] === 'eval') {
    const scores: Record<string, number> = {};
    for (const [k, v] of d) if (!k.endsWith('-truncated_ratio')) scores[k.replace(/^eval\//, '')] = v;
    return { kind: 'eval', rollout, scores };
  }
  if (roll[1] === 'perf') {
    const m: MetricsLine & { kind: 'perf' } = { kind: 'perf', rollout };
    const tps = d.get('perf/tokens_per_gpu_per_sec');
    if (tps !== undefined) Object.assign(m, { throughput: tps, throughputUnit: 'tokens/s/GPU' });
    return m;
  }
  const m: MetricsLine & { kind: 'rollout' } = { kind: 'rollout', rollout };
  // slime logs `rollout/raw_reward` (before normalisation) and `rollout/rewards` (after: ~0 under GRPO); the
  // reference trainer only the latter.
  put(m, 'reward', d.get('rollout/raw_reward') ?? d.get('rollout/rewards'));
  put(m, 'responseLength', d.get('rollout/response_lengths') ?? d.get('rollout/response_length'));
  put(m, 'truncated', d.get('rollout/truncated'));
  return m;
}

function put<T extends object, K extends keyof T>(o: T, key: K, v: T[K] | undefined): void {
  if (v !== undefined) o[key] = v;
}
