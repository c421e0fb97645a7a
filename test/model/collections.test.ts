import { describe, expect, it } from 'vitest';
import { sortInPlace } from '../../src/model/index.js';

// A small deterministic generator: the same lists on every run.
function lists(seed: number, count: number, maxLength: number): { key: number; tag: number }[][] {
  let s = seed;
  const next = () => (s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const out: { key: number; tag: number }[][] = [];
  for (let n = 0; n < count; n++) {
    const length = Math.floor(next() * (maxLength + 1));
    // Few distinct keys, so equal keys are common and stability shows.
    out.push(Array.from({ length }, (_, tag) => ({ key: Math.floor(next() * 4), tag })));
  }
  return out;
}

describe('sortInPlace', () => {
  const byKey = (a: { key: number }, b: { key: number }) => a.key - b.key;

  it('gives the order Array#sort gives, equal items kept in their order, short lists and long ones', () => {
    for (const list of lists(7, 400, 40)) {
      const expected = [...list].sort(byKey).map((x) => x.tag);
      const result = sortInPlace(list, byKey);
      expect(result).toBe(list); // in place, like Array#sort
      expect(list.map((x) => x.tag)).toEqual(expected);
    }
  });

  it('sorts strings with a comparator that only says "greater"', () => {
    const names = ['key-b', 'key-a', 'key-c', 'key-a'];
    expect(sortInPlace(names, (a, b) => (a > b ? 1 : a < b ? -1 : 0))).toEqual(['key-a', 'key-a', 'key-b', 'key-c']);
    expect(sortInPlace([] as string[], () => 0)).toEqual([]);
    expect(sortInPlace(['only'], () => 0)).toEqual(['only']);
  });
});
