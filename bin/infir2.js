#!/usr/bin/env node
// Thin launcher: the CLI is compiled to dist/ by `npm run build` (`make setup` does it).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * Resolves once everything written to `stream` so far is out. Writes to a pipe are asynchronous: exiting before
 * they drain cuts the output at the pipe's buffer (64 KiB). Writes are done in order, so the callback of an empty
 * write runs after every earlier one (also when the stream failed: the callback then gets the error).
 */
function flushed(stream) {
  return new Promise((resolve) => {
    if (stream.destroyed || !stream.writable) return resolve();
    stream.write('', () => resolve());
  });
}

// The reader went away (`infir2 logs RUN --follow | head`): stop quietly, as a command killed by SIGPIPE would,
// rather than die on an unhandled 'error' event or keep writing into nothing.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err) => {
    if (err && err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  });
}

const entry = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(fileURLToPath(entry))) {
  process.stderr.write('error: infir2 is not built yet: run `make setup` (or `npm run build`) first\n');
  process.exitCode = 2;
} else {
  const { main } = await import(entry.href);
  const code = await main(process.argv.slice(2));
  process.exitCode = code;
  await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
  // Exit explicitly: the Temporal client keeps native handles open after a command is done. Every verb is done
  // here (a worker's main() returns only once it has shut down), and its output has been written out.
  process.exit(code);
}
