/**
 * The human view of a Plan, as `infir2 plan` prints it: the steps with what each does, the training facts of
 * each training step, the commands in short, then retry budgets, stall limits, retention and webhooks.
 */
import { basename } from 'node:path';
import { describeStallSpec, shortDuration } from './stall-words.js';
import { startOf, stepFacts } from './step-facts.js';
import { NOTIFY_EVENTS, type WebhookSpec } from './notify-spec.js';
import type { CheckpointSpec, FailureClass, Plan, PlanStep } from './types.js';

/** `torchrun … pretrain_gpt.py`, `ray job submit … train.py`, `python main.py pretrain`. */
export function commandHead(step: PlanStep): string {
  const argv = step.command.argv;
  const program = basename(argv[0] ?? '');
  const scriptAt = argv.findIndex((a, i) => i > 0 && /\.(py|sh)$/.test(a));
  if (scriptAt < 0) return program;
  const script = basename(argv[scriptAt]!);
  // The local trainer's subcommand says what it does.
  const sub = script === 'main.py' && argv[scriptAt + 1] && !argv[scriptAt + 1]!.startsWith('-') ? ` ${argv[scriptAt + 1]}` : '';
  const gap = scriptAt > 1 ? (program === 'ray' ? ' job submit …' : ' …') : '';
  return `${program}${gap} ${script}${sub}`;
}

/** `4.19M`, `21.0B`, `812`: three significant digits and an SI suffix. */
export function si(x: number): string {
  const [v, suffix] = x >= 999.5e9 ? [x / 1e12, 'T'] : x >= 999.5e6 ? [x / 1e9, 'B'] : x >= 999.5e3 ? [x / 1e6, 'M'] : x >= 999.5 ? [x / 1e3, 'k'] : [x, ''];
  return `${v >= 100 ? Math.round(v) : v.toPrecision(3)}${suffix}`;
}

/** Columns padded to their widest cell, the last one left ragged. */
function table(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ').trimEnd());
}

/** The steps, what each does (its summary), where it runs and what it waits for. */
function stepRows(plan: Plan): string[] {
  return table([
    ['STEP', 'POOL', 'GPUS', 'AFTER', 'WHAT'],
    ...plan.steps.map((s) => [s.id, s.pool, s.nodes > 1 ? `${s.nodes}×${s.gpus}` : String(s.gpus), s.dependsOn.join(', ') || '-', s.summary]),
  ]);
}

/** Per training step, what a Megatron user checks first, as the step's argv sets it (step-facts.ts). */
function trainingRows(plan: Plan): string[] {
  const rows = plan.steps.flatMap((s) => {
    const f = stepFacts(s, startOf(s, plan.steps));
    if (!f) return [];
    const batch = f.micro === 'dynamic' ? `dyn ≤${si(f.tokensPerGpu ?? 0)} tok/GPU` : f.micro === null ? '-' : String(f.micro);
    return [[
      s.id,
      f.gpus ? String(f.gpus) : 'CPU',
      `${f.tp}·${f.pp}·${f.cp}·${f.dp ?? '?'}`,
      batch,
      f.global === null ? '-' : `${f.global}${f.globalParts ? ` (${f.globalParts})` : ''}`,
      f.seq === null ? '-' : String(f.seq),
      f.tokensPerStep === null ? '-' : si(f.tokensPerStep),
      f.unit === 'iterations' ? `${f.from}→${f.to}` : `${f.to - f.from} ${f.unit}`,
      f.tokens === null ? '-' : si(f.tokens),
      f.precision,
      f.lr ?? '-',
    ]];
  });
  if (!rows.length) return [];
  const total = rows.length > 1 && plan.steps.some((s) => s.kind === 'cpt') ? cptTokens(plan) : null;
  return [
    '',
    'training, as each step\'s command line sets it (TP·PP·CP·DP: tensor, pipeline, context and data parallel ranks;',
    'MICRO and GLOBAL: samples per micro-batch and per optimizer step; dyn: slime packs sequences up to that many tokens):',
    ...table([['STEP', 'GPUS', 'TP·PP·CP·DP', 'MICRO', 'GLOBAL', 'SEQ', 'TOKENS/STEP', 'ITERATIONS', 'TOKENS', 'PRECISION', 'LR SCHEDULE'], ...rows]),
    ...(total ? [`CPT in all: ${si(total)} tokens`] : []),
  ];
}

/** Tokens of the CPT phases together, where each is known. */
function cptTokens(plan: Plan): number | null {
  const each = plan.steps.filter((s) => s.kind === 'cpt').map((s) => stepFacts(s, startOf(s, plan.steps))?.tokens ?? null);
  return each.length && each.every((t) => t !== null) ? each.reduce((a, b) => a! + b!, 0) : null;
}

