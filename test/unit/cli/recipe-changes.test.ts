/**
 * `run` records where its recipe came from; `resume` (and its dry run) reads it again the same way and names the
 * keys that now differ from the recorded recipe, or says in one line that the file is gone or no longer loads.
 * The run itself always resumes with its recorded plan.
 */
import type { Client } from '@temporalio/client';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { loadCompiled } from '../../../src/cli/recipe-input.js';
import { ORIGIN_FILE, recipeChangeNote, sourceName } from '../../../src/cli/recipe-changes.js';
import { startRun } from '../../../src/cli/run.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'infir2-recipe-changes-'));
  vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
});
afterEach(() => {
  vi.restoreAllMocks();
  rmSync(dir, { recursive: true, force: true });
});

/** A client whose start succeeds: what `startRun` records in the run directory is what this tests. */
const fakeClient = { workflow: { start: async () => ({}) } } as unknown as Client;
const recipe = (extra = '') => `name: t\npreset: tiny\nrunDir: ./runs\nprecision: fp8\ncpt:\n  iterations: 600\n${extra}`;

/** `infir2 run <file> --set …` as run.ts does it, from `dir`; the run directory. */
async function started(file: string, sets: string[] = []): Promise<string> {
  const compiled = await loadCompiled(file, { sets, runId: 'r1', cwd: dir, onWarning: () => {} });
  await startRun(fakeClient, compiled.plan, compiled.recipe, { detach: true, origin: { source: compiled.source, sets, cwd: dir } });
  return compiled.plan.runDir;
}

describe('recipeChangeNote', () => {
  it('says nothing while the file resolves to the recorded recipe; names the changed keys once it does not', async () => {
    const file = join(dir, 'tiny.yaml');
    writeFileSync(file, recipe());
    const runDir = await started(file, ['cpt.seed=7']);
    expect(JSON.parse(readFileSync(join(runDir, ORIGIN_FILE), 'utf8'))).toEqual({ source: file, sets: ['cpt.seed=7'], cwd: dir });
    expect(await recipeChangeNote(runDir, dir)).toBeNull();

    writeFileSync(file, recipe('  warmupIters: 20\n').replace('iterations: 600', 'iterations: 800').replace('name: t', 'name: t2'));
    expect(await recipeChangeNote(runDir, dir)).toBe(
      'note: tiny.yaml changed since this run started; resuming with the recorded recipe (changed: name t→t2, ' +
        'cpt.iterations 600→800, cpt.warmupIters 10→20). To train with the new recipe, start a run ' +
        '(`infir2 run tiny.yaml`) or fork this one with --set (`infir2 fork`).',
    );
  });

  it('reads the file with the run\'s own --set overrides: a value a --set pinned is no change', async () => {
    const file = join(dir, 'tiny.yaml');
    writeFileSync(file, recipe());
    const runDir = await started(file, ['cpt.iterations=700']);
    writeFileSync(file, recipe().replace('iterations: 600', 'iterations: 900'));
    expect(await recipeChangeNote(runDir, dir)).toBeNull();
  });

  it('lists ten keys, then how many more', async () => {
    const file = join(dir, 'tiny.yaml');
    writeFileSync(file, recipe());
    const runDir = await started(file);
    const keys = ['seed', 'lr', 'minLr', 'weightDecay', 'clipGrad', 'saveInterval', 'logInterval', 'evalInterval', 'evalIters', 'warmupIters', 'decayIters', 'numWorkers'];
    writeFileSync(file, recipe(keys.map((k, i) => `  ${k}: ${i + 3}\n`).join('')));
    const changed = /\(changed: (.*), and (\d+) more\)\./.exec((await recipeChangeNote(runDir, dir)) ?? '');
    expect(changed?.[1]!.split(', ')).toHaveLength(10);
    expect(changed?.[1]).toContain('cpt.lr 0.005→4');
    expect(changed?.[2]).toBe('2');
  });

  it('a file that is gone, or no longer loads, is one line; the resume goes on', async () => {
    const file = join(dir, 'tiny.yaml');
    writeFileSync(file, recipe());
    const runDir = await started(file);
    writeFileSync(file, `${recipe()}cpt:\n  seed: 1\n`);
    expect(await recipeChangeNote(runDir, dir)).toMatch(/^note: tiny\.yaml no longer loads \(tiny\.yaml:\d+:\d+: duplicate key: each key may appear once in a mapping\); resuming with the recorded recipe$/);
    writeFileSync(file, recipe().replace('precision: fp8', 'precision: fp4'));
    expect(await recipeChangeNote(runDir, dir)).toMatch(/^note: tiny\.yaml no longer loads \(precision: .*\); resuming with the recorded recipe$/);
    rmSync(file);
    expect(await recipeChangeNote(runDir, dir)).toBe('note: tiny.yaml, the recipe this run started from, is gone; resuming with the recorded recipe');
  });

  it('a run that recorded no source (started before runs recorded it) gets no note', async () => {
    const file = join(dir, 'tiny.yaml');
    writeFileSync(file, recipe());
    const runDir = await started(file);
    rmSync(join(runDir, ORIGIN_FILE));
    writeFileSync(file, recipe().replace('iterations: 600', 'iterations: 800'));
    expect(await recipeChangeNote(runDir, dir)).toBeNull();
    expect(existsSync(join(runDir, 'recipe.json'))).toBe(true);
  });

  it('a preset run is compared with the preset as this version of infir2 has it', async () => {
    const compiled = await loadCompiled('tiny', { sets: [`runDir=${dir}/runs`], runId: 'p1', cwd: dir, onWarning: () => {} });
    await startRun(fakeClient, compiled.plan, compiled.recipe, { detach: true, origin: { source: compiled.source, sets: [`runDir=${dir}/runs`], cwd: dir } });
    expect(compiled.source).toBe('preset:tiny');
    expect(await recipeChangeNote(compiled.plan.runDir, dir)).toBeNull();
    const recorded = JSON.parse(readFileSync(join(compiled.plan.runDir, 'recipe.json'), 'utf8')) as { cpt: { iterations: number } };
    recorded.cpt.iterations = 5;
    writeFileSync(join(compiled.plan.runDir, 'recipe.json'), JSON.stringify(recorded));
    expect(await recipeChangeNote(compiled.plan.runDir, dir)).toMatch(/^note: the tiny preset changed since this run started; .*\(changed: cpt\.iterations 5→600\)\. .*`infir2 run tiny`/);
  });
});

