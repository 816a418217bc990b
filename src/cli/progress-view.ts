/**
 * Live progress of a run in the terminal: one line per step with a bar, iteration/total, loss and ETA. Pure
 * rendering; the rate behind the ETA is measured from successive observations (RateTracker).
 */
import type { StepState } from '../plan/contracts.js';
import { stepFigures } from '../views/step-figures.js';
import { failureWords, headlineMetrics } from './status-view.js';

const BAR = 24;

/** Iterations per second of each step, from the first and latest (time, iteration) it was seen at. */
export class RateTracker {
  private first = new Map<string, { t: number; it: number }>();
  private last = new Map<string, { t: number; it: number }>();

  observe(id: string, iteration: number | null | undefined, now: number): void {
    if (iteration === null || iteration === undefined) return;
    const f = this.first.get(id);
    // A resume can move the iteration back: start measuring again.
    if (!f || iteration < (this.last.get(id)?.it ?? 0)) this.first.set(id, { t: now, it: iteration });
    this.last.set(id, { t: now, it: iteration });
  }

  rate(id: string): number | null {
    const f = this.first.get(id);
    const l = this.last.get(id);
    if (!f || !l || l.t - f.t < 1000 || l.it <= f.it) return null;
    return (l.it - f.it) / ((l.t - f.t) / 1000);
  }
}

export function formatDuration(sec: number): string {
  if (!Number.isFinite(sec) || sec < 0) return '--:--';
  const s = Math.round(sec);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const r = s % 60;
  const two = (n: number) => String(n).padStart(2, '0');
  return h ? `${h}:${two(m)}:${two(r)}` : `${m}:${two(r)}`;
}

export function bar(done: number, total: number, width = BAR): string {
  const frac = total > 0 ? Math.min(1, Math.max(0, done / total)) : 0;
  const full = Math.round(frac * width);
  return `[${'#'.repeat(full)}${'-'.repeat(width - full)}]`;
}

/**
 * What a finished (completed or kept) step's line adds: its result, as `infir2 status` and the Web UI show it
 * (final iteration, loss, an evaluation's headline score), never the stale progress of its last heartbeat.
 */
function finishedDetail(s: StepState): string {
  const f = stepFigures(s);
  if (!f.finished || !s.result) return '';
  const parts = [
    f.iteration !== null ? `${f.iteration}/${f.total ?? '?'}` : '',
    f.loss !== null ? `loss ${f.loss.toPrecision(4)}` : '',
    headlineMetrics(s.result.metrics),
  ];
  return parts.filter(Boolean).map((x) => `  ${x}`).join('');
}

/** One line for one step. */
export function progressLine(s: StepState, rate: number | null, idWidth: number): string {
  const p = s.progress;
  const id = s.id.padEnd(idWidth);
  if (s.status === 'running' && p?.iteration != null && p.totalIterations) {
    const eta = rate ? formatDuration((p.totalIterations - p.iteration) / rate) : '--:--';
    const loss = p.loss != null ? `  loss ${p.loss.toPrecision(4)}` : '';
    const attempt = s.attempts > 1 ? `  attempt ${s.attempts}` : '';
    return `${id}  ${bar(p.iteration, p.totalIterations)} ${p.iteration}/${p.totalIterations}${loss}  ETA ${eta}${attempt}`;
  }
  const detail =
    s.status === 'failed' && s.lastFailure
      ? `  ${s.lastFailure.class}: ${failureWords(s.id, s.lastFailure, 80)}`
      : s.status === 'running' && s.lastFailure
        ? `  retrying after ${s.lastFailure.class} (attempt ${s.attempts})`
        : finishedDetail(s);
  return `${id}  ${s.status}${detail}`;
}

/**
 * One line for a log, not a terminal (`run` without a TTY): printed when the step's status, checkpoint or
 * attempt changes. A finished step shows its result, as progressLine does.
 */
export function plainLine(s: StepState): string {
  const id = s.id.padEnd(14);
  const f = stepFigures(s);
  if (f.finished) return `${id} ${s.status}${finishedDetail(s)}${s.attempts > 1 ? `  attempt ${s.attempts}` : ''}`;
  const iter = f.iteration !== null ? ` ${f.iteration}/${f.total ?? '?'}` : '';
  const loss = f.loss !== null ? ` loss ${f.loss.toPrecision(4)}` : '';
  const ckpt = s.status === 'running' && f.checkpoint !== null ? ` checkpoint ${f.checkpoint}` : '';
  const fail = s.lastFailure ? ` (${s.lastFailure.class}: ${failureWords(s.id, s.lastFailure, 100)})` : '';
  return `${id} ${s.status}${iter}${loss}${ckpt}${s.attempts > 1 ? ` attempt ${s.attempts}` : ''}${fail}`;
}

export function progressBlock(steps: StepState[], rates: RateTracker): string[] {
  const w = Math.max(...steps.map((s) => s.id.length));
  return steps.map((s) => progressLine(s, rates.rate(s.id), w));
}
