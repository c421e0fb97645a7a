// "did you mean" suggestions.

export function editDistance(a: string, b: string): number {
  if (a === b) return 0;
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      cur[j] = Math.min((prev[j] ?? 0) + 1, (cur[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + cost);
    }
    prev = cur;
  }
  return prev[b.length] ?? 0;
}

/** Closest candidate within a small edit distance (case-insensitive), or undefined. */
export function closest(input: string, candidates: Iterable<string>): string | undefined {
  const needle = input.toLowerCase();
  let best: string | undefined;
  let bestScore = Infinity;
  for (const c of candidates) {
    // The distance is at least the difference in length, and no more than 3 counts: a 16 MB
    // name is not compared character by character with every field name (issue 42).
    if (Math.abs(needle.length - c.length) > 3) continue;
    const score = editDistance(needle, c.toLowerCase());
    const limit = Math.max(1, Math.min(3, Math.floor(Math.max(needle.length, c.length) / 3)));
    if (score <= limit && score < bestScore) {
      best = c;
      bestScore = score;
    }
  }
  return best;
}
