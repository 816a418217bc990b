/**
 * Secrets by reference. Anyone who can open the Web UI can read a workflow's history, and the Plan travels in it
 * (and into `plan.json`). So a recipe never holds a secret's value: it names the worker's environment variable that
 * holds it (`secrets: { WANDB_API_KEY: WANDB_API_KEY }`), and the pool worker reads the value when it launches the
 * process. What leaves the worker about a secret is its name, never its value: the launch line in the step's log
 * is the argv before secrets are filled in, and the trainer's output lines that reach a failure message are
 * redacted.
 */
import type { PlanStep } from '../plan/types.js';

/** `{secret:NAME}` in an argv (a Ray runtime env's `env_vars`): the value of the worker's variable NAME. */
const PLACEHOLDER = /\{secret:([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** What a redacted value is shown as. */
export const REDACTED = '[secret]';

export class MissingSecretError extends Error {}

export interface Resolved {
  /** Trainer variables set from secrets. */
  env: Record<string, string>;
  /** The argv with its `{secret:NAME}` placeholders filled. */
  argv: string[];
  /** Every value resolved, for redaction. */
  values: string[];
}

/** The worker variables a step's launch reads: its `secrets` and the placeholders in its argv. */
export function secretSources(step: PlanStep, argv: string[]): string[] {
  const names = new Set(Object.values(step.command.secrets ?? {}));
  for (const a of argv) for (const m of a.matchAll(PLACEHOLDER)) names.add(m[1]!);
  return [...names];
}

/**
 * Read the step's secrets from the worker's environment. Throws MissingSecretError naming every variable that is
 * unset or empty (names only), so that the attempt fails as `config`: no retry gives a worker a variable.
 */
export function resolveSecrets(step: PlanStep, argv: string[], workerEnv: NodeJS.ProcessEnv = process.env): Resolved {
  const missing = secretSources(step, argv).filter((v) => !workerEnv[v]);
  if (missing.length) {
    const uses = Object.entries(step.command.secrets ?? {}).filter(([, v]) => missing.includes(v));
    const detail = uses.length ? ` (for ${uses.map(([k, v]) => `${k} ← ${v}`).join(', ')})` : '';
    throw new MissingSecretError(
      `secret${missing.length > 1 ? 's' : ''} missing from this worker's environment: ${missing.join(', ')}${detail}; set ${missing.length > 1 ? 'them' : 'it'} where the worker starts (e.g. its EnvironmentFile)`,
    );
  }
  const env = Object.fromEntries(Object.entries(step.command.secrets ?? {}).map(([k, v]) => [k, workerEnv[v]!]));
  const filled = argv.map((a) => a.replace(PLACEHOLDER, (_, name: string) => jsonSafe(workerEnv[name]!)));
  // Raw, and as escaped inside the runtime env's JSON: a trainer may print either.
  const values = secretSources(step, argv).flatMap((v) => [workerEnv[v]!, jsonSafe(workerEnv[v]!)]);
  return { env, argv: filled, values };
}

/**
 * A secret placed inside a JSON argument (the runtime env) must not break it: its JSON string escaping, without
 * the quotes the placeholder already sits between.
 */
function jsonSafe(value: string): string {
  return JSON.stringify(value).slice(1, -1);
}

/** `text` with every secret value replaced (longest first, so that one value inside another is covered). */
export function redact(text: string, values: string[]): string {
  let out = text;
  for (const v of [...new Set(values)].filter((x) => x.length >= 4).sort((a, b) => b.length - a.length)) out = out.replaceAll(v, REDACTED);
  return out;
}
