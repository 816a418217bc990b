/**
 * The supervisor's parsers: a trainer's output lines as progress, one parser per log format (the step's
 * `progress.format` in the plan). Megatron's lines are also what the local trainer prints; slime's behind Ray;
 * evalscope's tqdm bars. Pure.
 */
import type { ProgressFormat } from '../plan/types.js';
import { parseEvalscopeLine } from './evalscope.js';
import type { LineParser } from './events.js';
import { parseMegatronLine } from './megatron.js';
import { slimeParser } from './slime.js';

export type { LineParser, ProgressEvent } from './events.js';
export { parseEvalscopeLine, parseMegatronLine, slimeParser };

export function parserFor(format: ProgressFormat): LineParser {
  switch (format) {
    case 'megatron':
      return parseMegatronLine;
    case 'slime':
      return slimeParser();
    case 'evalscope':
      return parseEvalscopeLine;
    case 'none':
      return () => null;
  }
}
