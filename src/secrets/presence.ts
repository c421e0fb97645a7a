// Does every managed key have its secret in its store? Checked in batches per store; where the
// backend lists metadata, a secret that holds another key id, or another service target's key, counts as stale.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { groupBy } from '../model/index.js';
import type { StoreRegistry } from './registry.js';
import { targetMatches } from './store.js';

export interface PresenceQuery {
  address: string;
  store?: string;
  secretName: string;
  keyId: string;
}

export interface PresenceResult {
  status: 'present' | 'missing' | 'stale' | 'unknown';
  detail?: string;
}

/**
 * What a run learnt of each store: a plan made environment by environment (engine/) opens and
 * lists each store once, and says once that a store could not be checked.
 */
type Metas = Map<string, { keyId?: string; target?: string } | undefined>;
type Opened = { store: Awaited<ReturnType<StoreRegistry['get']>>; metas: Metas | undefined };

export interface PresenceCache {
  opened: Map<string | undefined, Promise<Opened>>;
  warned: Set<string>;
  /**
   * Store files the configuration's keys were in before its stores changed (the trust record's,
   * the default file): where a secret missing from its store now is looked for.
   */
  previous: string[];
  /** Secrets found in a previous file, by `from\u0000to`: said once for the whole plan (movedSecretWarnings). */
  moved: Map<string, { from: Opened['store']; to: Opened['store']; count: number }>;
}

export const newPresenceCache = (previous: string[] = []): PresenceCache => ({
  opened: new Map(),
  warned: new Set(),
  previous,
  moved: new Map(),
});

/** Opens (once) a store and lists its metadata where the backend lists it. */
function openListed(registry: StoreRegistry, nameOrUri: string | undefined, cache: PresenceCache): Promise<Opened> {
  let opened = cache.opened.get(nameOrUri);
  if (!opened) {
    opened = (async () => {
      const store = await registry.get(nameOrUri);
      return { store, metas: store.list ? new Map((await store.list()).map((l) => [l.name, l.meta])) : undefined };
    })();
    cache.opened.set(nameOrUri, opened);
  }
  return opened;
}

/** A previous store file that holds this very key's secret (same name, same key id), if any. */
async function heldBefore(
  registry: StoreRegistry,
  cache: PresenceCache,
  now: Opened['store'],
  name: string,
  keyId: string,
): Promise<Opened['store'] | undefined> {
  for (const uri of cache.previous) {
    const before = await openListed(registry, uri, cache).catch(() => undefined);
    if (!before || before.store.displayUri === now.displayUri) continue;
    if (before.metas?.get(name)?.keyId === keyId) return before.store;
  }
  return undefined;
}

export async function checkSecretPresence(
  registry: StoreRegistry,
  queries: PresenceQuery[],
  target?: string,
  cache: PresenceCache = newPresenceCache(),
): Promise<{ results: Map<string, PresenceResult>; warnings: string[] }> {
  const results = new Map<string, PresenceResult>();
  const warnings: string[] = [];
  const byStore = groupBy(queries, (q) => q.store);
  for (const [storeName, qs] of byStore) {
    try {
      const { store, metas } = await openListed(registry, storeName, cache);
      const names = qs.map((q) => store.secretName(q.secretName));
      const present = await store.existsMany(names);
      for (const [i, q] of qs.entries()) {
        const name = names[i]!;
        const holder = metas?.get(name)?.target;
        if (!present.has(name)) {
          // The store moved (a new file name, e.g. one per service) and its secrets stayed behind.
          const before = await heldBefore(registry, cache, store, name, q.keyId);
          if (before) {
            const key = `${before.displayUri}\u0000${store.displayUri}`;
            const m = cache.moved.get(key) ?? { from: before, to: store, count: 0 };
            m.count++;
            cache.moved.set(key, m);
          }
          results.set(q.address, {
            status: 'missing',
            detail: `secret ${name} is not in ${store.displayUri}${before ? `; it is in ${before.displayUri}, where this configuration's keys were before its stores changed (move that file: see the warning below)` : ''}`,
          });
        } else if (target && holder !== undefined && !targetMatches(holder, target)) {
          results.set(q.address, {
            status: 'stale',
            detail: `secret ${name} in ${store.displayUri} holds a key of another service (${holder}), not this service's live key ${q.keyId}`,
          });
        } else if (metas && metas.get(name)?.keyId !== undefined && metas.get(name)?.keyId !== q.keyId) {
          results.set(q.address, {
            status: 'stale',
            detail: `secret ${name} in ${store.displayUri} holds key ${metas.get(name)?.keyId}, not the live key ${q.keyId}`,
          });
        } else results.set(q.address, { status: 'present' });
      }
    } catch (e) {
      // Said once per run, by the part of it that first met it.
      const warning = `could not check the secrets in store ${storeName ?? 'default'}: ${(e as Error).message}`;
      if (!cache.warned.has(warning)) warnings.push(warning);
      cache.warned.add(warning);
      for (const q of qs) results.set(q.address, { status: 'unknown' });
    }
  }
  return { results, warnings };
}

const shownPath = (p: string) => {
  const rel = path.relative(process.cwd(), p);
  return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : p;
};

/**
 * Once per plan: the keys whose secrets sit in a store's previous file, and the move that ends
 * it. Until then their keys are "secret not held" and apply leaves them alone (a new file for
 * each service, the way out of "holds the secrets of another service", is the common cause).
 */
export function movedSecretWarnings(cache: PresenceCache): string[] {
  return [...cache.moved.values()].map(({ from, to, count }) => {
    const fromPath = (from as { path?: unknown }).path;
    const toPath = (to as { path?: unknown }).path;
    const files = typeof fromPath === 'string' && typeof toPath === 'string';
    const how =
      files && !existsSync(toPath)
        ? `move the file: mv ${shownPath(fromPath)} ${shownPath(toPath)}`
        : files
          ? `${shownPath(toPath)} exists already: move these secrets into it with sops (docs/troubleshooting.md#secrets-left-in-a-stores-old-file)`
          : 'move these secrets into it (docs/troubleshooting.md#secrets-left-in-a-stores-old-file)';
    return (
      `${count} key(s) have their secret in ${from.displayUri}, not in ${to.displayUri} where their store is now: ` +
      `they show as "secret not held" and apply leaves them alone until it moves; ${how}`
    );
  });
}
