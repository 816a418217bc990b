/**
 * Plain-text rendering of a run's status for the terminal. Which iteration, loss, checkpoint and score a step
 * shows is stepFigures' decision, the same as the Web UI's stage table: a completed or kept step its final
 * result, a running or failed one its progress.
 */
import type { Progress, RunStatus, StepState } from '../plan/contracts.js';
import { shortDuration } from '../plan/stall-words.js';
import { TIME_CATEGORIES } from '../plan/goodput.js';
import { evaluating, evalSeries, formatGoodput, formatScore, goodputWords, headlineScore, runTimeFigures, stepFigures, stepTimeFigures, type StepFigures } from '../views/step-figures.js';

function iterCell(f: StepFigures): string {
  return f.iteration === null ? '-' : `${f.iteration}/${f.total ?? '?'}`;
}

function num(x: number | null | undefined, digits = 4): string {
  return x === null || x === undefined ? '-' : Number(x).toPrecision(digits);
}

/** A rate with an SI suffix (`812`, `12.8k`, `1.05M`): toPrecision alone writes `1.28e+4`. */
export function rate(x: number): string {
  const [v, suffix] = x >= 999.5e3 ? [x / 1e6, 'M'] : x >= 999.5 ? [x / 1e3, 'k'] : [x, ''];
  return `${Number(v.toPrecision(3))}${suffix}`;
}

/**
 * The numbers worth a glance: the report's headline score as the Web UI shows it ("acc 85.7 %"), else its
 * first three numbers.
 */
export function headlineMetrics(m: Record<string, number>): string {
  const score = headlineScore(m);
  if (score) return formatScore(score);
  return Object.keys(m).slice(0, 3).map((k) => `${k}=${num(m[k], 3)}`).join(' ');
}

/** `45s`, `12m`, `3h05m`: how long something has waited. */
export function waitedFor(sinceIso: string, now = Date.now()): string {
  const sec = Math.max(0, Math.round((now - Date.parse(sinceIso)) / 1000));
  if (sec < 60) return `${sec}s`;
  if (sec < 3600) return `${Math.floor(sec / 60)}m`;
  return `${Math.floor(sec / 3600)}h${String(Math.floor((sec % 3600) / 60)).padStart(2, '0')}m`;
}

/**
 * What a running step waits for, if it waits: between attempts (the workflow's pause after a storage fault) or
 * inside one (the attempt's heartbeat: GPUs, the directory's lock). `waiting 3m: disk full on … (0.2 GB free)`.
 */
export function waitingNote(s: StepState, now = Date.now()): string | null {
  if (s.status !== 'running') return null;
  const w = s.waiting ?? s.progress?.waiting ?? null;
  if (!w) return null;
  const next = w.until ? `; next attempt in ${waitedFor(new Date(now).toISOString(), Date.parse(w.until))}` : '';
  return `waiting ${waitedFor(w.since, now)}: ${w.reason}${next}`;
}

/**
 * A failure's message for a one-line note: without the `<step>: <class>: ` its supervisor put in front (the cell
 * says both already), cut at a word within `max` characters with an ellipsis, never in the middle of a word.
 */
export function failureWords(stepId: string, f: { class: string; message: string }, max: number): string {
  let m = f.message.trim();
  for (const prefix of [`${stepId}: `, `${f.class}: `]) if (m.startsWith(prefix)) m = m.slice(prefix.length);
  if (m.length <= max) return m;
  const cut = m.slice(0, max - 1);
  const space = cut.lastIndexOf(' ');
  return `${(space > max / 2 ? cut.slice(0, space) : cut).replace(/[\s,;:(]+$/, '')}…`;
}

/**
 * The phase the stall limit follows, in words. A trainer that has already printed iterations but is still held to
 * the startup limit has shown no gap between iterations the policy could learn from yet (e.g. every logged
 * iteration ends in a save): `startup` would read as a contradiction beside 360/480.
 */
export function stallPhaseWords(p: Progress): string {
  const phase = p.stallLimit!.phase;
  if (phase === 'startup' && p.iteration !== null && p.iteration > (p.resumedFrom ?? 0)) return 'no iteration rhythm measured yet';
  return phase;
}

