/**
 * What a trainer's launch costs the worker's event loop: from the worker itself (a fork of the whole process, as
 * Node 20's libuv does it) against from the spawn helper (util/spawner.ts), in a process grown to a worker's size.
 * Prints, per way and size: the event loop's longest stall and its total stall over the launches (perf_hooks'
 * event-loop delay), and the wall time from the call to the pid.
 *
 *   npx tsx bench/spawn.ts [launches=60] [MB=380]
 * Each way runs twice, alternately (a busy machine moves both alike).
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Spawner, type SpawnedProcess } from '../src/util/spawner.js';

const launches = Number(process.argv[2] ?? 60);
const mb = Number(process.argv[3] ?? 380);

/** Touched memory, so that the pages (and their page tables) are really there, as in a busy worker. */
function grow(mb: number): Buffer[] {
  const held: Buffer[] = [];
  for (let i = 0; i < mb / 16; i++) held.push(Buffer.alloc(16 * 1024 * 1024, i & 0xff));
  return held;
}

const rssMb = () => Math.round(process.memoryUsage().rss / 2 ** 20);

async function measure(spawner: Spawner): Promise<{ maxMs: number; sumMs: number; pidMs: number }> {
  // Warm: the helper's own start is paid once per worker, not per launch.
  const w = await spawner.spawn('true', [], { cwd: '/tmp', env: {} });
  w.all.resume();
  await w.exited;
  const h = monitorEventLoopDelay({ resolution: 1 });
  const stalls: number[] = [];
  let last = performance.now();
  const tick = setInterval(() => {
    const now = performance.now();
    stalls.push(Math.max(0, now - last - 1));
    last = now;
  }, 1);
  h.enable();
  const ends: Promise<unknown>[] = [];
  let pidMs = 0;
  for (let i = 0; i < launches; i++) {
    const t0 = performance.now();
    const p: SpawnedProcess = await spawner.spawn('true', [], { cwd: '/tmp', env: {} });
    pidMs += performance.now() - t0;
    p.all.resume();
    ends.push(p.exited);
    await new Promise((r) => setTimeout(r, 5));
  }
  await Promise.all(ends);
  h.disable();
  clearInterval(tick);
  return { maxMs: h.max / 1e6, sumMs: stalls.reduce((a, b) => a + b, 0), pidMs: pidMs / launches };
}

console.log(`[bench spawn] ${launches} launches of /bin/true, one every 5 ms after the last one's pid`);
console.log('| process RSS | launched from | event loop: longest stall | total stall | call → pid, mean |');
console.log('| --- | --- | --- | --- | --- |');
const held = grow(mb);
for (let round = 0; round < 2; round++) {
  for (const [name, spawner] of [
    ['the worker itself', new Spawner(false)],
    ['the spawn helper', new Spawner(true)],
  ] as const) {
    const r = await measure(spawner);
    console.log(`| ${rssMb()} MB | ${name} | ${r.maxMs.toFixed(1)} ms | ${r.sumMs.toFixed(0)} ms | ${r.pidMs.toFixed(1)} ms |`);
    spawner.helper?.disconnect();
  }
}
held.length = 0;
