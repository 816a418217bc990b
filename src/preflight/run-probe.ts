/**
 * Running the probe (probe.py) in a step's environment: the trainer's interpreter (torchrun's `#!` line when
 * the trainer runs under it), its variables, on every node through the step's srun; the whole probe bound in
 * time and stopped with its process group. Import results are kept per fingerprint of what they depend on
 * (interpreter, sys.path and its directories' mtimes, installed versions, library variables): a worker asks
 * the same interpreter once per change, not once per attempt.
 */
import { execa } from 'execa';
import { closeSync, openSync, readSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';
import type { ResolvedPreflight } from '../plan/preflight-types.js';
import { projectRoot } from '../util/paths.js';
import { terminateGroup } from '../util/process-group.js';
import type { NodeFacts } from './checks.js';
import { parseReports, type ImportResult } from './probe-report.js';

export const PROBE = 'src/preflight/probe.py';

/** How long one import may take (a 7B image's sglang takes seconds; a hung one is reported, not waited for). */
export const IMPORT_TIMEOUT_SEC = 60;
/** How long the whole probe may take, srun's scheduling included. */
export const PROBE_TIMEOUT_MS = 300_000;

export interface ProbeOptions {
  /** Where it runs (the step's directory). @default process.cwd() */
  cwd?: string;
  /** Fills the launch's placeholders (`{attempt}`, `{launch}`) as the command's are. */
  fill?: (argv: string[]) => string[];
  /** The nodes that must answer (the step's). @default 1 */
  nodes?: number;
  signal?: AbortSignal;
  timeoutMs?: number;
  importTimeoutSec?: number;
  /** The worker's own environment, under the step's variables. @default process.env */
  baseEnv?: NodeJS.ProcessEnv;
  /** Ask for the GPUs even when the step needs none (`doctor` without a recipe). */
  askGpu?: boolean;
}

export interface ProbeRun {
  nodes: NodeFacts[];
  /** Why a node gave no report (the interpreter is missing, the probe died), one line each. */
  problems: string[];
  /** The interpreter it ran, and why that one. */
  python: string;
  seconds: number;
}

const CACHE_MAX = 32;
const importCache = new Map<string, Record<string, ImportResult>>();

function remember(fp: string, imports: Record<string, ImportResult>): void {
  importCache.delete(fp);
  importCache.set(fp, imports);
  while (importCache.size > CACHE_MAX) importCache.delete(importCache.keys().next().value!);
}

/** A program as exec finds it: a path with a `/` as it is, else the first match on PATH. */
function onPath(program: string, pathVar: string | undefined): string | null {
  if (program.includes('/')) return program;
  for (const dir of (pathVar ?? '').split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, program);
    try {
      closeSync(openSync(p, 'r'));
      return p;
    } catch {
      /* not here */
    }
  }
  return null;
}

/**
 * The interpreter of a Python console script (torchrun): its `#!` line, through `/usr/bin/env` when it names
 * that, or pip's `#!/bin/sh` + `'''exec' <python> "$0" "$@"` form for long paths. null: not a Python script.
 */
export function scriptInterpreter(program: string, pathVar: string | undefined): string | null {
  const file = onPath(program, pathVar);
  if (!file) return null;
  let head = '';
  try {
    const fd = openSync(file, 'r');
    const buf = Buffer.alloc(512);
    const n = readSync(fd, buf, 0, 512, 0);
    closeSync(fd);
    head = buf.subarray(0, n).toString('utf8');
  } catch {
    return null;
  }
  const [first = '', second = ''] = head.split('\n');
  if (!first.startsWith('#!')) return null;
  const words = first.slice(2).trim().split(/\s+/);
  if (words[0] === '/bin/sh') return /^'''exec' (\S+)/.exec(second)?.[1] ?? null;
  if (words[0]?.endsWith('/env')) return words[1] && !words[1].startsWith('-') ? onPath(words[1], pathVar) : null;
  return words[0] && isAbsolute(words[0]) && /python/.test(words[0]) ? words[0] : null;
}

/** What the probe is told: what to import, which paths and disk to look at, which results the caller holds. */
function probeSpec(spec: ResolvedPreflight, importTimeoutSec: number, askGpu: boolean) {
  return {
    imports: [...spec.needs, ...spec.uses],
    paths: spec.reads,
    disk: spec.saves?.dir ?? null,
    gpu: spec.gpus > 0 || askGpu,
    pythonPath: spec.pythonPath,
    importTimeout: importTimeoutSec,
    cached: [...importCache.keys()],
  };
}

export async function runProbe(spec: ResolvedPreflight, o: ProbeOptions = {}): Promise<ProbeRun> {
  const t0 = Date.now();
  const env = { ...(o.baseEnv ?? process.env), ...spec.env } as Record<string, string>;
  const python = (spec.via && scriptInterpreter(spec.via, env.PATH)) || spec.python;
  const launch = o.fill ? o.fill(spec.launch) : spec.launch;
  const argv = [...launch, python, join(projectRoot(), PROBE), '--spec', JSON.stringify(probeSpec(spec, o.importTimeoutSec ?? IMPORT_TIMEOUT_SEC, o.askGpu ?? false))];
  const [file, ...args] = argv;
  const child = execa(file!, args, { cwd: o.cwd, env, extendEnv: false, detached: true, cleanup: false, stdin: 'ignore', all: true, reject: false, ...(o.signal ? { cancelSignal: o.signal } : {}) });
  const timeoutMs = o.timeoutMs ?? PROBE_TIMEOUT_MS;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    if (child.pid) void terminateGroup(child.pid, 2_000);
  }, timeoutMs);
  let r;
  try {
    r = await child;
  } finally {
    clearTimeout(timer);
    // The probe's children (an import's interpreter, srun's) end with it.
    if (child.pid) await terminateGroup(child.pid, 2_000);
  }
  const out = String(r.all ?? '');
  const { reports, other } = parseReports(out);
  const nodes: NodeFacts[] = [];
  for (const report of reports) {
    let imports = report.imports === 'cached' ? importCache.get(report.fingerprint) : report.imports;
    if (!imports) imports = {}; // evicted between the call and the answer: reported as not imported this time
    if (report.imports !== 'cached') remember(report.fingerprint, imports);
    nodes.push({ report, imports });
  }
  const problems: string[] = [];
  const want = o.nodes ?? 1;
  if (nodes.length < want) {
    const why = r.isCanceled
      ? 'cancelled'
      : timedOut
        ? `no answer in ${Math.round(timeoutMs / 1000)} s`
        : r.exitCode === undefined && !r.signal
          ? `${file} could not start: ${r.shortMessage}`
          : `exit ${r.exitCode ?? r.signal}`;
    const said = other.slice(-3).join(' | ');
    problems.push(`${want > 1 ? `${nodes.length} of ${want} nodes answered` : 'no answer'}: ${python} (${why})${said ? `: ${said}` : ''}`);
  }
  return { nodes, problems, python, seconds: (Date.now() - t0) / 1000 };
}
