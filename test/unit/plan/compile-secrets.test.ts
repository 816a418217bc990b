/**
 * Secrets by reference in the plan: only names. A training step carries `command.secrets` for the worker to fill
 * in; a slime step's Ray runtime env gets a `{secret:NAME}` placeholder, since the job's processes do not see the
 * submitting client's environment.
 */
import { describe, expect, it } from 'vitest';
import { resolveSecrets } from '../../../src/activities/secrets.js';
import { compilePlan } from '../../../src/plan/compile.js';
import type { Plan } from '../../../src/plan/types.js';
import { loadRecipe } from '../../../src/recipe/load.js';

async function planOf(preset: string, sets: string[]): Promise<Plan> {
  const { recipe } = await loadRecipe(preset, { sets });
  return compilePlan(recipe, { runId: 'r1', projectRoot: '/opt/infir2' });
}
const step = (p: Plan, id: string) => p.steps.find((s) => s.id === id)!;

describe('secrets in the plan', () => {
  it('a local stage names its secrets on the command, never a value', async () => {
    const plan = await planOf('tiny', ['cpt.secrets.HF_TOKEN=INFIR2_HF_TOKEN']);
    for (const id of ['cpt.warmup', 'cpt.stable', 'cpt.decay']) expect(step(plan, id).command.secrets).toEqual({ HF_TOKEN: 'INFIR2_HF_TOKEN' });
    expect(step(plan, 'sft.stage1').command.secrets).toBeUndefined();
    expect(step(plan, 'cpt.warmup').command.env).not.toHaveProperty('HF_TOKEN');
  });

  it('a slime stage puts a placeholder into its Ray runtime env, which the worker fills in at submission', async () => {
    const plan = await planOf('infir2-7b', ['sft.0.secrets.WANDB_API_KEY=WANDB_KEY']);
    const s = step(plan, 'sft.stage1');
    const json = s.command.argv.find((a) => a.startsWith('--runtime-env-json='))!;
    expect(JSON.parse(json.slice('--runtime-env-json='.length)).env_vars.WANDB_API_KEY).toBe('{secret:WANDB_KEY}');
    const filled = resolveSecrets(s, s.command.argv, { WANDB_KEY: 'wandb-value-123' });
    const env = JSON.parse(filled.argv.find((a) => a.startsWith('--runtime-env-json='))!.slice('--runtime-env-json='.length)).env_vars;
    expect(env.WANDB_API_KEY).toBe('wandb-value-123');
    expect(filled.env).toEqual({ WANDB_API_KEY: 'wandb-value-123' });
    // The resume argv (a later submission) carries the same placeholder.
    expect(s.resume!.argv.some((a) => a.includes('{secret:WANDB_KEY}'))).toBe(true);
  });
});
