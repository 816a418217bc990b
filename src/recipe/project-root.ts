/**
 * The project root: the directory holding infir2's package.json, found from this module's location so that
 * it works from src/ (vitest) and dist/ (the built CLI) alike. Presets' relative paths resolve against it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let cached: string | undefined;

export function projectRoot(): string {
  if (cached) return cached;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg) && JSON.parse(readFileSync(pkg, 'utf8')).name === 'infir2') return (cached = dir);
    const up = dirname(dir);
    if (up === dir) throw new Error('cannot find the infir2 project root (no package.json named infir2 above this module)');
    dir = up;
  }
}
