/**
 * `infir2 doctor [<recipe>] [--pool NAME] [--set key=value]... [--python PY] [--json]`: the preflight of every
 * step of a recipe (of one pool's steps with --pool), run from a shell on this node as the worker runs it
 * before each attempt: the step's interpreter and environment (through srun on a slurm pool), the recipe's
 * `software.versions`, the known-bad combinations, free space for the checkpoints, the paths the steps read.
 * Without a recipe: what `python3` (or --python) has here, against the known-bad combinations.
 * A table of pass / warn / fail / skip; exit 2 when a check fails, 0 otherwise.
 */
import { hostname } from 'node:os';
import { UsageError } from '../errors.js';
import { type PlanStep } from '../plan/types.js';
import { preflightOf, type ResolvedPreflight } from '../plan/preflight-types.js';
import { type CheckRow } from '../preflight/checks.js';
import { preflight } from '../preflight/preflight.js';
import { KNOWN_BAD } from '../recipe/known-bad.js';
import { PACKAGES } from '../recipe/software-checks.js';
import { parseVerbArgs, type Options } from './args.js';
import { EXIT } from './errors.js';
import { loadPlan } from './recipe-input.js';
import { table } from './status-view.js';

export const USAGE = 'infir2 doctor [<recipe>] [--pool NAME] [--set key=value]... [--python PY] [--json]';
export const OPTIONS = {
  pool: { type: 'string' },
  set: { type: 'string', multiple: true },
  python: { type: 'string' },
  json: { type: 'boolean' },
} satisfies Options;

/** What `doctor` asks of an interpreter when no recipe says what a step needs: every package, no pins. */
export function bareSpec(python: string): ResolvedPreflight {
  return { launch: [], python, env: {}, pythonPath: [], needs: [], uses: [...PACKAGES], versions: {}, skip: [], traits: [], gpus: 0, reads: {}, saves: null };
}

/** Steps that share an environment share its rows; disk and paths are each step's own. */
interface Group {
  steps: string[];
  python: string;
  hosts: string[];
  seconds: number;
  rows: CheckRow[];
  stepRows: { step: string; rows: CheckRow[] }[];
}

const OWN = new Set(['disk', 'paths']);

async function check(targets: { id: string; spec: ResolvedPreflight; nodes: number }[], askGpu: boolean): Promise<Group[]> {
  const groups = new Map<string, Group>();
  for (const t of targets) {
    const res = await preflight(t.spec, { nodes: t.spec.launch.length ? t.nodes : 1, ...(askGpu ? { askGpu } : {}) });
    const shared = res.rows.filter((r) => !OWN.has(r.check));
    const own = res.rows.filter((r) => OWN.has(r.check));
    const key = JSON.stringify([res.python, shared]);
    const g = groups.get(key) ?? { steps: [], python: res.python, hosts: res.hosts, seconds: 0, rows: shared, stepRows: [] };
    g.steps.push(t.id);
    g.seconds += res.seconds;
    if (own.length) g.stepRows.push({ step: t.id, rows: own });
    groups.set(key, g);
  }
  return [...groups.values()];
}

const MARK: Record<CheckRow['verdict'], string> = { pass: 'pass', warn: 'WARN', fail: 'FAIL', skip: 'skip' };

function render(groups: Group[], title: string): string {
  const out: string[] = [title];
  for (const g of groups) {
    out.push('', `${g.steps.join(', ')}: ${g.python} on ${g.hosts.join(', ') || 'no node'} (${g.seconds.toFixed(1)} s)`);
    const rows = [
      ...g.rows.map((r) => [r.check + (r.node ? ` [${r.node}]` : ''), MARK[r.verdict], r.found, r.expected]),
      ...g.stepRows.flatMap((s) => s.rows.map((r) => [`${s.step} ${r.check}${r.node ? ` [${r.node}]` : ''}`, MARK[r.verdict], r.found, r.expected])),
    ];
    out.push(table([['CHECK', 'STATUS', 'FOUND', 'EXPECTED'], ...rows]));
  }
  const fired = new Set(groups.flatMap((g) => g.rows.filter((r) => r.verdict === 'fail' || r.verdict === 'warn').map((r) => r.check)));
  const sources = KNOWN_BAD.filter((k) => fired.has(k.id));
  if (sources.length) {
    out.push('', 'known-bad combinations found here, and where each was seen:');
    for (const k of sources) out.push(`  ${k.id}:`, ...k.sources.map((s) => `    - ${s}`));
  }
  const all = groups.flatMap((g) => [...g.rows, ...g.stepRows.flatMap((s) => s.rows)]);
  const count = (v: CheckRow['verdict']) => all.filter((r) => r.verdict === v).length;
  out.push('', `${count('fail')} failed, ${count('warn')} warnings, ${count('pass')} passed${count('skip') ? `, ${count('skip')} skipped` : ''}`);
  return out.join('\n');
}

export async function run(argv: string[]): Promise<number> {
  const { values, positionals: pos } = parseVerbArgs('doctor', argv, OPTIONS, USAGE);
  if (pos.length > 1) throw new UsageError([`doctor: unexpected argument '${pos[1]}'`, `usage: ${USAGE}`]);
  const [ref] = pos;
  if (!ref && (values.pool || values.set?.length)) throw new UsageError([`doctor: --pool and --set need a <recipe>`, `usage: ${USAGE}`]);
  let targets: { id: string; spec: ResolvedPreflight; nodes: number }[];
  let title: string;
  if (ref) {
    const plan = await loadPlan(ref, { sets: values.set ?? [], runId: 'doctor', ...(values.python ? { python: values.python } : {}) });
    const pools = Object.keys(plan.pools);
    if (values.pool && !pools.includes(values.pool)) throw new UsageError(`doctor: --pool: no pool '${values.pool}' in recipe '${plan.recipe}' (its pools: ${pools.join(', ')})`);
    const steps = plan.steps.filter((s) => !!s.preflight && (!values.pool || s.pool === values.pool));
    // An input an earlier step of the run makes (under the run's directory) does not exist before the run.
    const own = (p: string) => p === plan.runDir || p.startsWith(`${plan.runDir}/`);
    const reads = (spec: ResolvedPreflight) => Object.fromEntries(Object.entries(spec.reads).filter(([, p]) => !own(p)));
    targets = steps.map((s) => {
      const spec = preflightOf(s)!;
      return { id: s.id, spec: { ...spec, reads: reads(spec) }, nodes: s.nodes };
    });
    title = `infir2 doctor: recipe '${plan.recipe}'${values.pool ? `, pool ${values.pool}` : ''}, from ${hostname()}`;
  } else {
    targets = [{ id: 'this node', spec: bareSpec(values.python ?? 'python3'), nodes: 1 }];
    title = `infir2 doctor: ${values.python ?? 'python3'} on ${hostname()} (no recipe: no pins, every package looked at)`;
  }
  const groups = await check(targets, !ref);
  const failed = groups.some((g) => [...g.rows, ...g.stepRows.flatMap((s) => s.rows)].some((r) => r.verdict === 'fail'));
  if (values.json) process.stdout.write(JSON.stringify({ groups }, null, 2) + '\n');
  else process.stdout.write(render(groups, title) + '\n');
  return failed ? EXIT.usage : EXIT.ok;
}