/** Each step's command in short; `--json` has the whole argv. */
function commandRows(plan: Plan): string[] {
  return [
    '',
    'commands (in short: `infir2 plan --json` has each step\'s whole argv, its resume argv and its stop command):',
    ...table([['STEP', 'BACKEND', 'COMMAND'], ...plan.steps.map((s) => [s.id, s.backend, `${commandHead(s)}${moreArgs(s)}`])]),
  ];
}

/** `  +135 arguments`: what the short command leaves out. */
function moreArgs(step: PlanStep): string {
  const argv = step.command.argv;
  const scriptAt = argv.findIndex((a, i) => i > 0 && /\.(py|sh)$/.test(a));
  const rest = argv.length - (scriptAt < 0 ? 1 : scriptAt + 1);
  return rest > 0 ? `  +${rest} arguments` : '';
}

/** Steps with the same retry budgets share a line, in plan order. */
function retryLines(steps: PlanStep[]): string[] {
  const groups = new Map<string, string[]>();
  for (const s of steps) {
    const words = (Object.entries(s.retries) as [FailureClass, number][])
      .filter(([cls]) => cls !== 'config')
      .map(([cls, n]) => `${cls} ${n}`)
      .join(', ');
    groups.set(words, [...(groups.get(words) ?? []), s.id]);
  }
  return ['', 'retry budgets (failures in a row without a new checkpoint, per class; a config failure is never retried):', ...[...groups].map(([w, ids]) => `  ${ids.join(', ')}: ${w}`)];
}

export function formatPlanTable(plan: Plan): string {
  return [
    `recipe ${plan.recipe} · ${plan.model} · ${plan.precision} · run ${plan.runId}`,
    `run dir ${plan.runDir}`,
    '',
    ...stepRows(plan),
    ...trainingRows(plan),
    ...commandRows(plan),
    ...retryLines(plan.steps),
    '',
    'stall limits (silent longer than this: a hang, stopped and retried):',
    ...stallLines(plan.steps),
    ...retentionLines(plan.steps),
    ...(plan.notify ? ['', 'notify (sent by the workers of the orchestrator queue):', ...plan.notify.webhooks.map(webhookLine)] : []),
  ].join('\n');
}

const gb = (bytes: number) => `${bytes >= 1e10 ? Math.round(bytes / 1e9) : Number((bytes / 1e9).toPrecision(2))} GB`;

/**
 * The disk retention bounds, per checkpoint directory: at most K checkpoints × the size of one, with and without
 * optimizer state. Steps that save into one directory (CPT warmup and stable) share one line and one bound; the
 * last line adds up every directory, all of which stay on disk until the run's end.
 */
function retentionLines(steps: PlanStep[]): string[] {
  const dirs = new Map<string, { ids: string[]; r: NonNullable<CheckpointSpec['retention']> }>();
  for (const s of steps) {
    const r = s.checkpoint?.retention;
    if (!r) continue;
    const d = dirs.get(s.checkpoint!.dir);
    if (d) d.ids.push(s.id);
    else dirs.set(s.checkpoint!.dir, { ids: [s.id], r });
  }
  if (!dirs.size) return [];
  const lines = [...dirs.values()].map(({ ids, r }) => {
    const { withOptimizer: w, weightsOnly: o } = r.checkpointBytes;
    const who = ids.length > 1 ? `${ids.join(' + ')} (one directory)` : ids[0];
    return `  ${who}: ${r.summary} → at most ${r.maxKept} checkpoints × ${gb(w)} = ${gb(r.maxKept * w)} with optimizer state (${gb(r.maxKept * o)} weights only)`;
  });
  const all = [...dirs.values()].reduce((t, { r }) => t + r.maxKept * r.checkpointBytes.withOptimizer, 0);
  const unbounded = steps.filter((s) => s.checkpoint && !s.checkpoint.retention).map((s) => s.id);
  return [
    '',
    'checkpoint retention (what stays on disk; the rest is deleted as newer checkpoints are saved):',
    ...lines,
    `  every directory together, at the run's end: at most ${gb(all)}${unbounded.length ? `, besides ${unbounded.join(', ')}, which keep every checkpoint (no keep)` : ''}`,
  ];
}

/** `  env:SLACK_URL (slack): run.failed, step.hang`; a URL written in the recipe is shown by its host only. */
function webhookLine(w: WebhookSpec): string {
  const where = w.url.startsWith('env:') ? w.url : `${w.url.replace(/^(https?:\/\/[^/]+).*$/, '$1')}/…`;
  const events = w.events.length === NOTIFY_EVENTS.length ? 'every event' : w.events.join(', ');
  return `  ${where} (${w.format}): ${events}`;
}

/** Steps with the same limits share a line, in plan order. */
function stallLines(steps: PlanStep[]): string[] {
  const groups = new Map<string, string[]>();
  for (const s of steps) {
    const words = s.stall ? describeStallSpec(s.stall) : `${shortDuration(s.stallTimeoutSec)} fixed (no progress lines)`;
    groups.set(words, [...(groups.get(words) ?? []), s.id]);
  }
  return [...groups].map(([words, ids]) => `  ${ids.join(', ')}: ${words}`);
}
