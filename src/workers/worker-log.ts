/**
 * What a worker prints about the SDK: warnings and errors only, one plain line each, with the time. sdk-core's
 * own logging (its gRPC retries while the server is down, every second or two, per call, with ANSI colours and
 * a Rust `Status { … }` dump) is forwarded into this logger instead of going to stderr on its own, reduced to
 * its gist, and repeats of one kind within a minute are counted rather than printed.
 */
import { Runtime, type Logger, type LogLevel, type LogMetadata } from '@temporalio/worker';

/** A line the SDK writes when a worker polls no workflows: expected of a pool worker started with --no-workflows. */
const EXPECTED = /^No workflows registered, not polling for workflow tasks$/;
/** Repeats of one kind of message within this long are counted, not printed. */
export const REPEAT_WINDOW_MS = 60_000;

// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;]*[A-Za-z]/g;

/** `Status { code: Unavailable, message: "tcp connect error", … "Connection refused" … }` → `Unavailable: tcp connect error (Connection refused)`. */
export function gist(error: unknown): string {
  const text = String(error ?? '').replace(ANSI, '');
  const status = /code: (\w+), message: "([^"]*)"/.exec(text);
  if (!status) return text.split('\n')[0]!.slice(0, 200);
  const cause = /message: "([^"]*)" \}\)/.exec(text)?.[1] ?? /kind: \w+, message: "([^"]*)"/.exec(text)?.[1];
  return `${status[1]}: ${status[2]}${cause && cause !== status[2] ? ` (${cause})` : ''}`;
}

/** One line for a message and its metadata: no colours, no newlines, the error's gist. */
export function oneLine(message: string, meta?: LogMetadata): string {
  const text = message.replace(ANSI, '').replace(/\s*\n\s*/g, ' ').trim();
  const error = meta?.error ?? meta?.err;
  return error ? `${text} (${gist(error)})` : text;
}

/** The kind of a message, for counting repeats: its words without numbers. */
const kindOf = (line: string) => line.replace(/\d+/g, '#');

/**
 * A Logger that writes WARN and ERROR as `<time> warn: <one line>`; a message of a kind printed less than
 * REPEAT_WINDOW_MS ago is counted, and the count is said with the next line of that kind after the window.
 */
export function workerLogger(write: (line: string) => void, now: () => number = Date.now): Logger {
  const last = new Map<string, { at: number; skipped: number }>();
  const emit = (level: LogLevel, message: string, meta?: LogMetadata) => {
    if (level !== 'WARN' && level !== 'ERROR') return;
    const line = oneLine(message, meta);
    if (EXPECTED.test(line)) return;
    const kind = kindOf(line);
    const t = now();
    const seen = last.get(kind);
    if (seen && t - seen.at < REPEAT_WINDOW_MS) {
      seen.skipped += 1;
      return;
    }
    const more = seen?.skipped ? ` [${seen.skipped} more like it in the last ${Math.round((t - seen.at) / 1000)} s]` : '';
    last.set(kind, { at: t, skipped: 0 });
    write(`${new Date(t).toISOString()} ${level.toLowerCase()}: ${line}${more}`);
  };
  return {
    log: emit,
    trace: () => undefined,
    debug: () => undefined,
    info: () => undefined,
    warn: (m, meta) => emit('WARN', m, meta),
    error: (m, meta) => emit('ERROR', m, meta),
  };
}

let installed = false;

/**
 * Install the runtime once per process, with sdk-core's logs (WARN and up) forwarded to `workerLogger` rather
 * than printed by core itself.
 */
export function installWorkerRuntime(write: (line: string) => void): void {
  if (installed) return;
  installed = true;
  Runtime.install({ logger: workerLogger(write), telemetryOptions: { logging: { filter: { core: 'WARN', other: 'ERROR' }, forward: {} } } });
}
