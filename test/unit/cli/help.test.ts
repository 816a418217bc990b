/**
 * `infir2 --help` lists every flag that each verb's parser accepts: the main help's synopsis of a verb is the
 * verb's own USAGE (what its usage errors print), and that names every option in the verb's OPTIONS.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { Options } from '../../../src/cli/args.js';
import { ROOT, runInProcess } from './run-cli.js';

interface VerbModule {
  USAGE: string;
  OPTIONS: Options;
}
const MODULES: Record<string, () => Promise<VerbModule>> = {
  validate: () => import('../../../src/cli/validate.js'),
  plan: () => import('../../../src/cli/plan.js'),
  doctor: () => import('../../../src/cli/doctor.js'),
  up: () => import('../../../src/cli/up.js'),
  down: () => import('../../../src/cli/down.js'),
  run: () => import('../../../src/cli/run.js'),
  status: () => import('../../../src/cli/status.js'),
  resume: () => import('../../../src/cli/resume.js'),
  fork: () => import('../../../src/cli/fork.js'),
  list: () => import('../../../src/cli/list.js'),
  logs: () => import('../../../src/cli/logs.js'),
  report: () => import('../../../src/cli/report.js'),
  compare: () => import('../../../src/cli/compare.js'),
  parity: () => import('../../../src/cli/parity.js'),
  cancel: () => import('../../../src/cli/cancel.js'),
  'replay-check': () => import('../../../src/cli/replay-check.js'),
  'codec-server': () => import('../../../src/cli/codec-server.js'),
  worker: () => import('../../../src/cli/worker.js'),
};
const VERBS = Object.keys(MODULES);
const load = (verb: string) => MODULES[verb]!();

/** `--name` (and `-x` for a short alias) as a whole word: `--run` must not pass for `--run-id`. */
const flagIn = (text: string, flag: string) => new RegExp(`(?<![\\w-])${flag}(?![\\w-])`).test(text);

async function help(): Promise<string> {
  const r = await runInProcess(['--help']);
  expect(r.code).toBe(0);
  expect(r.stderr).toBe('');
  return r.stdout;
}

describe('infir2 --help', () => {
  it('covers every verb that has a file in src/cli', () => {
    const withOptions = readdirSync(`${ROOT}src/cli`)
      .filter((f) => f.endsWith('.ts') && /^export const OPTIONS\b/m.test(readFileSync(`${ROOT}src/cli/${f}`, 'utf8')))
      .map((f) => f.replace(/\.ts$/, ''));
    expect(withOptions.sort()).toEqual([...VERBS].sort());
  });

  it.each(VERBS)("%s: its USAGE names every option its parser accepts", async (verb) => {
    const { USAGE, OPTIONS } = await load(verb);
    expect(USAGE.startsWith(`infir2 ${verb}`)).toBe(true);
    for (const [name, o] of Object.entries(OPTIONS)) {
      expect(flagIn(USAGE, `--${name}`), `--${name} in '${USAGE}'`).toBe(true);
      if (o.short) expect(flagIn(USAGE, `-${o.short}`), `-${o.short} in '${USAGE}'`).toBe(true);
    }
  });

  it.each(VERBS)('%s: the main help shows its whole USAGE, so every flag', async (verb) => {
    const { USAGE, OPTIONS } = await load(verb);
    const text = (await help()).replace(/\s+/g, ' ');
    expect(text).toContain(` ${USAGE.replace(/^infir2 /, '')} `);
    // The same, flag by flag, in the help's block for this verb (its synopsis and description).
    const lines = (await help()).split('\n');
    const start = lines.findIndex((l) => l === `  ${verb}` || l.startsWith(`  ${verb} `));
    expect(start).toBeGreaterThan(-1);
    const end = lines.findIndex((l, i) => i > start && /^ {2}\S/.test(l));
    const block = lines.slice(start, end === -1 ? undefined : end).join('\n');
    for (const name of Object.keys(OPTIONS)) expect(flagIn(block, `--${name}`), `--${name} under ${verb}`).toBe(true);
  });

  it.each([
    ['plan', '--run-id'],
    ['resume', '--detach'],
    ['fork', '--run-id'],
    ['fork', '--set'],
    ['fork', '--detach'],
    ['list', '--limit'],
    ['cancel', '--no-wait'],
    ['up', '--port'],
    ['up', '--ui-port'],
    ['up', '--pool'],
    ['up', '--slots'],
    ['up', '--headless'],
  ])('%s %s (once missing) is listed', async (verb, flag) => {
    const synopsis = (await help()).split('\n').find((l) => l.startsWith(`  ${verb} `)) ?? '';
    expect(flagIn(synopsis, flag)).toBe(true);
  });

  it('fits in 100 columns, with each description under its synopsis', async () => {
    const lines = (await help()).trimEnd().split('\n');
    for (const l of lines) expect(l.length, l).toBeLessThanOrEqual(100);
    for (const verb of VERBS) {
      const i = lines.findIndex((l) => l === `  ${verb}` || l.startsWith(`  ${verb} `));
      const desc = lines.slice(i + 1).find((l) => /^ {6}\S/.test(l));
      expect(desc, verb).toBeDefined();
    }
  });

  it('no verb prints the usage on stderr with exit 2; `help` and -h print it with exit 0', async () => {
    const none = await runInProcess([]);
    expect(none.code).toBe(2);
    expect(none.stdout).toBe(await help());
    for (const arg of ['help', '-h']) expect((await runInProcess([arg])).code).toBe(0);
  });
});
