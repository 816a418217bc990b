/**
 * The layer table of docs/architecture.md as a test: every import in src/ (static, re-export or dynamic) is read
 * and checked against the rules below, which say the same thing as the table. A new back-edge fails here with the
 * file, the import and the rule it breaks.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = resolve(import.meta.dirname, '../../../src');

/** Leaf modules: shared data and helpers that import no other part of src/ but leaves. */
const LEAVES = ['plan/types.ts', 'plan/preflight-types.ts', 'plan/notify-spec.ts', 'plan/contracts.ts', 'plan/goodput.ts', 'plan/stall-words.ts', 'temporal/constants.ts', 'errors.ts'];

/** What each layer (a folder of src/) may import from src/, besides leaves, itself and packages. */
const MAY_IMPORT: Record<string, string[]> = {
  util: [],
  recipe: [],
  backends: ['recipe'],
  plan: ['recipe', 'backends'],
  docs: ['recipe', 'backends'],
  rundir: ['util'],
  // The views of a run's state: pure, deterministic, no packages (the workflows render them inside their sandbox).
  views: [],
  workflows: ['views'], // and `import type` from activities (the activity signatures), nothing else
  // What the engines print, read line by line: shared by the supervisor (activities) and the report, pure.
  'engine-logs': [],
  activities: ['util', 'rundir', 'report', 'engine-logs', 'preflight'],
  // The preflight reads the recipe's pins and known-bad table; the worker's phase and `doctor` run it.
  preflight: ['util', 'rundir', 'recipe'],
  // The report reads logs with the supervisor's own parsers (engine-logs) and shows scores as the status views do.
  report: ['util', 'rundir', 'engine-logs', 'views', 'plan/parity.ts'],
  temporal: ['util', 'workflows/definitions.ts'],
  workers: ['util', 'activities', 'temporal', 'workflows'],
  cli: ['*'],
};

/** Packages a workflow may import: its sandbox runs them deterministically. */
const WORKFLOW_PACKAGES = ['@temporalio/workflow', '@temporalio/common'];

interface Edge {
  from: string; // src-relative file
  spec: string; // as written
  to: string | null; // src-relative target, null for a package
  typeOnly: boolean;
}

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** Static imports, `export … from`, and `import('…')`; `import type` / all-`type` specifiers are type-only. */
export function importsOf(source: string): { spec: string; typeOnly: boolean }[] {
  const out: { spec: string; typeOnly: boolean }[] = [];
  const stmt = /^\s*(import|export)\s+(type\s+)?([^'";]*?)\s*from\s*['"]([^'"]+)['"]/gms;
  for (const m of source.matchAll(stmt)) {
    const names = m[3] ?? '';
    const allTypes = /^\{[^}]*\}$/s.test(names.trim()) && names.replace(/[{}\s]/g, '').split(',').filter(Boolean).every((n) => n.startsWith('type'));
    out.push({ spec: m[4]!, typeOnly: Boolean(m[2]) || allTypes });
  }
  for (const m of source.matchAll(/^\s*import\s+['"]([^'"]+)['"]/gm)) out.push({ spec: m[1]!, typeOnly: false });
  for (const m of source.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) out.push({ spec: m[1]!, typeOnly: false });
  return out;
}

function edges(): Edge[] {
  return files(SRC).flatMap((file) => {
    const from = relative(SRC, file);
    return importsOf(readFileSync(file, 'utf8')).map(({ spec, typeOnly }) => ({
      from,
      spec,
      typeOnly,
      to: spec.startsWith('.') ? relative(SRC, resolve(dirname(file), spec)).replace(/\.js$/, '.ts') : null,
    }));
  });
}

const layerOf = (p: string) => (p.includes('/') ? p.split('/')[0]! : '');

/** Why `e` breaks the rules, or null. */
export function violation(e: Edge): string | null {
  const layer = layerOf(e.from);
  if (e.to === null) {
    if (layer === 'workflows' && !WORKFLOW_PACKAGES.includes(e.spec)) return `a workflow imports ${e.spec} (only ${WORKFLOW_PACKAGES.join(', ')})`;
    if (layer === 'views') return `a view imports ${e.spec} (views import no package: the workflows run them in their sandbox)`;
    return null;
  }
  const target = layerOf(e.to);
  if (LEAVES.includes(e.from)) return LEAVES.includes(e.to) ? null : `leaf ${e.from} imports ${e.to}`;
  if (target === 'cli' && layer !== 'cli') return `only the CLI imports the CLI`;
  if (LEAVES.includes(e.to) || target === layer) return null;
  if (layer === 'workflows' && target === 'activities' && e.typeOnly) return null;
  const allowed = MAY_IMPORT[layer];
  if (!allowed) return `${e.from} is in no layer of the table`;
  if (allowed.includes('*') || allowed.includes(target) || allowed.includes(e.to)) return null;
  return `${layer} may not import ${target}${e.typeOnly ? ' (not even types)' : ''}`;
}

