/**
 * The report written at the end of every run (src/report/), by a worker of one of the run's pools: the run
 * directory is on the storage those workers mount, which the orchestrator's host may not. It reads the files and
 * the run's final status, so what it shows is what `infir2 report` shows.
 *
 * It is rendered in a child process (report/report-process.ts), a few at a time: rendering is synchronous CPU
 * work, and on the worker's event loop 100 runs ending together stalled the heartbeats, hand-offs and status
 * queries of every other run for tens of seconds and took the worker past 1 GB (issue 33).
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { setPriority } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
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

/** Reports rendered at once by one worker; the others wait their turn (the run's end waits up to 2 minutes). */
export const REPORT_PROCESSES = 2;
/** The renderer's niceness (0 normal, 19 lowest). */
const REPORT_NICENESS = 10;

/** The renderer: compiled (dist/) it runs as it is; from source (tests, tsx), through tsx. */
function renderer(): string[] {
  const here = dirname(fileURLToPath(import.meta.url));
  const js = join(here, '..', 'report', 'report-process.js');
  return existsSync(js) ? [js] : ['--import', 'tsx', join(here, '..', 'report', 'report-process.ts')];
}

let running = 0;
const waiting: (() => void)[] = [];

async function turn<T>(fn: () => Promise<T>): Promise<T> {
  if (running >= REPORT_PROCESSES) await new Promise<void>((resolve) => waiting.push(resolve));
  running += 1;
  try {
    return await fn();
  } finally {
    running -= 1;
    waiting.shift()?.();
  }
}

function render(input: RunReportInput): Promise<RunReportResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, renderer(), { stdio: ['pipe', 'pipe', 'pipe'] });
    // Behind the trainers and the hand-offs: a report is read once, a run waits on neither.
    try {
      if (child.pid) setPriority(child.pid, REPORT_NICENESS);
    } catch {
      /* not allowed here: it renders at the worker's priority */
    }
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) {
        try {
          resolve(JSON.parse(out) as RunReportResult);
          return;
        } catch {
          /* fall through: an unreadable answer is a failure */
        }
      }
      reject(new Error(`the report renderer exited ${code}: ${err.trim().split('\n').at(-1) ?? ''}`));
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(JSON.stringify(input));
  });
}

export async function writeRunReport(input: RunReportInput): Promise<RunReportResult> {
  return turn(() => render(input));
}
