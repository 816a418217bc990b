/**
 * A Node entry point of ours that a child process runs: compiled (dist/) it runs as it is; from source (tests,
 * tsx), through tsx. `fromDir` is the caller's own directory, `stem` the entry's path from there without extension.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';

export function nodeScript(fromDir: string, stem: string): { script: string; execArgv: string[] } {
  const js = join(fromDir, `${stem}.js`);
  return existsSync(js) ? { script: js, execArgv: [] } : { script: join(fromDir, `${stem}.ts`), execArgv: ['--import', 'tsx'] };
}
