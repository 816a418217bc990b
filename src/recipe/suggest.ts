/** "Did you mean": the closest known word to a misspelt one, by Levenshtein distance. */

export function levenshtein(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0]!;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = prev[j]!;
      prev[j] = Math.min(up + 1, prev[j - 1]! + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = up;
    }
  }
  return prev[b.length]!;
}

/** `warmup_iters`, `Warmup-Iters` and `warmupiters` all compare equal to `warmupIters`. */
const fold = (s: string) => s.toLowerCase().replace(/[-_]/g, '');

/** The closest candidate, or undefined when none is close enough to be a plausible typo. */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDist = Infinity;
  for (const c of candidates) {
    const d = fold(c) === fold(word) ? 0 : levenshtein(word.toLowerCase(), c.toLowerCase());
    if (d < bestDist) [best, bestDist] = [c, d];
  }
  const limit = Math.max(2, Math.floor(word.length / 3));
  return bestDist <= limit ? best : undefined;
}

/** `; did you mean 'x'?` or an empty string. */
export function didYouMean(word: string, candidates: Iterable<string>): string {
  const c = closest(word, candidates);
  return c === undefined ? '' : `; did you mean '${c}'?`;
}