describe('layers (docs/architecture.md)', () => {
  it('every import in src/ follows the table', () => {
    const bad = edges()
      .map((e) => ({ e, why: violation(e) }))
      .filter((x) => x.why)
      .map(({ e, why }) => `${e.from} -> ${e.spec}: ${why}`);
    expect(bad).toEqual([]);
  });

  it('names each back-edge it exists to catch', () => {
    const edge = (from: string, to: string | null, spec = to ?? '', typeOnly = false): Edge => ({ from, to, spec, typeOnly });
    expect(violation(edge('temporal/connection.ts', 'cli/errors.ts'))).toMatch(/only the CLI/);
    expect(violation(edge('activities/run-step.ts', 'workflows/definitions.ts', '', true))).toMatch(/activities may not import workflows/);
    expect(violation(edge('temporal/dev-server.ts', 'activities/process-group.ts'))).toMatch(/temporal may not import activities/);
    expect(violation(edge('cli/resume.ts', 'activities/resume-check.ts'))).toBeNull(); // the CLI may; see the moves
    expect(violation(edge('workflows/stage-run.ts', 'activities/index.ts', '', false))).toMatch(/workflows may not import activities/);
    expect(violation(edge('workflows/stage-run.ts', 'activities/index.ts', '', true))).toBeNull();
    expect(violation(edge('workflows/recipe-run.ts', null, 'node:fs'))).toMatch(/a workflow imports node:fs/);
    expect(violation(edge('views/status-table.ts', null, 'node:os'))).toMatch(/a view imports node:os/);
    expect(violation(edge('views/step-figures.ts', 'workflows/definitions.ts'))).toMatch(/views may not import workflows/);
    expect(violation(edge('workflows/recipe-run.ts', 'views/status-table.ts'))).toBeNull();
    expect(violation(edge('backends/megatron.ts', 'plan/compile.ts'))).toMatch(/backends may not import plan/);
    expect(violation(edge('plan/types.ts', 'recipe/schema.ts', '', true))).toMatch(/leaf/);
    expect(violation(edge('report/step-series.ts', 'activities/supervise.ts'))).toMatch(/report may not import activities/);
    expect(violation(edge('engine-logs/progress-parsers.ts', 'report/curve.ts'))).toMatch(/engine-logs may not import report/);
  });

  it('the modules the workflows load keep no mutable state at module level (the bundle preloads them into one context every workflow shares)', () => {
    const all = edges();
    const seen = new Set<string>();
    const todo = ['workflows/index.ts'];
    while (todo.length) {
      const f = todo.pop()!;
      if (seen.has(f)) continue;
      seen.add(f);
      for (const e of all) if (e.from === f && e.to && !e.typeOnly) todo.push(e.to);
    }
    expect(seen.size).toBeGreaterThan(10);
    const state = [...seen].flatMap((f) =>
      readFileSync(join(SRC, f), 'utf8')
        .split('\n')
        .flatMap((line, i) => (/^(export\s+)?(let|var)\s/.test(line) || /^(export\s+)?const\s+\w+\s*(:[^=]*)?=\s*(new\s+(Map|WeakMap)\b|\[\s*\])/.test(line) ? [`${f}:${i + 1}: ${line.trim()}`] : [])),
    );
    expect(state).toEqual([]);
  });

  it('reads type-only imports, re-exports and lazy imports', () => {
    expect(importsOf(`import type { A } from '../a.js';\nimport { type B, type C } from './b.js';\nimport { d, type E } from './d.js';`)).toEqual([
      { spec: '../a.js', typeOnly: true },
      { spec: './b.js', typeOnly: true },
      { spec: './d.js', typeOnly: false },
    ]);
    expect(importsOf(`export { x } from './x.js';\nconst m = await import('./verb.js');`)).toEqual([
      { spec: './x.js', typeOnly: false },
      { spec: './verb.js', typeOnly: false },
    ]);
  });
});
