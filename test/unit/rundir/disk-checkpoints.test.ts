/**
 * A closed run's status raised to the checkpoints its directories hold: a cancelled trainer saves on SIGTERM after
 * the workflow heard its last progress, and `status` should show what `resume` would load.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { initialStepState, type Progress, type RunStatus, type StepState } from '../../../src/plan/contracts.js';
import type { Plan, PlanStep } from '../../../src/plan/types.js';
import { iterDirName, TRACKER_FILE } from '../../../src/rundir/checkpoints.js';
import { newestCompleteOnDisk, withDiskCheckpoints } from '../../../src/rundir/disk-checkpoints.js';

let root: string;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'infir2-diskckpt-'));
});
afterEach(() => {
  chmodSync(root, 0o755);
  rmSync(root, { recursive: true, force: true });
});

function saved(dir: string, iterations: number[], tracker: number): void {
  for (const n of iterations) {
    mkdirSync(join(dir, iterDirName(n)), { recursive: true });
    writeFileSync(join(dir, iterDirName(n), 'metadata.json'), '{}');
  }
  writeFileSync(join(dir, TRACKER_FILE), String(tracker));
}

const progress = (p: Partial<Progress>): Progress => ({
  iteration: null, totalIterations: 60, loss: null, throughput: null, throughputUnit: null, lastCheckpoint: null,
  resumedFrom: null, attempt: 1, pid: null, updatedAt: '2026-11-22T03:00:00.000Z', ...p,
});
const step = (id: string, s: Partial<StepState>): StepState => ({ ...initialStepState(id), ...s });
const planStep = (id: string, dir: string | null) => ({ id, checkpoint: dir ? { layout: 'megatron', dir } : null }) as PlanStep;

function fixture(): { plan: Plan; status: RunStatus; cpt: string } {
  const cpt = join(root, 'cpt', 'checkpoints');
  const plan = { runDir: root, steps: [planStep('cpt.warmup', cpt), planStep('cpt.stable', cpt), planStep('cpt.decay', join(root, 'decay')), planStep('eval.x', null)] } as Plan;
  const status: RunStatus = {
    recipe: 'tiny', runId: 'r', runDir: root, status: 'cancelled', message: null,
    steps: [
      step('cpt.warmup', { status: 'completed', attempts: 1, progress: progress({ iteration: 4, lastCheckpoint: 3 }) }),
      step('cpt.stable', { status: 'cancelled', attempts: 1, progress: progress({ iteration: 13, lastCheckpoint: 10 }) }),
      step('cpt.decay', { status: 'skipped' }),
      step('eval.x', { status: 'skipped' }),
    ],
  };
  return { plan, status, cpt };
}

describe('withDiskCheckpoints', () => {
  it("raises a cancelled step's checkpoint (and an iteration behind it) to the newest complete one on disk", () => {
    const { plan, status, cpt } = fixture();
    saved(cpt, [4, 5, 10, 15], 15);
    mkdirSync(join(cpt, iterDirName(20))); // a save SIGKILL cut short: never shown
    const shown = withDiskCheckpoints(status, plan);
    expect(shown.steps[1]!.progress).toMatchObject({ lastCheckpoint: 15, iteration: 15, loss: null, attempt: 1 });
    expect(status.steps[1]!.progress!.lastCheckpoint).toBe(10); // the recorded status is not changed
    // A finished step shows its result; steps that never started are left alone although warmup and stable
    // share the root (a skipped stable must not show warmup's checkpoints).
    expect(shown.steps[0]).toBe(status.steps[0]);
    expect(shown.steps[2]).toBe(status.steps[2]);
    expect(shown.steps[3]).toBe(status.steps[3]);
  });

  it('never lowers the recorded checkpoint, nor an iteration already past it', () => {
    const { plan, status, cpt } = fixture();
    saved(cpt, [5], 5);
    expect(withDiskCheckpoints(status, plan).steps[1]).toBe(status.steps[1]);
    saved(cpt, [5, 12], 12);
    expect(withDiskCheckpoints(status, plan).steps[1]!.progress).toMatchObject({ lastCheckpoint: 12, iteration: 13 });
  });

  it('leaves the recorded value where the directory is missing or unreadable', () => {
    const { plan, status, cpt } = fixture();
    expect(withDiskCheckpoints(status, plan).steps[1]).toBe(status.steps[1]);
    saved(cpt, [15], 15);
    expect(withDiskCheckpoints(status, plan, () => null).steps[1]).toBe(status.steps[1]);
    expect(newestCompleteOnDisk(cpt)).toBe(15);
    if (process.getuid?.() !== 0) {
      chmodSync(join(root, 'cpt'), 0o000);
      expect(newestCompleteOnDisk(cpt)).toBeNull();
      chmodSync(join(root, 'cpt'), 0o755);
    }
  });

  it('a failed step with no progress heard gets one carrying the checkpoint; a running step of a terminated run too', () => {
    const { plan, status, cpt } = fixture();
    saved(cpt, [5], 5);
    status.steps[1] = step('cpt.stable', { status: 'failed', attempts: 2, endedAt: '2026-11-22T03:05:00.000Z' });
    expect(withDiskCheckpoints(status, plan).steps[1]!.progress).toEqual(
      progress({ totalIterations: null, iteration: 5, lastCheckpoint: 5, attempt: 2, updatedAt: '2026-11-22T03:05:00.000Z' }),
    );
    status.steps[1] = step('cpt.stable', { status: 'running', attempts: 1, progress: progress({ iteration: 2, lastCheckpoint: null }) });
    expect(withDiskCheckpoints(status, plan).steps[1]!.progress).toMatchObject({ iteration: 5, lastCheckpoint: 5 });
  });
});
