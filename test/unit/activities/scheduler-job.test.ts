import { describe, expect, it } from 'vitest';
import { parseJobRow } from '../../../src/activities/scheduler-job.js';

describe('parseJobRow (squeue --noheader --format=%i|%N)', () => {
  it('reads the job id and its nodes', () => {
    expect(parseJobRow('slurm', '4711|n[1-2]\n')).toEqual({ scheduler: 'slurm', id: '4711', nodes: 'n[1-2]' });
    expect(parseJobRow('slurm', '  4711_3|gpu-node-07\n')).toEqual({ scheduler: 'slurm', id: '4711_3', nodes: 'gpu-node-07' });
  });

  it('keeps a pending job with no nodes yet, and finds nothing in an empty answer or noise', () => {
    expect(parseJobRow('slurm', '4712|\n')).toEqual({ scheduler: 'slurm', id: '4712', nodes: '' });
    expect(parseJobRow('slurm', '4712|(null)\n')).toEqual({ scheduler: 'slurm', id: '4712', nodes: '' });
    expect(parseJobRow('slurm', '')).toBeNull();
    expect(parseJobRow('slurm', 'squeue: error: Invalid user\n')).toBeNull();
  });
});
