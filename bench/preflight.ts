/**
 * How soon a step whose node cannot run it fails (`npx tsx bench/preflight.ts`): on the embedded default
 * (`infir2 up`: a dev server and its local worker, in a temporary INFIR2_HOME), `infir2 run tiny` with the
 * settings of each case; the time from starting `infir2 run` to the preflight's failure line in the step's log,
 * and to `run`'s exit (it prints the failed run's table). The cases are the integration test's
 * (test/integration/preflight.test.ts): NumPy ≥ 2 beside Megatron core_v0.14.0, a package the step needs that is
 * missing (TransformerEngine for a Megatron step), a wrong pin, a full disk, an unreadable input; and a step that
 * passes, to the preflight's summary line (the time the preflight adds to every attempt). Median of 3 runs each.
 * As root, `up` runs without the capabilities that let root read any file, so that an unreadable input is one.
 */
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, ROOT } from '../test/integration/harness.js';
import { megatronCheckout, NUMPY2_STANDIN } from '../test/fixtures/preflight-trees.js';

const CLI = join(ROOT, 'bin', 'infir2.js');
const dir = mkdtempSync(join(tmpdir(), 'infir2-bench-preflight-'));
const runs = join(dir, 'runs');
const port = await freePort();
const env = { ...process.env, INFIR2_HOME: join(dir, 'home'), TEMPORAL_ADDRESS: `127.0.0.1:${port}` };
const root = process.getuid?.() === 0;
const noDac = root ? ['setpriv', '--bounding-set', '-dac_override,-dac_read_search', '--inh-caps', '-dac_override,-dac_read_search', '--'] : [];

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `infir2 run tiny --run-id ID --set …`: seconds until `line` is in the step's log, and until `run` exits. */
async function timeRun(id: string, sets: string[], line: RegExp, cancel = false, runDir = runs): Promise<{ line: number; exit: number | null }> {
  const log = join(runDir, id, 'logs', 'cpt.warmup.log');
  const t0 = performance.now();
  const child = spawn(process.execPath, [CLI, 'run', 'tiny', '--run-id', id, '--set', `runDir=${runDir}`, ...sets.flatMap((s) => ['--set', s])], { env, stdio: 'ignore' });
  const exited = new Promise<number>((r) => child.on('exit', () => r(performance.now())));
  let seen: number | null = null;
  while (seen === null) {
    if (existsSync(log) && line.test(readFileSync(log, 'utf8'))) seen = performance.now();
    else if (performance.now() - t0 > 120_000) throw new Error(`${id}: no ${line} in ${log} after 120 s`);
    else await sleep(20);
  }
  if (cancel) {
    execFileSync(process.execPath, [CLI, 'cancel', `tiny-${id}`], { env, stdio: 'ignore' });
    await exited;
    return { line: (seen - t0) / 1000, exit: null };
  }
  return { line: (seen - t0) / 1000, exit: ((await exited) - t0) / 1000 };
}

const FAIL = /\] preflight fail: /;
const meg = megatronCheckout(join(dir, 'Megatron-LM'));
const megatron = ['cpt.backend=megatron', 'pools.local.gpusPerNode=1', `software.megatron=${meg.dir}`, `model.tokenizer=${ROOT}/trainer`];
const noGpu = '{check: gpu, why: "no GPU on this machine"}';
const unreadable = join(dir, 'cpt-unreadable.jsonl');
writeFileSync(unreadable, readFileSync(join(ROOT, 'trainer', 'data', 'cpt.jsonl')));
chmodSync(unreadable, 0o000);

/**
 * The runs of the full-disk case live on a 2 MB tmpfs filled up to its last 256 kB: room for the run's files
 * (`run` refuses a run directory it cannot write), not for one checkpoint of the tiny model (~1.3 MB). null
 * where this process may not mount one.
 */
function fullDisk(i: number): string | null {
  const at = join(dir, `full-runs-${i}`);
  mkdirSync(at, { recursive: true });
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', at], { stdio: 'ignore' });
  } catch {
    return null;
  }
  writeFileSync(join(at, 'filler'), Buffer.alloc(2 * 1024 * 1024 - 256 * 1024, 1));
  return at;
}

const cases: { name: string; sets: (id: string) => string[]; runDir?: (i: number) => string | null; line?: RegExp; cancel?: boolean }[] = [
  {
    name: 'NumPy 2 + Megatron core_v0.14.0',
    sets: () => [...megatron, `cpt.env={PYTHONPATH: "${meg.dir}:${NUMPY2_STANDIN}"}`, `software.skipChecks=[${noGpu}, {check: transformerEngine, why: "stand-in"}]`],
  },
  { name: 'missing package (TransformerEngine, Megatron step)', sets: () => [...megatron, `software.skipChecks=[${noGpu}]`] },
  { name: 'wrong pin (torch >=2.4)', sets: () => ['software.versions.torch=">=2.4"'] },
  // A full disk is a storage fault: the run waits for space instead of ending (cancelled once the line is seen).
  { name: 'full disk (a tmpfs with 256 kB left)', sets: () => [], runDir: fullDisk, cancel: true },
  { name: 'unreadable input', sets: () => [`cpt.data=${unreadable}`] },
  { name: 'passes (to the preflight summary)', sets: () => [], line: /\] attempt 1 preflight: \d+ passed/, cancel: true },
];

const up = spawn(noDac[0] ?? process.execPath, [...noDac.slice(1), ...(noDac.length ? [process.execPath] : []), CLI, 'up', '--port', String(port), '--ui-port', String(await freePort()), '--headless'], { env, stdio: 'inherit' });
await new Promise<void>((res, rej) => up.on('exit', (c) => (c === 0 ? res() : rej(new Error(`infir2 up exited ${c}`)))));
const mounts: string[] = [];
try {
  console.log(`preflight: infir2 run → the preflight's line, on the embedded default (${root ? 'up without DAC override' : 'up'}), median of 3`);
  console.log('| case | run → failure line (s) | run → run exits (s) | runs |');
  console.log('| --- | ---: | ---: | --- |');
  for (const c of cases) {
    const lines: number[] = [];
    const exits: number[] = [];
    for (let i = 0; i < 3; i++) {
      // A run of the full-disk case fills its own tmpfs (the run's files take the room left).
      const runDir = c.runDir ? c.runDir(i) : runs;
      if (runDir === null) {
        console.log(`| ${c.name} | not measured: cannot mount a tmpfs here | | |`);
        break;
      }
      if (c.runDir) mounts.push(runDir);
      const id = `${c.name.split(' ')[0]!.toLowerCase().replace(/[^a-z0-9]/g, '')}-${i}`;
      const t = await timeRun(id, c.sets(id), c.line ?? FAIL, c.cancel, runDir);
      lines.push(t.line);
      if (t.exit !== null) exits.push(t.exit);
    }
    if (lines.length) console.log(`| ${c.name} | ${median(lines).toFixed(2)} | ${exits.length ? median(exits).toFixed(2) : '–'} | ${lines.map((x) => x.toFixed(2)).join(', ')} |`);
  }
} finally {
  execFileSync(process.execPath, [CLI, 'down'], { env, stdio: 'ignore' });
  for (const m of mounts) execFileSync('umount', ['-l', m], { stdio: 'ignore' });
  rmSync(dir, { recursive: true, force: true });
}
