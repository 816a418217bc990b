/**
 * The worker's event loop while a checkpoint someone else filled is sized (`npx tsx bench/hostile-walk.ts`):
 * a checkpoint root whose newest checkpoint holds 100,000 files (FILES=…) in 100 directories, a symlink loop
 * (`ln -s . a; ln -s . b`) and a link to `/`. Prints, for the save-room check a running step makes every 15 s, for
 * sizing a moved-aside partial save of the same shape, and for the step's output fingerprint: the wall time and
 * the event loop's delay (perf_hooks monitorEventLoopDelay: max and p99) while it ran, median of RUNS (5) runs,
 * beside the same figures for an idle loop (the machine's own noise). Goal: max delay < 50 ms (issue 30). For comparison, the synchronous walk the check used before, on the same tree without the links (with
 * them it does not end), whose whole duration is a delay of the event loop.
 */
import { mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { SaveRoom } from '../src/activities/save-room.js';
import { prunePartials } from '../src/rundir/checkpoint-health.js';
import { iterDirName, TRACKER_FILE } from '../src/rundir/checkpoints.js';
import { fingerprintOutputs } from '../src/rundir/outputs.js';
import type { PlanStep } from '../src/plan/types.js';

const FILES = Number(process.env.FILES ?? 100_000);
const root = mkdtempSync(join(tmpdir(), 'infir2-hostile-walk-'));

function fill(dir: string, withLinks: boolean): void {
  const perDir = Math.ceil(FILES / 100);
  for (let d = 0; d < 100; d++) {
    const sub = join(dir, `rank_${String(d).padStart(3, '0')}`);
    mkdirSync(sub, { recursive: true });
    for (let i = 0; i < perDir && d * perDir + i < FILES; i++) writeFileSync(join(sub, `__${i}.distcp`), 'x'.repeat(64));
  }
  writeFileSync(join(dir, 'metadata.json'), '{}');
  if (withLinks) {
    symlinkSync('.', join(dir, 'a'));
    symlinkSync('.', join(dir, 'b'));
    symlinkSync('/', join(dir, 'root'));
  }
}

/** The walk save-room.ts used before issue 30, without its link following (which never ends here). */
function oldSyncWalk(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.size;
  return readdirSync(path).reduce((n, name) => n + oldSyncWalk(join(path, name)), 0);
}

interface Run {
  sec: number;
  maxMs: number;
  p99Ms: number;
}

/** One run of `work` with the event loop's delay recorded around it (a 5 ms timer turns the loop, as a worker's watchdog does). */
async function once(work: () => Promise<unknown> | unknown): Promise<Run> {
  const h = monitorEventLoopDelay({ resolution: 1 });
  const tick = setInterval(() => undefined, 5);
  h.enable();
  await new Promise((r) => setTimeout(r, 20)); // the histogram's timer is running before the work starts
  const t0 = performance.now();
  await work();
  const sec = (performance.now() - t0) / 1000;
  await new Promise((r) => setTimeout(r, 20)); // a synchronous walk's delay is recorded when the loop next turns
  h.disable();
  clearInterval(tick);
  return { sec, maxMs: h.max / 1e6, p99Ms: h.percentile(99) / 1e6 };
}

const RUNS = Number(process.env.RUNS ?? 5);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function measure(what: string, work: () => Promise<unknown> | unknown, runs = RUNS): Promise<void> {
  const rs: Run[] = [];
  for (let i = 0; i < runs; i++) rs.push(await once(work));
  const f = (x: number, d = 1) => x.toFixed(d);
  console.log(
    `${what.padEnd(60)} ${f(median(rs.map((r) => r.sec)), 2).padStart(6)} s   event-loop delay: max ${f(median(rs.map((r) => r.maxMs))).padStart(6)} ms` +
      ` (worst ${f(Math.max(...rs.map((r) => r.maxMs)))}), p99 ${f(median(rs.map((r) => r.p99Ms))).padStart(5)} ms`,
  );
}

try {
  console.log(`building a checkpoint of ${FILES} files (+ a symlink loop and a link to /) in ${root} ...`);
  const ck = join(root, iterDirName(300));
  fill(ck, true);
  writeFileSync(join(root, TRACKER_FILE), '300');
  const step = { completion: { kind: 'checkpoint', dir: root, iteration: 300 } } as unknown as PlanStep;
  console.log(`median of ${RUNS} runs each (max: the longest the event loop waited in a run; worst: the largest of those)`);
  // The machine's own noise (other processes on its cores): the loop doing nothing for about as long.
  await measure('idle: the noise floor of this machine (1.5 s)', () => new Promise((r) => setTimeout(r, 1500)));
  await measure('save-room check (SaveRoom.check: sizing the newest checkpoint)', () => new SaveRoom(root).check());
  await measure("the step's output fingerprint (fingerprintOutputs)", () => fingerprintOutputs(step));
  // The same tree as a partial save moved aside (no complete checkpoint is left: it is kept and sized).
  renameSync(ck, join(root, `${iterDirName(400)}.partial-1`));
  await measure('sizing a moved-aside partial save (prunePartials)', () => prunePartials(root));
  // Before: the synchronous walk, on the tree without its links (with them it does not end).
  const plain = join(root, `${iterDirName(400)}.partial-1`);
  for (const l of ['a', 'b', 'root']) unlinkSync(join(plain, l));
  await measure('before: the synchronous walk, same tree without the links', () => oldSyncWalk(plain), 1);
} finally {
  rmSync(root, { recursive: true, force: true });
}
