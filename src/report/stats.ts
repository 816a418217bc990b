/** The few statistics the report, `compare` and `parity` share. Pure. */

/** The arithmetic mean; NaN for no values (callers that may have none check first). */
export const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

/** A relative difference as shown: `+0.17 %`, `-1.25 %`. */
export const pct = (x: number): string => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(2)} %`;
