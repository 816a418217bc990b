/**
 * `infir2 replay-check [--days N] [--bundle PATH] [--json]`: before an upgrade, may this workflow code take over
 * the runs in flight? Replays the recorded history of every infir2 workflow that runs now, or closed within the
 * last N days, against this checkout's workflow bundle (or `--bundle`), and names each one it would break. Exit 0
 * when all replay, 1 when one would break (a worker with this code would stall it), 3 when Temporal is unreachable.
 */
import { existsSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { intFlag, parseVerbArgs, positionals, type Options } from './args.js';
import { UsageError } from '../errors.js';
import { codecFromEnv, EncryptionCodec } from '../temporal/codec.js';
import { connectClient } from '../temporal/connection.js';
import { replayAll, replayTargets, type ReplayVerdict } from '../workers/replay-check.js';
import { prebuiltBundlePath, workflowBundle } from '../workers/workflow-bundle.js';
import { table } from './status-view.js';

export const USAGE = 'infir2 replay-check [--days N] [--bundle PATH] [--json]';
export const OPTIONS = { days: { type: 'string' }, bundle: { type: 'string' }, json: { type: 'boolean' } } satisfies Options;

const DEFAULT_DAYS = 7;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals: pos } = parseVerbArgs('replay-check', argv, OPTIONS, USAGE);
  positionals('replay-check', pos, [], USAGE);
  const days = values.days === '0' ? 0 : intFlag('days', values.days, DEFAULT_DAYS);
  const codec = codecFromEnv();
  const encrypted = codec instanceof EncryptionCodec;
  const bundlePath = values.bundle ? resolve(values.bundle) : null;
  if (bundlePath && !existsSync(bundlePath)) throw new UsageError(`--bundle: no file ${bundlePath} (a workflow bundle as scripts/build.sh writes it: dist/workflow-bundle.js)`);
  const bundle = bundlePath ? { codePath: bundlePath } : await workflowBundle(encrypted);
  const which = bundlePath ?? prebuiltBundlePath(encrypted);
  const since = new Date(Date.now() - days * 86_400_000);
  const { client, connection } = await connectClient();
  try {
    const targets = await replayTargets(client, since);
    if (!values.json) {
      process.stdout.write(
        `replaying ${targets.length} workflow histor${targets.length === 1 ? 'y' : 'ies'} (running, or closed since ${since.toISOString().slice(0, 16).replace('T', ' ')} UTC) against ${relative(process.cwd(), which) || which} ...\n`,
      );
    }
    const verdicts = await replayAll(client, targets, { bundle, codec, encrypted });
    process.stdout.write(values.json ? `${JSON.stringify({ since: since.toISOString(), bundle: which, verdicts }, null, 2)}\n` : render(verdicts));
    return verdicts.some((v) => v.error) ? 1 : 0;
  } finally {
    await connection.close();
  }
}

export function render(verdicts: ReplayVerdict[]): string {
  const rows = verdicts.map((v) => [v.error ? 'BREAKS' : 'ok', v.type, v.status, v.error ? `${v.workflowId}: ${v.error}` : v.workflowId]);
  const lines = rows.length ? table(rows).split('\n') : [];
  const broken = verdicts.filter((v) => v.error);
  const running = broken.filter((v) => v.status === 'running').length;
  const summary = !verdicts.length
    ? 'no infir2 workflow runs or closed in that time: nothing to check'
    : !broken.length
      ? `all ${verdicts.length} replay: this workflow code can take over the runs in flight`
      : `${broken.length} of ${verdicts.length} would break (${running} running): a worker with this code would stall ${running === 1 ? 'it' : 'them'} at its next replay. ` +
        'Let them finish first (or cancel, upgrade, then resume them: a resume starts a new history), or keep the recorded behaviour behind patched() (docs/cluster.md#10-upgrades)';
  return `${[...lines, summary].join('\n')}\n`;
}
