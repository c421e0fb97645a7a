// planClients matches desired and live clients by identity with one merge when both lists are
// sorted (plan/kinds/identity-index.ts matchByIdentity), through a map otherwise: the two must
// find the same live client for each desired one, and list the live ones alike.
import { describe, expect, it } from 'vitest';
import { matchByIdentity } from '../../src/plan/kinds/identity-index.js';

const item = (projectEnv: string, name: string, tag = '') => ({ projectEnv, name, tag });
const byIdentity = (a: { projectEnv: string; name: string }, b: { projectEnv: string; name: string }) =>
  a.projectEnv < b.projectEnv ? -1 : a.projectEnv > b.projectEnv ? 1 : a.name < b.name ? -1 : a.name > b.name ? 1 : 0;

/** What each desired item is matched to (the live item's tag), and the live entries' tags in order. */
function shape(desired: ReturnType<typeof item>[], live: ReturnType<typeof item>[]) {
  const { matches, entries } = matchByIdentity(desired, live);
  return { matched: matches.map((m) => m?.value.tag), entries: entries.map((e) => e.value.tag) };
}

describe('matchByIdentity', () => {
  it('finds the same live items sorted (merge) and shuffled (map)', () => {
    let seed = 7;
    const next = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
    for (let round = 0; round < 50; round++) {
      const names = Array.from({ length: next(40) }, () => [`p-e${next(3)}`, `c${next(30)}`] as const);
      const desired = [...new Map(names.map(([pe, n]) => [`${pe}/${n}`, item(pe, n)])).values()];
      const live = [
        ...new Map(
          Array.from({ length: next(40) }, () => [`p-e${next(3)}`, `c${next(30)}`] as const).map(([pe, n]) => [
            `${pe}/${n}`,
            item(pe, n, `${pe}/${n}`),
          ]),
        ).values(),
      ];
      const sorted = shape([...desired].sort(byIdentity), [...live].sort(byIdentity));
      const shuffledLive = [...live].sort(() => next(3) - 1);
      const viaMap = shape([...desired].sort(byIdentity), shuffledLive);
      expect(sorted.matched).toEqual(viaMap.matched);
      expect(sorted.entries).toEqual([...live].sort(byIdentity).map((x) => x.tag));
      expect(viaMap.entries).toEqual(shuffledLive.map((x) => x.tag));
      // Every match is the live item of that identity; every identity both hold is matched.
      const liveTags = new Set(live.map((x) => x.tag));
      [...desired].sort(byIdentity).forEach((d, i) => {
        const want = `${d.projectEnv}/${d.name}`;
        expect(sorted.matched[i]).toBe(liveTags.has(want) ? want : undefined);
      });
    }
  });

  it('keeps the last of two live items with one identity (a map set twice)', () => {
    const live = [item('p-a', 'x', 'first'), item('p-a', 'x', 'second')];
    expect(shape([item('p-a', 'x')], live)).toEqual({ matched: ['second'], entries: ['second'] });
  });
});
