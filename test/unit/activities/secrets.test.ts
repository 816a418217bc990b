/**
 * Secrets by reference: the worker fills them in at launch from its own environment; a missing one is named
 * (never a value); a value inside the runtime env's JSON stays valid JSON; redaction covers both spellings.
 */
import { describe, expect, it } from 'vitest';
import { MissingSecretError, redact, REDACTED, resolveSecrets, secretSources } from '../../../src/activities/secrets.js';
import type { PlanStep } from '../../../src/plan/types.js';

const step = (secrets: Record<string, string>, argv: string[] = ['python', 'train.py']) =>
  ({ id: 'sft.stage1', command: { argv, env: { A: '1' }, cwd: '/tmp', secrets } }) as unknown as PlanStep;

describe('resolveSecrets', () => {
  it('sets each trainer variable from the worker variable it names', () => {
    const r = resolveSecrets(step({ WANDB_API_KEY: 'INFIR2_WANDB', HF_TOKEN: 'HF_TOKEN' }), ['python'], { INFIR2_WANDB: 'w-123456', HF_TOKEN: 'hf_abcdef' });
    expect(r.env).toEqual({ WANDB_API_KEY: 'w-123456', HF_TOKEN: 'hf_abcdef' });
    expect(r.argv).toEqual(['python']);
  });

  it('fills {secret:NAME} in argv, escaped for the JSON it sits in', () => {
    const argv = ['ray', 'job', 'submit', `--runtime-env-json=${JSON.stringify({ env_vars: { WANDB_API_KEY: '{secret:W}' } })}`];
    const r = resolveSecrets(step({}, argv), argv, { W: 'va"l\\ue' });
    expect(JSON.parse(r.argv[3]!.slice('--runtime-env-json='.length))).toEqual({ env_vars: { WANDB_API_KEY: 'va"l\\ue' } });
    expect(secretSources(step({}, argv), argv)).toEqual(['W']);
  });

  it('names every missing (or empty) variable and what it was for, and no value', () => {
    let err: unknown;
    try {
      resolveSecrets(step({ WANDB_API_KEY: 'INFIR2_WANDB', HF_TOKEN: 'HF_TOKEN', OK: 'PRESENT' }), ['x'], { HF_TOKEN: '', PRESENT: 'value-of-present' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(MissingSecretError);
    expect((err as Error).message).toBe(
      "secrets missing from this worker's environment: INFIR2_WANDB, HF_TOKEN (for WANDB_API_KEY ← INFIR2_WANDB, HF_TOKEN ← HF_TOKEN); set them where the worker starts (e.g. its EnvironmentFile)",
    );
    expect((err as Error).message).not.toContain('value-of-present');
  });

  it('a step without secrets needs nothing', () => {
    expect(resolveSecrets(step({}), ['python'], {})).toEqual({ env: {}, argv: ['python'], values: [] });
  });
});

describe('redact', () => {
  it('replaces every value, the longest first, and leaves short strings alone', () => {
    expect(redact('token=abcd1234 and abcd1234x; id=7', ['abcd1234', 'abcd1234x', '7'])).toBe(`token=${REDACTED} and ${REDACTED}; id=7`);
  });
});
