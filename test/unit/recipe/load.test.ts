import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RecipeError } from '../../../src/recipe/issues.js';
import { loadRecipe } from '../../../src/recipe/load.js';
import { embeddedStateDir, projectRoot } from '../../../src/recipe/project-root.js';
import { stateDir } from '../../../src/util/paths.js';

const tmp = mkdtempSync(join(tmpdir(), 'infir2-load-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function recipeFile(name: string, text: string): string {
  const dir = join(tmp, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'recipe.yaml'), text);
  return join(dir, 'recipe.yaml');
}

async function rejection(p: Promise<unknown>): Promise<string[]> {
  try {
    await p;
  } catch (err) {
    if (err instanceof RecipeError) return err.issues.filter((i) => i.level === 'error').map((i) => `${i.path}: ${i.message}`);
    throw err;
  }
  throw new Error('expected the recipe to be rejected');
}

describe('loadRecipe', () => {
  it('loads a preset by name, its relative paths resolved against the project root, its runs under the state directory', async () => {
    const { recipe, source } = await loadRecipe('tiny');
    expect(source).toBe('preset:tiny');
    expect(recipe.runDir).toBe(join(embeddedStateDir(), 'runs'));
    expect(recipe.cpt?.data).toBe(join(projectRoot(), 'trainer/data/cpt.jsonl'));
  });

  it('resolves $INFIR2_HOME in a path to the state directory the CLI uses: INFIR2_HOME, else .infir2/ in the checkout', async () => {
    const saved = process.env.INFIR2_HOME;
    try {
      delete process.env.INFIR2_HOME;
      expect(embeddedStateDir()).toBe(join(projectRoot(), '.infir2'));
      expect(embeddedStateDir()).toBe(stateDir());
      expect((await loadRecipe('tiny', { sets: ['runDir=$INFIR2_HOME/elsewhere'] })).recipe.runDir).toBe(join(projectRoot(), '.infir2/elsewhere'));
      process.env.INFIR2_HOME = join(tmp, 'home');
      expect(embeddedStateDir()).toBe(join(tmp, 'home'));
      expect(embeddedStateDir()).toBe(stateDir());
      expect((await loadRecipe('tiny')).recipe.runDir).toBe(join(tmp, 'home/runs'));
      // Only the whole first segment is the variable: `$INFIR2_HOMEX` is a relative path like any other.
      const file = recipeFile('var', 'preset: tiny\nrunDir: $INFIR2_HOMEX/runs\n');
      expect((await loadRecipe(file)).recipe.runDir).toBe(join(tmp, 'var/$INFIR2_HOMEX/runs'));
    } finally {
      if (saved === undefined) delete process.env.INFIR2_HOME;
      else process.env.INFIR2_HOME = saved;
    }
  });

  it("resolves a recipe's relative paths against its own directory, ~ against home, --set paths against the cwd", async () => {
    const file = recipeFile('paths', 'preset: tiny\nrunDir: ../runs\ncpt: { data: data/cpt.jsonl }\nmodel: { hf: ~/models/x }\n');
    const { recipe } = await loadRecipe(file, { sets: ['rl.data=elsewhere/rl.jsonl'], cwd: '/work/here' });
    expect(recipe.runDir).toBe(join(tmp, 'runs'));
    expect(recipe.cpt?.data).toBe(join(tmp, 'paths/data/cpt.jsonl'));
    expect(recipe.model.hf).toBe(join(homedir(), 'models/x'));
    expect(recipe.rl?.data).toBe('/work/here/elsewhere/rl.jsonl');
    // Preset paths the recipe did not override still resolve against the project root.
    expect(recipe.sft?.[0]?.data).toBe(join(projectRoot(), 'trainer/data/sft_stage1.jsonl'));
  });

  it('layers recipe over preset and --set over both', async () => {
    const file = recipeFile('layers', 'preset: tiny\ncpt: { iterations: 200 }\n');
    const { recipe } = await loadRecipe(file, { sets: ['cpt.iterations=300', 'sft.1.lr=5e-4', 'rl=null', 'eval.models=[fp8]'] });
    expect(recipe.cpt?.iterations).toBe(300);
    expect(recipe.cpt?.warmupIters).toBe(10); // from the preset
    expect(recipe.sft?.[1]?.lr).toBe(5e-4);
    expect(recipe.rl).toBeUndefined();
  });

  it('fills schema defaults: retries, timeouts (durations in seconds), software locations', async () => {
    const { recipe } = await loadRecipe('infir2-7b');
    expect(recipe.cpt?.retries).toEqual({ crash: 3, hang: 2, oom: 1, preempted: 10, storage: 12 });
    expect(recipe.cpt?.stallTimeout).toBe(7200);
    expect(recipe.cpt?.attemptTimeout).toBe(14 * 86400);
    expect(recipe.software.ray).toBe('ray');
    expect(recipe.eval?.server.readyTimeout).toBe(1800);
    expect(recipe.logs).toEqual({ maxMB: 1024 });
  });

  it('takes a log cap in whole MiB, 0 for none, and names the field when it is wrong', async () => {
    expect((await loadRecipe('tiny', { sets: ['logs.maxMB=64'] })).recipe.logs.maxMB).toBe(64);
    expect((await loadRecipe('tiny', { sets: ['logs.maxMB=0'] })).recipe.logs.maxMB).toBe(0);
    expect(await rejection(loadRecipe('tiny', { sets: ['logs.maxMB=-1'] }))).toEqual(['logs.maxMB: must be 0 or more, got -1']);
    expect(await rejection(loadRecipe('tiny', { sets: ['logs.maxMB=0.5'] }))).toEqual(['logs.maxMB: expected a whole number, got 0.5']);
    expect(await rejection(loadRecipe('tiny', { sets: ['logs.maxMB=1GB'] }))).toEqual(["logs.maxMB: expected a number, got '1GB'"]);
    expect(await rejection(loadRecipe('tiny', { sets: ['logs.maxMb=64'] }))).toEqual(["logs.maxMb: unknown key; did you mean 'maxMB'?"]);
  });

  it('counts the rows of a local SFT .jsonl, and warns only when the recipe said otherwise', async () => {
    const data = join(tmp, 'sft.jsonl');
    writeFileSync(data, '{"messages": []}\n'.repeat(100) + '\n');
    const quiet = await loadRecipe('tiny', { sets: [`sft.0.data=${data}`] });
    expect(quiet.recipe.sft?.[0]?.samples).toBe(100);
    expect(quiet.warnings.filter((w) => w.path.startsWith('sft'))).toEqual([]);
    const stated = await loadRecipe('tiny', { sets: [`sft.0.data=${data}`, 'sft.0.samples=64'] });
    expect(stated.recipe.sft?.[0]?.samples).toBe(100);
    expect(stated.warnings).toContainEqual({ level: 'warning', path: 'sft.0.samples', message: `64, but ${data} has 100 rows; using 100` });
  });

  it('needs the sample count when it cannot count the file', async () => {
    expect(await rejection(loadRecipe('tiny', { sets: ['sft.0.samples=null', 'sft.0.data=/nowhere/sft.jsonl'] }))).toEqual([
      'sft.0.samples: required: the number of rows in /nowhere/sft.jsonl (the step count depends on it); it is counted automatically when the file is a local .jsonl',
    ]);
  });

  it('takes a recipe with SFT and eval only, starting SFT from model.base', async () => {
    const file = recipeFile(
      'sft-only',
      [
        'preset: infir2-7b',
        'name: sft-only',
        'cpt: null',
        'convert: null',
        'rl: null',
        'eval: { models: [base] }',
      ].join('\n'),
    );
    const { recipe } = await loadRecipe(file);
    expect(recipe.cpt).toBeUndefined();
    expect(recipe.sft).toHaveLength(2);
  });

  it('reports every schema problem at once', async () => {
    const file = recipeFile('many', 'preset: tiny\nprecision: fp16\ncpt: { iterations: 0, lr: -1 }\n');
    expect(await rejection(loadRecipe(file))).toEqual([
      "precision: expected one of fp8, bf16; got 'fp16'; did you mean 'fp8'?",
      'cpt.iterations: must be at least 1, got 0',
      'cpt.lr: must be greater than 0, got -1',
    ]);
  });
});
