// planClients matches desired and live clients by identity with one merge when both lists are
// sorted (plan/kinds/identity-index.ts matchByIdentity), through a map otherwise: the two must
// find the same live client for each desired one, and list the live ones alike.
import { describe, expect, it } from 'vitest';
import type { DesiredClient, LiveClient } from '../../src/model/index.js';
import { buildPlanPhased } from '../../src/plan/diff.js';
import { keepMatch, matchAgain, matchByIdentity } from '../../src/plan/kinds/identity-index.js';

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

// The diff's match of the clients is handed to the key assessment and the secret queries
// (matchAgain): it must be their own match of the lists they are given, whatever happened to the
// lists in between, and the diff must not hand over a match of lists it filtered.
describe('matchAgain', () => {
  const tags = (m: readonly ({ value: { tag: string } } | undefined)[]) => m.map((x) => x?.value.tag);
  const fresh = (desired: ReturnType<typeof item>[], live: ReturnType<typeof item>[]) =>
    tags(matchByIdentity(desired, live).matches);

  it('is the match of the lists as they are now, after any change made to them in place', () => {
    let seed = 11;
    const next = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
    const changes: ((d: ReturnType<typeof item>[], l: ReturnType<typeof item>[]) => void)[] = [
      () => undefined,
      (_d, l) => l.splice(next(l.length), 1),
      (_d, l) => l.splice(next(l.length), 0, item('p-e1', `c${next(30)}`, 'added')),
      (_d, l) => {
        const i = next(l.length);
        l[i] = item(l[i]!.projectEnv, l[i]!.name, 'replaced');
      },
      (_d, l) => l.reverse(),
      (d) => d.splice(next(d.length), 1),
      (d) => d.push(item('p-e2', 'zz')),
      (d) => d.reverse(),
    ];
    for (let round = 0; round < 80; round++) {
      const uniq = (xs: ReturnType<typeof item>[]) => [
        ...new Map(xs.map((x) => [`${x.projectEnv}/${x.name}`, x])).values(),
      ];
      const make = (tag: boolean) =>
        uniq(
          Array.from({ length: 2 + next(30) }, () => {
            const [pe, n] = [`p-e${next(3)}`, `c${next(30)}`];
            return item(pe, n, tag ? `${pe}/${n}` : '');
          }),
        ).sort(byIdentity);
      const desired = make(false);
      const live = make(true);
      const kept = keepMatch(desired, live, matchByIdentity(desired, live).matches);
      const change = changes[round % changes.length]!;
      change(desired, live);
      expect(tags(matchAgain(kept, desired, live))).toEqual(fresh(desired, live));
      // Unchanged lists get the kept match itself.
      if (round % changes.length === 0) expect(matchAgain(kept, desired, live)).toBe(kept.matches);
    }
  });

  it('is not handed over when the diff matched live clients without their duplicates', () => {
    const client = (name: string): DesiredClient => ({ projectEnv: 'p-e', name, template: 't', keys: [] });
    const live = (id: string, name: string): LiveClient => ({
      id,
      projectEnv: 'p-e',
      name,
      type: 'web',
      templateId: null,
      ipWhitelist: [],
      metadata: {},
      keys: [],
    });
    const plan = (duplicates: { address: string; ids: string[] }[], clients: LiveClient[]) =>
      buildPlanPhased({
        desired: {
          projects: [],
          envs: [],
          templates: [],
          clients: [client('a'), client('b')],
          endpoints: [],
          stores: [],
          owner: 'o',
        },
        live: {
          state: { projects: [], envs: [], templates: [], clients, endpoints: [] },
          duplicates,
          fingerprints: {},
        },
        prune: false,
        now: new Date('2026-11-28T00:00:00Z'),
        target: { url: 'http://x', credential: 'test', projects: [], envs: [], owner: 'o' },
      });
    expect(plan([], [live('1', 'a'), live('2', 'b')]).clientMatch).toBeDefined();
    const twice = [live('1', 'a'), live('2', 'b'), live('3', 'b')];
    expect(plan([{ address: 'client.p-e/b', ids: ['2', '3'] }], twice).clientMatch).toBeUndefined();
  });
});
