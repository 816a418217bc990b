/**
 * A parity run's verdict from its directory alone, for the verbs that show a run's state (`status`): null for
 * any other run (no `parity.json`: nothing else is read) and for one whose files cannot be read.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PARITY_FILE } from '../plan/parity.js';
import { parityText, parityVerdict } from './parity.js';
import { readRunData } from './run-data.js';

export function parityOfRun(runDir: string): string | null {
  if (!existsSync(join(runDir, PARITY_FILE))) return null;
  try {
    const data = readRunData(runDir);
    return data.parity ? parityText(parityVerdict(data, data.parity)) : null;
  } catch {
    return null;
  }
}
