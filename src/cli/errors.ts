/**
 * The CLI's exit codes (README.md#the-verbs); the errors they answer live in ../errors.ts:
 * 0 success, 1 the run failed, 2 bad usage or invalid recipe, 3 Temporal unreachable.
 */
export const EXIT = { ok: 0, runFailed: 1, usage: 2, unreachable: 3 } as const;
