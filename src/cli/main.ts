/**
 * infir2 command-line entry point. One file per verb (`src/cli/<verb>.ts`, each exporting `run(argv)`),
 * loaded lazily so that `infir2 plan` never pays for the Temporal SDK.
 */
import { EXIT, RunFailedError, UnreachableError, UsageError } from './errors.js';

type VerbModule = { run: (argv: string[]) => Promise<number | void> };

const verbs: Record<string, { load: () => Promise<VerbModule>; help: string }> = {
  validate: { load: () => import('./validate.js'), help: 'validate <recipe> [--set k=v]     check a recipe; exit 2 with one line per problem' },
  plan: { load: () => import('./plan.js'), help: 'plan <recipe> [--json] [--set k=v] print the compiled plan' },
  up: { load: () => import('./up.js'), help: 'up                                start the embedded Temporal server, Web UI and a local worker' },
  down: { load: () => import('./down.js'), help: 'down                              stop what `up` started' },
  run: { load: () => import('./run.js'), help: 'run <recipe> [--detach] [--run-id ID] [--set k=v]  start a run' },
  status: { load: () => import('./status.js'), help: 'status <run> [--json]             per-stage status of a run' },
  resume: { load: () => import('./resume.js'), help: 'resume <run> [--from STEP] [--dry-run]  continue a failed or cancelled run' },
  fork: { load: () => import('./fork.js'), help: 'fork <run> --stage cpt.decay --from-iteration N  a new run decaying from stable checkpoint N' },
  list: { load: () => import('./list.js'), help: 'list [--json] [--recipe NAME]     runs, newest first' },
  logs: { load: () => import('./logs.js'), help: 'logs <run> [--stage ID] [--follow]  the steps\' process output' },
  cancel: { load: () => import('./cancel.js'), help: 'cancel <run>                      cancel a run; no training process is left behind' },
  worker: { load: () => import('./worker.js'), help: 'worker --pool NAME [--slots N] [--gpus LIST]  serve a pool' },
};

function usage(): string {
  return ['usage: infir2 <verb> [options]', '', 'verbs:', ...Object.values(verbs).map((v) => `  ${v.help}`)].join('\n');
}

export async function main(argv: string[]): Promise<number> {
  const [verb, ...rest] = argv;
  if (!verb || verb === '--help' || verb === '-h' || verb === 'help') {
    process.stdout.write(usage() + '\n');
    return verb ? EXIT.ok : EXIT.usage;
  }
  const entry = verbs[verb];
  if (!entry) {
    process.stderr.write(`error: unknown verb '${verb}'\n${usage()}\n`);
    return EXIT.usage;
  }
  try {
    const mod = await entry.load();
    return (await mod.run(rest)) ?? EXIT.ok;
  } catch (err) {
    return reportError(err);
  }
}

/** Every failure becomes a message and an exit code; a stack trace only with INFIR2_DEBUG=1. */
export function reportError(err: unknown): number {
  if (process.env.INFIR2_DEBUG && err instanceof Error) process.stderr.write(`${err.stack}\n`);
  if (err instanceof UsageError) {
    for (const line of err.lines) process.stderr.write(line.startsWith('usage:') ? `${line}\n` : `error: ${line}\n`);
    return EXIT.usage;
  }
  if (err instanceof UnreachableError) {
    process.stderr.write(`error: ${err.message}\n`);
    return EXIT.unreachable;
  }
  if (err instanceof RunFailedError) {
    process.stderr.write(`error: ${err.message}\n`);
    return EXIT.runFailed;
  }
  const msg = err instanceof Error ? err.message : String(err);
  process.stderr.write(`error: ${msg.split('\n')[0]}\n`);
  return EXIT.runFailed;
}
