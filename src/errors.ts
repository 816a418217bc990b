/**
 * Errors that belong to no verb: bad usage, an unreachable server, a failed run. Any layer may throw them; the CLI
 * alone maps them to exit codes (cli/errors.ts, cli/main.ts `reportError`).
 */

/** A problem with what the user typed or wrote; each line is printed as `error: <line>`. */
export class UsageError extends Error {
  readonly lines: string[];
  constructor(lines: string | string[]) {
    const all = Array.isArray(lines) ? lines : [lines];
    super(all.join('\n'));
    this.name = 'UsageError';
    this.lines = all;
  }
}

/** No Temporal frontend answered at the configured address. */
export class UnreachableError extends Error {
  constructor(address: string, cause?: unknown) {
    super(
      `cannot reach Temporal at ${address}` +
        (cause instanceof Error ? ` (${cause.message.split('\n')[0]})` : '') +
        `; start the embedded server with \`infir2 up\` or set TEMPORAL_ADDRESS`,
    );
    this.name = 'UnreachableError';
  }
}

/** The run (or the command's operation on it) failed; the message says where and why. */
export class RunFailedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RunFailedError';
  }
}
