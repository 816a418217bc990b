/**
 * Everything a report shows, read from a run directory alone: `plan.json` (the steps), `recipe.json` (the
 * parameters), `results/*.json` (what finished, its time accounting and scores) and `logs/*.log` (the series,
 * through the supervisor's parsers; a rotated log read as `infir2 logs` reads it, streamed a line at a time so
 * that no log is ever held whole: a step log of any size is read in bounded memory). No Temporal: a report of a
 * run whose server is gone still works. A file that is missing or unreadable becomes a line in `problems`, shown
 * on the page, never an exception.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { RunStatus, StepResult } from '../plan/contracts.js';
import { PARITY_FILE, type ParitySpec } from '../plan/parity.js';
import type { Plan, PlanStep } from '../plan/types.js';
import { LineSplitter } from '../engine-logs/line-splitter.js';
import { StepLogReader } from '../rundir/step-log.js';
import { readFileSafe } from '../util/safe-fs.js';
import { headlineScore, type HeadlineScore } from '../views/step-figures.js';
import { MAX_CURVE_POINTS } from './curve.js';
import { StepSeriesBuilder, type StepSeries } from './step-series.js';

export type StepReportStatus = 'completed' | 'kept' | 'failed' | 'running' | 'cancelled' | 'pending' | 'skipped' | 'stopped';

export interface StepReport {
  id: string;
  kind: PlanStep['kind'];
  backend: PlanStep['backend'];
  summary: string;
  status: StepReportStatus;
  result: StepResult | null;
  /** null: the step wrote no log (not started, or its log is gone). */
  series: StepSeries | null;
}

/** One evaluation: a benchmark's headline score for one model (`fp8`, `rl`, `sft.stage1@20`). */
export interface EvalCell {
  benchmark: string;
  model: string;
  score: HeadlineScore;
  /** The step that scored it (a plan step, or an evaluation-while-training child: `sft.stage1.eval20.arith`). */
  step: string;
  /** The training step and iteration of an evaluation while training; absent for the final models'. */
  during?: { step: string; iteration: number };
}

export interface RunData {
  runDir: string;
  plan: Plan;
  /** The resolved recipe (`recipe.json`); null when missing. */
  recipe: Record<string, unknown> | null;
  status: RunStatus['status'] | 'unknown';
  steps: StepReport[];
  evals: EvalCell[];
  /** A parity run's variants (`parity.json`, written by `infir2 parity`); null for any other run. */
  parity: ParitySpec | null;
  problems: string[];
}

export class NotARunDir extends Error {}

/** A run file read whole: never a FIFO or a device (a FIFO planted in results/ blocked the worker writing the report). */
const MAX_RUN_FILE_BYTES = 256 * 1024 * 1024;
const runFile = (file: string) => readFileSafe(file, { maxBytes: MAX_RUN_FILE_BYTES, follow: true })?.text ?? '';

function readJson<T>(file: string, problems: string[], what: string): T | null {
  if (!existsSync(file)) return null;
  try {
    return JSON.parse(runFile(file)) as T;
  } catch (err) {
    problems.push(`${what} (${file}) could not be read: ${(err as Error).message}`);
    return null;
  }
}

/**
 * A step's series from its log as `infir2 logs` prints it (head, a marker where the middle was dropped, the
 * newest part), a chunk and a line at a time: memory is one chunk, one line (cut at the splitter's cap) and the
 * curves, whatever the log's size; null when the step wrote no log.
 */
export function readStepSeries(file: string): StepSeries | null {
  const series = new StepSeriesBuilder();
  const lines = new LineSplitter((line) => series.line(line), undefined, false);
  const reader = new StepLogReader(file, (chunk) => lines.push(chunk));
  if (!reader.exists()) return null;
  try {
    reader.pump();
  } finally {
    reader.close();
  }
  lines.end();
  return series.finish();
}

const EVAL_CHILD = /^(.+)\.eval(\d+)\.([^.]+)$/;

/**
 * An evaluation step's benchmark and model: `eval.<model>.<benchmark>` (the tiny recipe's `eval.fp8.arith`), or
 * `eval.<benchmark>` evaluating what its dependency made (the 7B plan's `eval.aime24` after `convert.rl`: `rl`).
 */
