#!/usr/bin/env node
// Thin launcher: the CLI is compiled to dist/ by `npm run build` (`make setup` does it).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const entry = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(fileURLToPath(entry))) {
  process.stderr.write('error: infir2 is not built yet: run `make setup` (or `npm run build`) first\n');
  process.exit(2);
}
const { main } = await import(entry.href);
const code = await main(process.argv.slice(2));
// Exit explicitly: the Temporal client keeps native handles open after a command is done.
process.exit(code);
