/**
 * evalscope's progress (v1.0.0, the first release with the commit InfiR2's reproduction names): tqdm bars on
 * stderr, one per phase and subset, each update ending in `\r` (a line of its own to the splitter).
 * evaluator/evaluator.py:173 `tqdm(total=…, desc=f'Predicting[{benchmark}@{subset}]: ')` and :250
 * `Reviewing[…]`; tqdm's meter is `{desc}{percentage:3.0f}%|{bar}| {n}/{total} [{elapsed}<{remaining}, {rate}]`.
 * Its score is not read from the output: the runner reads the report file (backends/tools/evalscope-runner.sh).
 */
import type { LineParser } from './events.js';

const TQDM = /\|\s*(\d+)\/(\d+) \[/;

/** Samples done of the bar's total: predicting, then reviewing (a second bar from 0). */
export const parseEvalscopeLine: LineParser = (line) => {
  const m = TQDM.exec(line);
  if (!m) return null;
  return { iteration: Number(m[1]), totalIterations: Number(m[2]) };
};
