/**
 * The report written at the end of every run (src/report/), by a worker of one of the run's pools: the run
 * directory is on the storage those workers mount, which the orchestrator's host may not. It reads the files and
 * the run's final status, so what it shows is what `infir2 report` shows.
 */
import type { RunStatus } from '../plan/contracts.js';
import { writeReport } from '../report/write-report.js';

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

export async function writeRunReport(input: RunReportInput): Promise<RunReportResult> {
  const w = writeReport(input.runDir, { live: input.status });
  return { page: w.page, charts: w.charts, bytes: w.bytes, problems: w.problems.length };
}
