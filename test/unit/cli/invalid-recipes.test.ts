/**
 * Every malformed recipe a user could plausibly write gives exit 2 and one `error: <where>: <what>` line per
 * problem, never a stack trace. All cases run in-process through main(); a representative subset also runs as
 * the built CLI (`node bin/infir2.js`).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, runInProcess, runSubprocess, type CliResult } from './run-cli.js';

const INVALID = 'test/fixtures/recipes/invalid';
const tmp = mkdtempSync(join(tmpdir(), 'infir2-invalid-'));

interface Case {
  name: string;
  args: string[];
  /** Each must match one `error:` line; and there are exactly this many error lines. */
  errors: RegExp[];
}

const file = (name: string, errors: RegExp[]): Case => ({ name, args: ['validate', `${INVALID}/${name}.yaml`], errors });

const CASES: Case[] = [
  file('wrong-type', [/^cpt\.iterations: expected a number, got 'many'$/]),
  file('unknown-top-key', [/^pool: unknown key; did you mean 'pools'\?$/]),
  file('unknown-nested-key', [/^cpt\.warmupIter: unknown key; did you mean 'warmupIters'\?$/]),
  file('snake-case-key', [/^cpt\.warmup_iters: unknown key; did you mean 'warmupIters'\?$/]),
  file('missing-name', [/^name: required/]),
  file('missing-fields', [/^cpt\.iterations: required/, /^cpt\.warmupIters: required/, /^cpt\.decayIters: required/]),
  file('zero-count', [/^cpt\.iterations: must be at least 1, got 0$/]),
  file('negative-count', [/^cpt\.warmupIters: must be 0 or more, got -5$/]),
  file('fractional-count', [/^cpt\.saveInterval: expected a whole number, got 2\.5$/]),
  file('phases-do-not-add-up', [/^cpt\.decayIters: warmupIters \(60\) \+ decayIters \(40\) must be less than iterations \(100\)/]),
  file('unknown-preset', [/^preset: unknown preset 'infir2-8b'; did you mean 'infir2-7b'\?$/]),
  file('preset-not-a-name', [/^preset: expected a preset name; presets: infir2-7b, infir2-1\.5b, tiny$/]),
  file('yaml-syntax', [/yaml-syntax\.yaml:\d+:\d+: .*Flow sequence/]),
  file('empty', [/empty\.yaml: is empty/]),
  file('comments-only', [/comments-only\.yaml: is empty/]),
  file('escaping-name', [/^name: expected a slug: .* got '\.\.\/\.\.\/etc'$/]),
  file('name-with-slash', [/^name: expected a slug.*'team\/run'$/]),
  file('name-uppercase', [/^name: expected a slug.*'MyRun'$/]),
  file('duplicate-keys', [/duplicate-keys\.yaml:3:1: duplicate key/]),
  file('top-level-list', [/top-level-list\.yaml: expected a mapping of recipe keys at the top level, got a list$/]),
  file('multiple-documents', [/multiple-documents\.yaml:\d+:\d+: a recipe is a single YAML document/]),
  file('wrong-enum', [/^precision: expected one of fp8, bf16; got 'fp16'; did you mean 'fp8'\?$/]),
  file('launcher-typo', [/^pools\.local\.launcher: expected one of local, torchrun, slurm, ray; got 'torchrn'; did you mean 'torchrun'\?$/]),
  file('unknown-pool', [/^cpt\.pool: no pool 'locl' in pools; did you mean 'local'\?$/]),
  file('sft-data-directory', [/^sft\.0\.data: slime reads only a \.jsonl or \.parquet file/]),
  file('base-is-iter-dir', [/^model\.base: \/ckpt\/qwen2\.5-7b\/iter_0035000 is an iteration directory/]),
  file('no-load-optim', [/^cpt\.extraArgs\.0: --no-load-optim drops the optimizer/]),
  file('rope-mismatch', [/^sft\.0\.arch\.rotaryBase: 10000 differs from model\.arch\.rotaryBase 1000000/]),
  file('fp8-without-fmt', [/^convert\.fp8\.fmt: .*slime asserts fmt == "e4m3"/]),
  file('eval-too-long', [/^eval\.benchmarks\.aime24\.maxTokens: 40000 exceeds the model's context/]),
  file('rl-too-long', [/^rl\.curriculum\.0\.maxResponseLen: 65536 exceeds the model's context/]),
  file('rl-last-rollout-unsaved', [/^rl\.curriculum\.0\.rollouts: 1010 is not a multiple of rl\.saveInterval \(20\)/]),
  file('bad-duration', [/^cpt\.stallTimeout: expected seconds or a duration like 30m, 6h, 14d, got 'soon'$/]),
  file('bad-pool-name', [/^pools\.My Pool: invalid name 'My Pool'/]),
  file('too-many-nodes', [/^sft\.0\.nodes: 16 nodes, but pool 'ray' has 4/]),
  file('scalar-for-mapping', [/^model: expected a mapping, got 'qwen'$/]),
  file('empty-curriculum', [/^rl\.curriculum: expected at least one curriculum stage/]),
  file('unknown-key-in-list', [/^sft\.0\.lr: required/, /^sft\.0\.lrr: unknown key; did you mean 'lr'\?$/]),
  file('bad-eval-model', [/^eval\.models\.0: expected one of base, hf, fp8, rl; got 'final'$/]),
  file('no-stages', [/^\(recipe\): no stages/]),
  // Keys that reach JavaScript's object prototype (issue 30 case 6): refused wherever they are written.
  file('proto-top-level', [/^__proto__: key not allowed: __proto__, constructor and prototype name no recipe key/]),
  file('proto-nested', [/^cpt\.constructor: key not allowed/]),
  file('proto-env-map', [/^cpt\.env\.__proto__: key not allowed/, /^sft\.0\.prototype: key not allowed/]),
  file('several-problems', [/^precision: expected one of/, /^cpt\.iterations: must be at least 1, got -1$/, /^cpt\.saveIntervall: unknown key; did you mean 'saveInterval'\?$/]),
  // Files that are not recipes.
  { name: 'missing file', args: ['validate', 'recipes/nope.yaml'], errors: [/^recipes\/nope\.yaml: no such file$/] },
  { name: 'neither file nor preset', args: ['validate', 'tinny'], errors: [/^tinny: neither a file nor a preset; did you mean 'tiny'\?$/] },
  { name: 'a directory', args: ['validate', 'recipes'], errors: [/^recipes: is a directory; expected a recipe YAML file$/] },
  { name: 'a binary file', args: ['validate', join(tmp, 'model.bin')], errors: [/model\.bin: is a binary file/] },
  { name: 'not UTF-8', args: ['validate', join(tmp, 'latin1.yaml')], errors: [/latin1\.yaml: is not UTF-8 text/] },
  { name: 'an absurdly large file', args: ['validate', join(tmp, 'huge.yaml')], errors: [/huge\.yaml: is \d+ bytes; a recipe may be at most 1048576 bytes/] },
  // Command-line mistakes.
  { name: '--set without =', args: ['validate', 'tiny', '--set', 'cpt.iterations'], errors: [/^--set cpt\.iterations: expected key\.path=value/] },
  { name: '--set empty segment', args: ['validate', 'tiny', '--set', 'cpt..lr=1'], errors: [/^--set cpt\.\.lr=1: empty key segment/] },
  { name: '--set index out of range', args: ['validate', 'tiny', '--set', 'sft.5.lr=1'], errors: [/^--set sft\.5\.lr=1: sft has 2 item\(s\): index 5 is out of range$/] },
  { name: '--set bad YAML value', args: ['validate', 'tiny', '--set', 'cpt.lr=[1,'], errors: [/^--set cpt\.lr=\[1,: the value is not valid YAML/] },
  { name: '--set wrong type', args: ['validate', 'tiny', '--set', 'cpt.lr=fast'], errors: [/^cpt\.lr: expected a number, got 'fast'$/] },
  { name: '--set unknown key', args: ['validate', 'tiny', '--set', 'cpt.itrations=5'], errors: [/^cpt\.itrations: unknown key; did you mean 'iterations'\?$/] },
  { name: '--set a failure rate of 0', args: ['validate', 'tiny', '--set', 'goodput.failureRate=0'], errors: [/^goodput\.failureRate: must be greater than 0, got 0$/] },
  { name: '--set a negative failure rate', args: ['plan', 'recipes/qwen2.5-7b-fp8.yaml', '--set', 'goodput.failureRate=-1e-5'], errors: [/^goodput\.failureRate: must be greater than 0, got -0\.00001$/] },
  { name: '--set a failure rate that is no number', args: ['validate', 'tiny', '--set', 'goodput.failureRate=often'], errors: [/^goodput\.failureRate: expected a number, got 'often'$/] },
  { name: '--set an iteration time that rounds to 0 s', args: ['validate', 'tiny', '--set', 'cpt.estimates={iterationTime: 0.2s, saveTime: 5}'], errors: [/^cpt\.estimates\.iterationTime: must be at least 1s; write shorter times as a number of seconds \(0\.25\), got '0\.2s'$/] },
  { name: '--set a negative log cap', args: ['validate', 'tiny', '--set', 'logs.maxMB=-1'], errors: [/^logs\.maxMB: must be 0 or more, got -1$/] },
  { name: '--set a secret reference that is no variable name', args: ['validate', 'tiny', '--set', 'cpt.secrets.HF_TOKEN=hf-token'], errors: [/^cpt\.secrets\.HF_TOKEN: .*'hf-token'/] },
  { name: '--set a secret also in env', args: ['validate', 'tiny', '--set', 'cpt.secrets.HF_TOKEN=HF_TOKEN', '--set', 'cpt.env.HF_TOKEN=hf_abc'], errors: [/^cpt\.secrets\.HF_TOKEN: HF_TOKEN is also set in cpt\.env, whose values travel in the plan and the run's history: keep it in secrets only$/] },
  { name: '--set through a scalar', args: ['validate', 'tiny', '--set', 'name.x=1'], errors: [/^--set name\.x=1: name is a string, not a mapping or a list$/] },
  { name: '--set through __proto__', args: ['validate', 'tiny', '--set', 'pools.__proto__.x=1'], errors: [/^--set pools\.__proto__\.x=1: pools\.__proto__: key not allowed/] },
  { name: '--set __proto__ at the top', args: ['validate', 'tiny', '--set', '__proto__.polluted=yes'], errors: [/^--set __proto__\.polluted=yes: __proto__: key not allowed/] },
  { name: '--set constructor.prototype', args: ['validate', 'tiny', '--set', 'constructor.prototype.x=1'], errors: [/^--set constructor\.prototype\.x=1: constructor: key not allowed/] },
  { name: '--set a stage\'s __proto__', args: ['validate', 'tiny', '--set', 'cpt.__proto__=1'], errors: [/^--set cpt\.__proto__=1: cpt\.__proto__: key not allowed/] },
  { name: '--set a value holding __proto__', args: ['validate', 'tiny', '--set', 'cpt.env={__proto__: {x: 1}}'], errors: [/^--set cpt\.env=\{__proto__: \{x: 1\}\}: cpt\.env\.__proto__: key not allowed/] },
  { name: '--set a webhook URL with credentials', args: ['validate', 'tiny', '--set', "notify={webhooks: [{url: 'https://bot:hunter2@hooks.example.com/x'}]}"], errors: [/^notify\.webhooks\.0\.url: holds credentials \(user:pass@\), which fetch never sends .*, got 'https:\/\/hooks\.example\.com\/…'$/] },
  { name: '--set a webhook URL with a token in its query', args: ['validate', 'tiny', '--set', "notify={webhooks: [{url: 'https://hooks.example.com/x?channel=ops&access_token=hunter2'}]}"], errors: [/^notify\.webhooks\.0\.url: holds a secret in its query \(access_token=…\): .* write env:NAME, got 'https:\/\/hooks\.example\.com\/…'$/] },
  { name: 'bad --run-id', args: ['plan', 'tiny', '--run-id', '../x'], errors: [/^--run-id: '\.\.\/x' is not a valid run id/] },
];

/** The `error: ` lines, without the prefix. */
const errorLines = (r: CliResult) => r.stderr.split('\n').filter((l) => l.startsWith('error: ')).map((l) => l.slice('error: '.length));

function expectRejected(r: CliResult, c: Case): void {
  expect(r.code, r.stderr).toBe(2);
  expect(r.stdout).toBe('');
  expect(r.stderr).not.toMatch(/\n\s+at .+:\d+:\d+/); // no stack trace
  const lines = errorLines(r);
  expect(lines, r.stderr).toHaveLength(c.errors.length);
  for (const re of c.errors) expect(lines.some((l) => re.test(l)), `${re} in\n${r.stderr}`).toBe(true);
}

beforeAll(() => {
  writeFileSync(join(tmp, 'model.bin'), Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 1, 2, 3]));
  writeFileSync(join(tmp, 'latin1.yaml'), Buffer.from('name: caf\xe9\n', 'latin1'));
  writeFileSync(join(tmp, 'huge.yaml'), `preset: tiny\n${'# padding padding padding padding\n'.repeat(40_000)}`);
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('malformed recipes, in-process', () => {
  it('covers at least 30 cases', () => expect(CASES.length).toBeGreaterThanOrEqual(30));
  it.each(CASES)('$name → exit 2, one line per problem', async (c) => {
    const r = await runInProcess(c.args);
    expectRejected(r, c);
    expect(r.stderr).not.toContain('hunter2'); // a secret in a refused value is not echoed
    // Nothing leaked into the process's objects on the way (a --set through __proto__ once set Object.prototype.x).
    expect(({} as Record<string, unknown>).x ?? ({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe('malformed recipes, as the built CLI', () => {
  beforeAll(() => ensureBuilt(), 120_000);
  const SUBSET = ['--set a negative failure rate', 'wrong-type', 'unknown-nested-key', 'yaml-syntax', 'empty', 'escaping-name', 'duplicate-keys', 'several-problems', 'a binary file', 'an absurdly large file', 'missing file', 'a directory', '--set without =', 'unknown-preset', 'proto-env-map', '--set through __proto__', '--set constructor.prototype'];
  it.each(CASES.filter((c) => SUBSET.includes(c.name)))('$name', async (c) => {
    expectRejected(await runSubprocess(c.args), c);
  });
});