function evalNames(step: PlanStep): { model: string; benchmark: string } {
  const parts = step.id.split('.');
  if (parts.length >= 3) return { model: parts[1]!, benchmark: parts.slice(2).join('.') };
  const dep = step.dependsOn.at(-1) ?? '';
  return { model: dep.startsWith('convert.') ? dep.slice('convert.'.length) : dep || 'model', benchmark: parts.slice(1).join('.') || step.id };
}

/** A finished step's status from files alone: its result; else its log's last attempt. */
function statusFromFiles(result: StepResult | null, series: StepSeries | null): StepReportStatus {
  if (result) return 'completed';
  const last = series?.attempts.at(-1);
  if (!last) return 'pending';
  if (last.failure) return 'failed';
  return last.end ? 'stopped' : 'running';
}

export function readRunData(runDir: string, live?: RunStatus | null): RunData {
  const plan = (() => {
    const file = join(runDir, 'plan.json');
    if (!existsSync(file)) throw new NotARunDir(`${runDir} holds no plan.json: not a run directory (or it was removed)`);
    try {
      return JSON.parse(runFile(file)) as Plan;
    } catch (err) {
      throw new NotARunDir(`${file} could not be read: ${(err as Error).message}`);
    }
  })();
  const problems: string[] = [];
  const recipe = readJson<Record<string, unknown>>(join(runDir, 'recipe.json'), problems, 'the resolved recipe');
  if (!recipe) problems.push(`recipe.json is missing: the parameters table is empty`);
  const resultsDir = join(runDir, 'results');
  const result = (id: string) => readJson<StepResult>(join(resultsDir, `${id}.json`), problems, `the result of ${id}`);

  const liveSteps = new Map((live?.steps ?? []).map((s) => [s.id, s]));
  const steps: StepReport[] = plan.steps.map((step) => {
    const r = result(step.id);
    const series = readStepSeries(join(runDir, 'logs', `${step.id}.log`));
    const st = liveSteps.get(step.id)?.status;
    const status: StepReportStatus = st ?? statusFromFiles(r, series);
    if (series === null && r !== null) problems.push(`${step.id}: its log (logs/${step.id}.log) is missing: no series for it`);
    if (series?.cut) problems.push(`${step.id}: its log was rotated (${series.cut}): the series have a gap there`);
    if (series && series.grid > 1) problems.push(`${step.id}: a series passed ${MAX_CURVE_POINTS} points: it keeps one x in ${series.grid} (the chart coarser, the memory bounded)`);
    return { id: step.id, kind: step.kind, backend: step.backend, summary: step.summary, status, result: r, series };
  });

  const evals: EvalCell[] = [];
  for (const step of plan.steps.filter((s) => s.kind === 'eval')) {
    const r = steps.find((s) => s.id === step.id)?.result;
    const score = headlineScore(r?.metrics);
    if (score) evals.push({ ...evalNames(step), score, step: step.id });
  }
  // Evaluations while training: `<step>.eval<N>.<benchmark>` results beside the steps'.
  const files = existsSync(resultsDir) ? readdirSync(resultsDir) : [];
  const during: EvalCell[] = [];
  for (const f of files) {
    const m = EVAL_CHILD.exec(f.replace(/\.json$/, ''));
    if (!m || m[3] === 'export') continue;
    const id = f.replace(/\.json$/, '');
    const score = headlineScore(result(id)?.metrics);
    if (score) during.push({ benchmark: m[3]!, model: `${m[1]}@${m[2]}`, score, step: id, during: { step: m[1]!, iteration: Number(m[2]) } });
  }
  const order = new Map(plan.steps.map((s, i) => [s.id, i]));
  during.sort((a, b) => (order.get(a.during!.step) ?? 0) - (order.get(b.during!.step) ?? 0) || a.during!.iteration - b.during!.iteration);
  evals.push(...during);

  const status: RunData['status'] = live?.status ?? (steps.every((s) => s.status === 'completed' || s.status === 'kept') ? 'completed' : steps.some((s) => s.status === 'failed') ? 'failed' : 'unknown');
  const parity = readJson<ParitySpec>(join(runDir, PARITY_FILE), problems, 'the parity run\'s variants');
  return { runDir, plan, recipe, status, steps, evals, parity, problems };
}
