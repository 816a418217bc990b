/**
 * Everything a report charts from one line, in any of the engines' formats (a step's log may mix them: the
 * local RL trainer prints slime's `rollout k:` dicts beside Megatron's iteration lines). The supervisor's
 * parsers read the few fields it acts on; this reads the rest of the same lines, with the same patterns.
 */
import type { MetricsLine } from './events.js';
import { trainingLog, validationLine } from './megatron.js';
import { slimeMetrics } from './slime.js';

export type { EvalSplit, MetricsLine } from './events.js';

export function parseMetricsLine(line: string): MetricsLine | null {
  // Cheap tests first: a chatty log is mostly lines of none of these formats.
  if (line.includes('iteration')) {
    const m = trainingLog(line) ?? validationLine(line);
    if (m) return m;
  }
  return slimeMetrics(line);
}
