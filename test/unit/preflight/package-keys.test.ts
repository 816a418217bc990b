/**
 * The probe (src/preflight/probe.py, Python: it runs in the step's own interpreter) and the recipe's schema
 * (src/recipe/software-checks.ts) name the same packages: a key only one side knows would be pinned and never
 * reported, or reported and never pinnable.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGES } from '../../../src/recipe/software-checks.js';

const PROBE = join(import.meta.dirname, '..', '..', '..', 'src', 'preflight', 'probe.py');

describe('the probe and the recipe schema', () => {
  it('know the same package keys, in the same order', () => {
    const code = `import importlib.util, json, sys\nspec = importlib.util.spec_from_file_location("probe", sys.argv[1])\nm = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(m)\nprint(json.dumps(list(m.PACKAGES)))`;
    const keys = JSON.parse(execFileSync('python3', ['-c', code, PROBE], { encoding: 'utf8' })) as string[];
    expect(keys).toEqual([...PACKAGES]);
  });
});
