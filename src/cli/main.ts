/**
 * infir2 command-line entry point. One file per verb (`src/cli/<verb>.ts`, each exporting `run(argv)`),
 * loaded lazily so that `infir2 plan` never pays for the Temporal SDK.
 */
import { RunFailedError, UnreachableError, UsageError } from '../errors.js';
import { codecKeyFromEnv } from '../temporal/codec-key.js';
import { checkEnvDirs } from './env-dirs.js';
import { EXIT } from './errors.js';

type VerbModule = { run: (argv: string[]) => Promise<number | void> };

/**
 * Each verb's synopsis (its USAGE without `infir2 `: every flag its OPTIONS accept) and what it does. Written out
 * here rather than imported, so that `--help` loads no verb; test/unit/cli/help.test.ts keeps them in step.
 */
const verbs: Record<string, { load: () => Promise<VerbModule>; usage: string; help: string }> = {
  validate: {
    load: () => import('./validate.js'),
    usage: 'validate <recipe> [--set key=value]... [--check-paths]',
    help: 'check a recipe; exit 2 with one line per problem',
  },
  doctor: {
    load: () => import('./doctor.js'),
    usage: 'doctor [<recipe>] [--pool NAME] [--set key=value]... [--python PY] [--json]',
    help: "check this node for a recipe's steps: versions, known-bad combinations, GPUs, disk, paths",
  },
  plan: {
    load: () => import('./plan.js'),
    usage: 'plan <recipe> [--json] [--set key=value]... [--run-id ID]',
    help: 'print the compiled plan (a stage table; --json: the whole Plan)',
  },
  up: {
    load: () => import('./up.js'),
    usage: 'up [--port N] [--ui-port N] [--pool NAME]... [--slots N] [--headless]',
    help: 'start the embedded Temporal server (7233), Web UI (port+1000) and a local worker (pool local)',
  },
  down: { load: () => import('./down.js'), usage: 'down', help: 'stop what `up` started' },
  run: {
    load: () => import('./run.js'),
    usage: 'run <recipe> [--detach] [--run-id ID] [--set key=value]...',
    help: 'start a run and follow it to its end (--detach: print its id and return)',
  },
  status: { load: () => import('./status.js'), usage: 'status <run> [--json]', help: 'per-stage status of a run' },
  resume: {
    load: () => import('./resume.js'),
    usage: 'resume <run> [--from STEP] [--dry-run] [--detach]',
    help: 'continue a failed or cancelled run (--from: rerun STEP onward; --dry-run: change nothing)',
  },
  fork: {
    load: () => import('./fork.js'),
    usage: 'fork <run> --stage cpt.decay --from-iteration N [--run-id ID] [--set key=value]... [--detach]',
    help: 'a new run whose decay starts from stable checkpoint N of <run>',
  },
  list: { load: () => import('./list.js'), usage: 'list [--json] [--recipe NAME] [--limit N]', help: 'runs, newest first (at most 50 unless --limit)' },
  logs: { load: () => import('./logs.js'), usage: 'logs <run> [--stage ID] [-f|--follow]', help: "the steps' process output (-f: until the run ends)" },
  report: {
    load: () => import('./report.js'),
    usage: 'report <run> [--out DIR] [--no-png]',
    help: "the run's report: one HTML page with its charts and tables, and a PNG per chart",
  },
  compare: {
    load: () => import('./compare.js'),
    usage: 'compare <runA> <runB> [<runC>...] [--out DIR] [--last N] [--json]',
    help: 'runs side by side, each against the first: losses, EMA loss gap, throughput, evals; charts',
  },
  parity: {
    load: () => import('./parity.js'),
    usage: 'parity <recipe> [--stage cpt] [--iterations N] [--seeds K] [--run-id ID] [--set key=value]... [--detach]',
    help: "is FP8 lossless here? CPT's first N iterations in BF16 and FP8, K seeds each; a verdict",
  },
  cancel: {
    load: () => import('./cancel.js'),
    usage: 'cancel <run> [--no-wait]',
    help: 'cancel a run; waits (up to 2 min) until no training process of it is left, unless --no-wait',
  },
  'replay-check': {
    load: () => import('./replay-check.js'),
    usage: 'replay-check [--days N] [--bundle PATH] [--json]',
    help: "before an upgrade: replay running and recent runs on this workflow code; 1 if one would break",
  },
  'codec-server': {
    load: () => import('./codec-server.js'),
    usage: 'codec-server [--port N] [--cors-origin URL]... [--allow-uid N]...',
    help: "decrypt payloads for the Web UI with INFIR2_CODEC_KEY (Temporal's codec protocol)",
  },
  worker: {
    load: () => import('./worker.js'),
    usage: 'worker --pool NAME [--pool NAME]... [--task-queue Q]... [--slots N] [--gpus 0,1,...] [--no-workflows] [--kill-grace SECONDS]',
    help: 'serve pools (and the orchestrator queue) until stopped',
  },
};

const WIDTH = 100;

/** A synopsis wrapped at WIDTH, never inside a `[...]` group; continuation lines indented under its arguments. */
function wrapSynopsis(usage: string, indent: string): string[] {
  const [verb, ...words] = usage.match(/\[[^\]]*\](?:\.\.\.)?|\S+/g) ?? [usage];
  const cont = ' '.repeat(indent.length + verb!.length + 1);
  const lines = [`${indent}${verb}`];
  for (const w of words) {
    if (lines.at(-1)!.length + 1 + w.length > WIDTH && lines.at(-1)!.trim() !== verb) lines.push(`${cont}${w}`);
    else lines[lines.length - 1] += ` ${w}`;
  }
  return lines;
}

export function usage(): string {
  return [
    'usage: infir2 <verb> [options]',
    '',
    'verbs:',
    ...Object.values(verbs).flatMap((v) => [...wrapSynopsis(v.usage, '  '), `      ${v.help}`]),
    '',
    'exit codes: 0 done, 1 the run failed, 2 bad usage or an invalid recipe, 3 Temporal unreachable',
    'environment: TEMPORAL_ADDRESS (default localhost:7233), INFIR2_DEBUG=1 (stack traces),',
    '             INFIR2_HOME (where `up` keeps its state; default .infir2),',
    '             INFIR2_CODEC_KEY (encrypt payloads: 32 bytes, 64 hex digits or base64)',
  ].join('\n');
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
    // A malformed payload key is refused by every verb, before it does anything (codec-key.ts loads no SDK).
    codecKeyFromEnv();
    checkEnvDirs();
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