export function stepCells(s: StepState, now = Date.now()): string[] {
  const p = s.progress;
  const f = stepFigures(s);
  const waiting = waitingNote(s, now);
  // A finished step's report: its headline score (as the Web UI shows it), else its first numbers.
  const metrics = f.finished && s.result ? headlineMetrics(s.result.metrics) : '';
  const failure = s.lastFailure && !waiting ? `${s.lastFailure.class}${metrics ? '' : `: ${failureWords(s.id, s.lastFailure, 72)}`}` : '';
  // The preflight's warnings: the running attempt's, else those the step finished with.
  const warning = [s.status === 'running' ? p?.warning : null, ...((s.status === 'running' ? p?.preflight : s.result?.preflight) ?? [])].filter(Boolean).join(' · ');
  // The limit the trainer is held to now: a hang is declared past it (activities/stall-policy.ts).
  const stall = s.status === 'running' && !waiting && p?.stallLimit ? `stall limit ${shortDuration(p.stallLimit.limitSec)} (${stallPhaseWords(p)})` : '';
  // The scheduler job of the newest attempt: the id `sacct`/`scontrol` and the cluster's dashboards know it by.
  const job = p?.job ? `${p.job.scheduler} job ${p.job.id}${p.job.nodes ? ` on ${p.job.nodes}` : ''}` : '';
  return [
    s.id,
    waiting ? 'waiting' : evaluating(s) ? 'evaluating' : s.status,
    iterCell(f),
    num(f.loss),
    p?.throughput != null ? `${rate(p.throughput)} ${p.throughputUnit ?? ''}`.trim() : '-',
    f.checkpoint === null ? '-' : String(f.checkpoint),
    String(s.attempts),
    lastWorker(s) ?? '-',
    [waiting, metrics, failure, warning, stall, job, evalSeries(s)].filter(Boolean).join(' · '),
  ];
}

/** The worker of the step's newest attempt (`pid@host`): the running one's heartbeat, else its last record. */
export function lastWorker(s: StepState): string | null {
  if (s.status === 'kept' || s.attempts === 0) return null;
  const live = s.status === 'running' ? s.progress?.time?.worker : undefined;
  return live ?? s.time?.attempts.at(-1)?.worker ?? null;
}

/**
 * Which worker ran each attempt, for the steps that took more than one: `cpt.stable  1 812@gpu01 preempted · 2
 * 907@gpu02 completed`. An attempt still running is `running`; one folded into the step's earlier total is left out.
 */
export function attemptLines(steps: StepState[]): string[] {
  const rows = steps.flatMap((s) => {
    const records = s.time?.attempts ?? [];
    const live = s.status === 'running' ? s.progress?.time : null;
    const all = live && !records.some((r) => r.attempt === live.attempt) ? [...records, live] : records;
    if (all.length < 2) return [];
    const ended = (i: number) => {
      const r = all[i]!;
      if (r.failure) return r.failure;
      if (r.endedAt === null) return 'running';
      return i === all.length - 1 && (s.status === 'completed' || s.status === 'cancelled' || s.status === 'failed') ? s.status : 'ended';
    };
    return [[s.id, all.map((r, i) => `${r.attempt} ${r.worker ?? '(worker not recorded)'} ${ended(i)}`).join(' · ')]];
  });
  return rows.length ? ['attempts (number, worker, how it ended):', ...table(rows).split('\n').map((l) => `  ${l}`)] : [];
}

export function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ').trimEnd()).join('\n');
}

/**
 * Where the run's time went: its goodput line, then a row per step that ran with its goodput and seconds per
 * category (a running attempt counted until `now`); '' before any step has run.
 */
export function renderTimeTable(st: RunStatus, now = Date.now()): string {
  const steps = st.steps;
  const run = runTimeFigures(steps, now);
  if (!run) return '';
  const rows = steps.flatMap((s) => {
    const f = stepTimeFigures(s, now);
    return f ? [[s.id, formatGoodput(f.goodput), ...TIME_CATEGORIES.map((c) => ((f.secs[c] ?? 0) >= 0.5 ? shortDuration(f.secs[c]!) : '-'))]] : [];
  });
  return `${goodputWords(run)}\n\n${table([['STEP', 'GOODPUT', ...TIME_CATEGORIES.map((c) => c.toUpperCase())], ...rows])}`;
}

export function renderStatusTable(workflowId: string, st: RunStatus, now = Date.now()): string {
  // A message that only repeats the status (`cancelled — cancelled`) says nothing.
  const message = st.message && st.status !== 'completed' && st.message.trim().toLowerCase() !== st.status ? ` — ${st.message}` : '';
  const head = `${workflowId}: ${st.status}${message}\nrun dir: ${st.runDir}${st.report ? `\nreport: ${st.report}` : ''}`;
  const rows = [['STEP', 'STATUS', 'ITER', 'LOSS', 'THROUGHPUT', 'CKPT', 'ATTEMPTS', 'WORKER', 'NOTES'], ...st.steps.map((s) => stepCells(s, now))];
  const attempts = attemptLines(st.steps);
  const time = renderTimeTable(st, now);
  return `${head}\n\n${table(rows)}${attempts.length ? `\n\n${attempts.join('\n')}` : ''}${time ? `\n\n${time}` : ''}`;
}
