/** What `infir2 up` started, recorded in the state directory so that `down` and the other verbs find it. */
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeDirs } from '../util/dir-probe.js';
import { stateDir } from '../util/paths.js';

export interface EmbeddedState {
  serverPid: number;
  /** The server's start time (clock ticks since boot): `down` stops only that process, never a later one at its pid. */
  serverStartTicks?: number | null;
  workerPid: number | null;
  /** The worker's start time (clock ticks since boot), to tell it from a later process with its pid. */
  workerStartTicks?: number | null;
  /** The pools its worker serves. */
  pools?: string[];
  address: string;
  uiUrl: string | null;
  dbFile: string;
  startedAt: string;
}

export function embeddedStateFile(): string {
  return join(stateDir(), 'embedded.json');
}

export function readEmbedded(): EmbeddedState | null {
  const f = embeddedStateFile();
  if (!existsSync(f)) return null;
  try {
    return JSON.parse(readFileSync(f, 'utf8')) as EmbeddedState;
  } catch {
    return null;
  }
}

export function writeEmbedded(s: EmbeddedState): void {
  makeDirs(stateDir());
  const f = embeddedStateFile();
  writeFileSync(`${f}.tmp`, JSON.stringify(s, null, 2));
  renameSync(`${f}.tmp`, f);
}

export function clearEmbedded(): void {
  rmSync(embeddedStateFile(), { force: true });
}

/** The Web UI link of a workflow, when the UI's address is known (embedded default or INFIR2_UI_URL). */
export function workflowUrl(workflowId: string, namespace = 'default'): string | null {
  const base = process.env.INFIR2_UI_URL ?? readEmbedded()?.uiUrl ?? null;
  return base ? `${base.replace(/\/$/, '')}/namespaces/${namespace}/workflows/${encodeURIComponent(workflowId)}` : null;
}
