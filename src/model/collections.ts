/** Items grouped by key, groups and items in first-seen order. */
export function groupBy<T, K>(items: Iterable<T>, key: (item: T) => K): Map<K, T[]> {
  const groups = new Map<K, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}

/** Up to this length `sortInPlace` sorts by insertion. */
const SHORT_LIST = 16;

/**
 * `items.sort(compare)` (in place, stable, the same order) without its fixed cost on short lists:
 * each call of V8's sort allocates its work state, ~0.4 KB even for two items. Sorting the keys of
 * each of 10,000 clients that way made 17 MB of garbage, twice per plan (the configuration's keys
 * and the live ones); insertion sort makes none.
 */
export function sortInPlace<T>(items: T[], compare: (a: T, b: T) => number): T[] {
  if (items.length > SHORT_LIST) return items.sort(compare);
  for (let i = 1; i < items.length; i++) {
    const item = items[i]!;
    let j = i - 1;
    // Strictly greater: an equal item stays after those before it (stable, like Array#sort).
    for (; j >= 0 && compare(items[j]!, item) > 0; j--) items[j + 1] = items[j]!;
    items[j + 1] = item;
  }
  return items;
}
