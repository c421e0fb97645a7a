/**
 * Resources by (environment, name) identity, in first-seen order, without building an address
 * or a joined key string per lookup (a no-op plan of 100,000 clients builds none): by
 * environment, then by name.
 */
export class IdentityIndex<T> {
  private readonly byEnv = new Map<string, Map<string, { value: T; wanted: boolean }>>();
  /** Entries in the order their identity was first set; `wanted` is set by the caller. */
  readonly entries: { value: T; wanted: boolean }[] = [];
  get(projectEnv: string, name: string) {
    return this.byEnv.get(projectEnv)?.get(name);
  }
  set(projectEnv: string, name: string, value: T) {
    let names = this.byEnv.get(projectEnv);
    if (names === undefined) this.byEnv.set(projectEnv, (names = new Map()));
    const entry = names.get(name);
    if (entry) entry.value = value;
    else {
      const e = { value, wanted: false };
      names.set(name, e);
      this.entries.push(e);
    }
  }
}

interface Identity {
  projectEnv: string;
  name: string;
}

/** a before b by (environment, name), as the loader and the live read sort them. */
const before = (a: Identity, b: Identity) =>
  a.projectEnv < b.projectEnv || (a.projectEnv === b.projectEnv && a.name < b.name);

/**
 * The live entry of each desired resource (same environment and name), by the desired one's
 * index, and the live entries in order (IdentityIndex's `entries`). When the desired list is sorted
 * by identity and the live one strictly so (the loader and the live read sort them; an identity
 * twice is a duplicate, which the caller leaves out), one merge of the two finds them, without a
 * map of 100,000 names; otherwise an IdentityIndex does.
 */
export function matchByIdentity<D extends Identity, L extends Identity>(
  desired: readonly D[],
  live: readonly L[],
): { matches: ({ value: L; wanted: boolean } | undefined)[]; entries: { value: L; wanted: boolean }[] } {
  const matches: ({ value: L; wanted: boolean } | undefined)[] = new Array(desired.length);
  let sorted = true;
  for (let i = 1; i < desired.length && sorted; i++) if (before(desired[i]!, desired[i - 1]!)) sorted = false;
  for (let i = 1; i < live.length && sorted; i++) if (!before(live[i - 1]!, live[i]!)) sorted = false;
  if (!sorted) {
    const index = new IdentityIndex<L>();
    for (let i = 0; i < live.length; i++) index.set(live[i]!.projectEnv, live[i]!.name, live[i]!);
    for (let i = 0; i < desired.length; i++) matches[i] = index.get(desired[i]!.projectEnv, desired[i]!.name);
    return { matches, entries: index.entries };
  }
  const entries: { value: L; wanted: boolean }[] = new Array(live.length);
  for (let i = 0; i < live.length; i++) entries[i] = { value: live[i]!, wanted: false };
  let j = 0;
  for (let i = 0; i < desired.length; i++) {
    const d = desired[i]!;
    while (j < live.length && before(live[j]!, d)) j++;
    const l = live[j];
    matches[i] = l !== undefined && l.projectEnv === d.projectEnv && l.name === d.name ? entries[j] : undefined;
  }
  return { matches, entries };
}

/** Whether `list` holds exactly the items of `copy`, in its order (compared by identity). */
function sameItems<T>(copy: readonly T[], list: readonly T[]): boolean {
  if (copy.length !== list.length) return false;
  for (let i = 0; i < copy.length; i++) if (copy[i] !== list[i]) return false;
  return true;
}

/**
 * A match of two lists (matchByIdentity's `matches`) kept for a later user of the same lists: the
 * plan's diff matches desired and live clients, and its key assessment and secret queries need the
 * same match. Copies of both lists are kept with it, so a list changed in between (an item
 * replaced, added, removed or moved) is seen and matched again.
 */
export interface KeptMatch<D extends Identity, L extends Identity> {
  readonly desired: readonly D[];
  readonly live: readonly L[];
  readonly matches: readonly ({ value: L } | undefined)[];
}

export function keepMatch<D extends Identity, L extends Identity>(
  desired: readonly D[],
  live: readonly L[],
  matches: readonly ({ value: L } | undefined)[],
): KeptMatch<D, L> {
  return { desired: desired.slice(), live: live.slice(), matches };
}

/**
 * matchByIdentity's `matches` of `desired` and `live`: those of `kept` when it was made of lists
 * holding the same items in the same order (the items' identities are not changed in place:
 * the models are not edited after they are built), else matched afresh.
 */
export function matchAgain<D extends Identity, L extends Identity>(
  kept: KeptMatch<D, L> | undefined,
  desired: readonly D[],
  live: readonly L[],
): readonly ({ value: L } | undefined)[] {
  if (kept !== undefined && sameItems(kept.desired, desired) && sameItems(kept.live, live)) return kept.matches;
  return matchByIdentity(desired, live).matches;
}
