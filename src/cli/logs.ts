/**
 * `infir2 logs <run> [--stage ID] [--follow]`: the steps' process output, from `<run>/logs/<step>.log` (every
 * attempt, with `[infir2 …]` lines marking starts, resumes, kills; past the cap, its head and newest part).
 * `--follow` streams until the run ends, across rotations.
 */
import { join } from 'node:path';
import { parseVerbArgs, positionals, type Options } from './args.js';
import { UsageError } from '../errors.js';
import { StepLogReader } from '../rundir/step-log.js';
import { connectClient } from '../temporal/connection.js';
import { resolveRun, startedPlan } from '../temporal/runs.js';

export const USAGE = 'infir2 logs <run> [--stage ID] [-f|--follow]';
export const OPTIONS = { stage: { type: 'string' }, follow: { type: 'boolean', short: 'f' } } satisfies Options;
const POLL_MS = 500;

const print = (chunk: Buffer) => process.stdout.write(chunk);

/** How long `--follow` rides out a server that does not answer (a restart) before giving up, ms. */
const SERVER_GONE_MS = 120_000;

/** Is the run still running? A server restart is waited out, as `run`'s own follow does. */
async function stillRunning(handle: { describe(): Promise<{ status: { name: string } }> }): Promise<boolean> {
  const since = Date.now();
  for (;;) {
    try {
      return (await handle.describe()).status.name === 'RUNNING';
    } catch (err) {
      if (Date.now() - since > SERVER_GONE_MS) throw err;
      await new Promise((res) => setTimeout(res, 1_000));
    }
  }
}

export async function run(argv: string[]): Promise<number> {
  const { values, positionals: pos } = parseVerbArgs('logs', argv, OPTIONS, USAGE);
  const [ref] = positionals('logs', pos, ['run'], USAGE);
  const { client, connection } = await connectClient();
  try {
    const r = await resolveRun(client, ref!);
    // The steps and the run directory come from the run's start event: files and history only, so that the logs
    // of a run whose worker is gone can still be read.
    const st = await startedPlan(r);
    const ids = st.steps.map((s) => s.id);
    if (values.stage && !ids.includes(values.stage)) {
      throw new UsageError(`--stage: no step '${values.stage}' in ${r.workflowId} (steps: ${ids.join(', ')})`);
    }
    const wanted = values.stage ? [values.stage] : ids;
    // A long log is its head, a marker where the middle was dropped, and its newest part (rundir/step-log.ts).
    const readers = wanted.map((id) => new StepLogReader(join(st.runDir, 'logs', `${id}.log`), print));
    try {
      if (!values.follow) {
        for (const [i, reader] of readers.entries()) {
          if (!reader.exists()) continue;
          if (!values.stage) process.stdout.write(`==> ${wanted[i]} <==\n`);
          reader.pump();
        }
        return 0;
      }
      let stop = false;
      process.once('SIGINT', () => (stop = true));
      for (;;) {
        for (const reader of readers) reader.pump();
        const running = await stillRunning(r.handle);
        if (!running || stop) {
          for (const reader of readers) reader.pump();
          return 0;
        }
        await new Promise((res) => setTimeout(res, POLL_MS));
      }
    } finally {
      for (const reader of readers) reader.close();
    }
  } finally {
    await connection.close();
  }
}