describe('startRun', () => {
  it('a start the server refuses leaves no record of the source behind', async () => {
    const file = join(dir, 'tiny.yaml');
    writeFileSync(file, recipe());
    const compiled = await loadCompiled(file, { runId: 'r1', cwd: dir, onWarning: () => {} });
    const refusing = { workflow: { start: async () => Promise.reject(new Error('refused')) } } as unknown as Client;
    await expect(startRun(refusing, compiled.plan, compiled.recipe, { detach: true, origin: { source: file, sets: [], cwd: dir } })).rejects.toThrow('refused');
    expect(existsSync(join(compiled.plan.runDir, ORIGIN_FILE))).toBe(false);
    expect(existsSync(compiled.plan.runDir)).toBe(false);
  });
});

describe('startRun on a directory an earlier run left', () => {
  it('refuses files without a plan (a run whose directory was cut away mid-step) and writes nothing', async () => {
    const file = join(dir, 'tiny.yaml');
    writeFileSync(file, recipe());
    const compiled = await loadCompiled(file, { runId: 'r1', cwd: dir, onWarning: () => {} });
    mkdirSync(join(compiled.plan.runDir, 'cpt', 'checkpoints', 'iter_0000010'), { recursive: true });
    await expect(startRun(fakeClient, compiled.plan, compiled.recipe, { detach: true, origin: { source: file, sets: [], cwd: dir } })).rejects.toThrow(
      `runDir ${compiled.plan.runDir} already holds files (cpt) but no plan.json of a run: remove it, or pick another --run-id`,
    );
    expect(existsSync(join(compiled.plan.runDir, 'plan.json'))).toBe(false);
    expect(existsSync(join(compiled.plan.runDir, 'recipe.json'))).toBe(false);
  });
});

describe('sourceName', () => {
  it('a path under the current directory is relative, anything else absolute; a preset by name', () => {
    expect(sourceName('/w/recipes/tiny.yaml', '/w')).toBe('recipes/tiny.yaml');
    expect(sourceName('/elsewhere/tiny.yaml', '/w')).toBe('/elsewhere/tiny.yaml');
    expect(sourceName('preset:tiny', '/w')).toBe('the tiny preset');
  });
});
