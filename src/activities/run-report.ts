/**
 * The report written at the end of every run (src/report/), by a worker of one of the run's pools: the run
 * directory is on the storage those workers mount, which the orchestrator's host may not. It reads the files and
 * the run's final status, so what it shows is what `infir2 report` shows.
 *
 * It is rendered in child processes (report/report-process.ts), at most REPORT_PROCESSES of them, at a low CPU
 * priority: rendering is synchronous CPU work, and on the worker's event loop 100 runs ending together stalled
 * the heartbeats, hand-offs and status queries of every other run for tens of seconds and took the worker past
 * 1 GB (issue 33). A renderer takes job after job, and one is kept warm while steps start on the worker.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { setPriority } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { nodeScript } from '../util/node-script.js';
import type { RunStatus } from '../plan/contracts.js';

export interface RunReportInput {
  runDir: string;
  status: RunStatus;
}

export interface RunReportResult {
  page: string;
  charts: number;
  bytes: number;
  problems: number;
}

/** Renderers one worker runs at once; a report waits for a free one (the run's end waits up to 2 minutes). */
export const REPORT_PROCESSES = 2;
/** The renderers' niceness (0 normal, 19 lowest): behind the trainers and the hand-offs. */
const REPORT_NICENESS = 10;
/**
 * A renderer with no job for this long exits (it holds the chart library, ~90 MB). While steps keep starting on
 * the worker, one stays warm (`warmReportRenderer`): starting one and loading the library took ~1 s, which every
 * run's end waited for.
 */
export const RENDERER_IDLE_MS = 10 * 60_000;

/** The renderer's node arguments (report/report-process). */
function rendererArgs(): string[] {
  const { script, execArgv } = nodeScript(join(dirname(fileURLToPath(import.meta.url)), '..', 'report'), 'report-process');
  return [...execArgv, script];
}

interface Renderer {
  child: ChildProcess;
  /** The job it renders now (its answer's taker), or null when idle. */
  current: { resolve(r: RunReportResult): void; reject(e: Error): void } | null;
  idle: NodeJS.Timeout | null;
  stderr: string;
}

const renderers: Renderer[] = [];
const waiting: (() => void)[] = [];

function startRenderer(): Renderer {
  const child = spawn(process.execPath, rendererArgs(), { stdio: ['pipe', 'pipe', 'pipe'] });
  try {
    if (child.pid) setPriority(child.pid, REPORT_NICENESS);
  } catch {
    /* not allowed here: it renders at the worker's priority */
  }
  const r: Renderer = { child, current: null, idle: null, stderr: '' };
  child.stderr!.on('data', (d: Buffer) => (r.stderr = (r.stderr + d.toString()).slice(-4000)));
  child.stdin!.on('error', () => undefined);
  child.stdout!.setEncoding('utf8');
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const job = r.current;
    r.current = null;
    if (!job) return;
    try {
      const answer = JSON.parse(line) as RunReportResult | { error: string };
      if ('error' in answer) job.reject(new Error(`the report could not be written: ${answer.error}`));
      else job.resolve(answer);
    } catch {
      job.reject(new Error(`the report renderer answered: ${line.slice(0, 200)}`));
    }
    release(r);
  });
  const gone = (why: string) => {
    const i = renderers.indexOf(r);
    if (i >= 0) renderers.splice(i, 1);
    if (r.idle) clearTimeout(r.idle);
    r.current?.reject(new Error(`the report renderer ${why}: ${r.stderr.trim().split('\n').at(-1) ?? ''}`));
    r.current = null;
    waiting.shift()?.();
  };
  child.on('error', (err) => gone(`could not start (${err.message})`));
  child.on('exit', (code, signal) => gone(`exited ${signal ?? code}`));
  renderers.push(r);
  return r;
}

type Pipe = { ref?(): void; unref?(): void } | null;

/** An idle renderer must not keep the worker's process alive on its own; a busy one must. */
function hold(r: Renderer, busy: boolean): void {
  for (const h of [r.child, r.child.stdout as Pipe, r.child.stderr as Pipe, r.child.stdin as Pipe]) (busy ? h?.ref : h?.unref)?.call(h);
}

/** A renderer is free again: the next waiting job takes it, or it exits after a while. */
function release(r: Renderer): void {
  hold(r, false);
  const next = waiting.shift();
  if (next) return next();
  idleFor(r);
}

function idleFor(r: Renderer): void {
  if (r.idle) clearTimeout(r.idle);
  r.idle = setTimeout(() => r.child.stdin!.end(), RENDERER_IDLE_MS);
  r.idle.unref();
}

/**
 * A step starts on this worker: its run will want a report, so a renderer waits ready (one is started if none
 * is there, an idle one's clock starts again).
 */
export function warmReportRenderer(): void {
  const idle = renderers.find((x) => !x.current);
  if (idle) return idleFor(idle);
  if (renderers.length || warming) return;
  // Not at once: the step's trainer is starting now, and loading the chart library takes a CPU for ~0.5 s.
  warming = setTimeout(() => {
    warming = null;
    if (renderers.length) return;
    const r = startRenderer();
    hold(r, false);
    idleFor(r);
  }, WARM_AFTER_MS);
  warming.unref();
}

/** How long after a step's start its renderer is started. */
const WARM_AFTER_MS = 5_000;
let warming: NodeJS.Timeout | null = null;

/** Gives the job to a free renderer (started if there are fewer than REPORT_PROCESSES), waiting for one if need be. */
async function render(input: RunReportInput): Promise<RunReportResult> {
  for (;;) {
    const r = renderers.find((x) => !x.current) ?? (renderers.length < REPORT_PROCESSES ? startRenderer() : null);
    if (r) {
      if (r.idle) clearTimeout(r.idle);
      r.idle = null;
      hold(r, true);
      // Taken at once, before anything else can run: no two jobs share a renderer.
      return new Promise<RunReportResult>((resolve, reject) => {
        r.current = { resolve, reject };
        r.child.stdin!.write(`${JSON.stringify(input)}\n`);
      });
    }
    await new Promise<void>((resolve) => waiting.push(resolve));
  }
}

export async function writeRunReport(input: RunReportInput): Promise<RunReportResult> {
  return render(input);
}
