/** The built-in presets, by the name a recipe's `preset:` (or `infir2 plan <name>`) uses. */
import type { RecipeInput } from '../schema.js';
import { infir2_1_5b } from './infir2-1.5b.js';
import { infir2_7b } from './infir2-7b.js';
import { tiny } from './tiny.js';

export const PRESETS: Readonly<Record<string, RecipeInput>> = {
  'infir2-7b': infir2_7b,
  'infir2-1.5b': infir2_1_5b,
  tiny,
};

export const PRESET_NAMES = Object.keys(PRESETS);
