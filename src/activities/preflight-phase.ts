/**
 * The supervisor's preflight phase (run-step.ts): before anything is held, the step's own environment is
 * probed on every node it uses (src/preflight/) and checked. A failure is a `config` failure, never retried,
 * one line per problem naming the package, what was found and what was expected; warnings travel in the
 * attempt's progress (`status`, the Web UI's heartbeat details) and its result, and every row that is not a
 * pass goes into the step's log (`preflight warn: …`, which the report reads). The whole table is kept in
 * `<run>/preflight/<step>.json`.
 */
import { CancelledFailure } from '@temporalio/common';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { preflightOf } from '../plan/preflight-types.js';
import { rowLine } from '../preflight/checks.js';
import { preflight, withVerdict } from '../preflight/preflight.js';
import { writeFileAtomic } from '../util/atomic-write.js';
import { failure, type Attempt } from './attempt.js';
import { fillArgv } from './trainer-process.js';

export function preflightFile(runDir: string, stepId: string): string {
  return join(runDir, 'preflight', `${stepId}.json`);
}

export async function preflightPhase(a: Attempt): Promise<void> {
  const spec = preflightOf(a.step);
  if (!spec) return; // a plan recorded before the preflight
  const { ctx, note, input } = a;
  // The probe may wait for srun to place it: the attempt's keep-alive heartbeat (run-step.ts) goes on meanwhile.
  const res = await preflight(spec, {
    cwd: a.step.command.cwd,
    fill: (argv) => fillArgv(argv, a.ids),
    nodes: spec.launch.length ? a.step.nodes : 1,
    signal: ctx.cancellationSignal,
  });
  if (res.cancelled) throw new CancelledFailure(`${a.step.id}: cancelled`);
  const fails = withVerdict(res.rows, 'fail');
  const warns = withVerdict(res.rows, 'warn');
  for (const r of res.rows) if (r.verdict !== 'pass') note(`preflight ${r.verdict}: ${rowLine(r)}`);
  note(
    `attempt ${input.attempt} preflight: ${withVerdict(res.rows, 'pass').length} passed, ${warns.length} warnings, ${fails.length} failures ` +
      `in ${res.seconds.toFixed(1)} s (${res.python} on ${res.hosts.join(', ') || 'no node'})`,
  );
  try {
    const file = preflightFile(input.runDir, a.step.id);
    mkdirSync(join(input.runDir, 'preflight'), { recursive: true });
    writeFileAtomic(file, JSON.stringify({ step: a.step.id, attempt: input.attempt, at: new Date().toISOString(), python: res.python, hosts: res.hosts, seconds: res.seconds, rows: res.rows }, null, 2) + '\n');
  } catch (err) {
    note(`the preflight's table could not be kept: ${(err as Error).message}`);
  }
  if (fails.length) {
    const what = `preflight: ${fails.map(rowLine).join('; ')}`;
    note(`attempt ${input.attempt} not started: ${what}`);
    // Too little room for a checkpoint is the one failure a person fixes while the step waits (freeing space): it is
    // a storage fault, waited out with doubling pauses like a disk that fills mid-run, never a config failure that
    // would end a weeks-long run whose disk filled once. Anything else the node lacks stays lacking: config.
    throw failure(a, fails.every((r) => r.check === 'disk') ? 'storage' : 'config', what);
  }
  a.progress.preflight = warns.length ? warns.map(rowLine) : null;
  ctx.heartbeat({ ...a.progress, updatedAt: new Date().toISOString() });
}
