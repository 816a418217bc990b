/** The human view of a Plan: a stage table, one row per step, as `infir2 plan` prints it. */
import { basename } from 'node:path';
import { describeStallSpec, shortDuration } from './stall-words.js';
import { NOTIFY_EVENTS, type Plan, type PlanStep, type WebhookSpec } from './types.js';

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

function iterations(step: PlanStep): string {
  const c = step.completion;
  if (c.kind !== 'checkpoint') return '-';
  return step.progress.format === 'slime' ? `${c.iteration + 1} rollouts` : `→ ${c.iteration}`;
}

export function formatPlanTable(plan: Plan): string {
  const header = ['STEP', 'BACKEND', 'POOL', 'GPUS', 'DEPENDS ON', 'ITERATIONS', 'COMMAND'];
  const rows = plan.steps.map((s) => [
    s.id,
    s.backend,
    s.pool,
    s.nodes > 1 ? `${s.nodes}×${s.gpus}` : String(s.gpus),
    s.dependsOn.join(', ') || '-',
    iterations(s),
    commandHead(s),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
  return [
    `recipe ${plan.recipe} · ${plan.model} · ${plan.precision} · run ${plan.runId}`,
    `run dir ${plan.runDir}`,
    '',
    line(header),
    ...rows.map(line),
    '',
    'stall limits (silent longer than this: a hang, stopped and retried):',
    ...stallLines(plan.steps),
    ...retentionLines(plan.steps),
    ...(plan.notify ? ['', 'notify (sent by the workers of the orchestrator queue):', ...plan.notify.webhooks.map(webhookLine)] : []),
  ].join('\n');
}

const gb = (bytes: number) => `${bytes >= 1e10 ? Math.round(bytes / 1e9) : Number((bytes / 1e9).toPrecision(2))} GB`;

/** The disk a step's retention bounds: at most K checkpoints × the size of one, with and without optimizer state. */
function retentionLines(steps: PlanStep[]): string[] {
  const lines = steps.flatMap((s) => {
    const r = s.checkpoint?.retention;
    if (!r) return [];
    const { withOptimizer: w, weightsOnly: o } = r.checkpointBytes;
    return [`  ${s.id}: ${r.summary} → at most ${r.maxKept} checkpoints × ${gb(w)} = ${gb(r.maxKept * w)} with optimizer state (${gb(r.maxKept * o)} weights only)`];
  });
  return lines.length ? ['', 'checkpoint retention (what stays on disk; the rest is deleted as newer checkpoints are saved):', ...lines] : [];
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
