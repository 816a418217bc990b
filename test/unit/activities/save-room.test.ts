/**
 * The free-space check beside a running trainer (src/activities/save-room.ts) on a checkpoint a hostile or broken
 * trainer left: a symlink loop and a link to `/` in the newest checkpoint (issue 30: the walk followed them on the
 * worker's main thread for minutes). Run in a child with a deadline: a walk that never ends would block this
 * test's thread for good, not fail it.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { iterDirName, TRACKER_FILE } from '../../../src/rundir/checkpoints.js';
import { ROOT } from '../../integration/harness.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'infir2-saveroom-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** What SaveRoom.check() answers for `root`, in a child process (how long it holds the event loop: bench/hostile-walk.ts). */
async function checkInChild(root: string, deadlineMs: number): Promise<{ warning: string | null }> {
  const code = `
    import { SaveRoom } from './src/activities/save-room.ts';
    console.log(JSON.stringify({ warning: await new SaveRoom(${JSON.stringify(root)}).check() }));`;
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { cwd: ROOT, timeout: deadlineMs });
  return JSON.parse(stdout) as { warning: string | null };
}

describe('the save-room check', () => {
  it('sizes a checkpoint with a symlink loop and a link to / without following them, in seconds', async () => {
    const ck = join(dir, iterDirName(300));
    mkdirSync(ck);
    writeFileSync(join(ck, 'metadata.json'), '{}');
    for (let i = 0; i < 200; i++) writeFileSync(join(ck, `shard-${i}.pt`), 'x');
    symlinkSync('.', join(ck, 'a'));
    symlinkSync('.', join(ck, 'b'));
    symlinkSync('/', join(ck, 'root'));
    writeFileSync(join(dir, TRACKER_FILE), '300');
    const r = await checkInChild(dir, 30_000);
    expect(r.warning).toBeNull(); // 202 bytes fit
  }, 40_000);
});
