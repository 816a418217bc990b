/**
 * The run's static details in the Web UI (`planDetails`, the staticDetails of `infir2 run`, `resume` and
 * `fork`): the run directory and one padded row per step, so that the UI's unpadded cells do not run together.
 */
import { describe, expect, it } from 'vitest';
import { planDetails, planSummary } from '../../../src/cli/run.js';
import type { Plan } from '../../../src/plan/types.js';
import { NBSP } from '../../../src/views/status-table.js';

/** Just the fields planDetails and planSummary read. */
function plan(steps: { id: string; backend: string; pool: string; gpus: number; dependsOn: string[] }[]): Plan {
  return { recipe: 'tiny', model: 'qwen', precision: 'fp8', runId: 'r1', runDir: '/runs/tiny/r1', steps } as unknown as Plan;
}

const vis = (md: string) => md.replaceAll(NBSP, '~');

describe('planDetails', () => {
  const p = plan([
    { id: 'cpt.warmup', backend: 'local', pool: 'default', gpus: 1, dependsOn: [] },
    { id: 'sft.stage1', backend: 'megatron', pool: 'gpu8', gpus: 8, dependsOn: ['cpt.warmup'] },
    { id: 'eval.a', backend: 'local', pool: 'cpu', gpus: 0, dependsOn: ['cpt.warmup', 'sft.stage1'] },
  ]);

  it('pads each cell with no-break spaces and right-aligns the GPU count', () => {
    expect(vis(planDetails(p))).toBe(
      [
        'run dir: `/runs/tiny/r1`',
        '',
        '| ~step~ | ~backend~ | ~pool~ | ~GPUs~ | ~after~ |',
        '| :--- | :--- | :--- | ---: | :--- |',
        '| ~cpt.warmup~ | ~local~ | ~default~ | ~1~ |  |',
        '| ~sft.stage1~ | ~megatron~ | ~gpu8~ | ~8~ | ~cpt.warmup~ |',
        '| ~eval.a~ | ~local~ | ~cpu~ | ~0~ | ~cpt.warmup, sft.stage1~ |',
      ].join('\n'),
    );
  });

  it('keeps no two cells adjacent without a no-break space between them', () => {
    for (const line of planDetails(p).split('\n').slice(2).filter((l) => !l.includes('---'))) {
      for (const cell of line.slice(2, -2).split(' | ').filter(Boolean)) expect(cell.startsWith(NBSP) && cell.endsWith(NBSP), JSON.stringify(cell)).toBe(true);
    }
  });

  it('summarises the plan on one line', () => {
    expect(planSummary(p)).toBe('tiny · qwen · fp8 · 3 steps');
  });
});
