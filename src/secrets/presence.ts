// Does every managed key have its secret in its store? Checked in batches per store; where the
// backend lists metadata, a secret that holds another key id, or another service target's key, counts as stale.
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
export interface PresenceCache {
  opened: Map<string | undefined, Promise<{ store: Awaited<ReturnType<StoreRegistry['get']>>; metas: Map<string, { keyId?: string; target?: string } | undefined> | undefined }>>;
  warned: Set<string>;
}

export const newPresenceCache = (): PresenceCache => ({ opened: new Map(), warned: new Set() });

export async function checkSecretPresence(registry: StoreRegistry, queries: PresenceQuery[], target?: string, cache?: PresenceCache): Promise<{ results: Map<string, PresenceResult>; warnings: string[] }> {
  const results = new Map<string, PresenceResult>();
  const warnings: string[] = [];
  const byStore = groupBy(queries, (q) => q.store);
  for (const [storeName, qs] of byStore) {
    try {
      let opened = cache?.opened.get(storeName);
      if (!opened) {
        opened = (async () => {
          const store = await registry.get(storeName);
          return { store, metas: store.list ? new Map((await store.list()).map((l) => [l.name, l.meta])) : undefined };
        })();
        cache?.opened.set(storeName, opened);
      }
      const { store, metas } = await opened;
      const names = qs.map((q) => store.secretName(q.secretName));
      const present = await store.existsMany(names);
      qs.forEach((q, i) => {
        const name = names[i]!;
        const holder = metas?.get(name)?.target;
        if (!present.has(name)) {
          results.set(q.address, { status: 'missing', detail: `secret ${name} is not in ${store.displayUri}` });
        } else if (target && holder !== undefined && !targetMatches(holder, target)) {
          results.set(q.address, { status: 'stale', detail: `secret ${name} in ${store.displayUri} holds a key of another service (${holder}), not this service's live key ${q.keyId}` });
        } else if (metas && metas.get(name)?.keyId !== undefined && metas.get(name)?.keyId !== q.keyId) {
          results.set(q.address, { status: 'stale', detail: `secret ${name} in ${store.displayUri} holds key ${metas.get(name)?.keyId}, not the live key ${q.keyId}` });
        } else results.set(q.address, { status: 'present' });
      });
    } catch (e) {
      // Said once per run, by the part of it that first met it.
      const warning = `could not check the secrets in store ${storeName ?? 'default'}: ${(e as Error).message}`;
      if (!cache?.warned.has(warning)) warnings.push(warning);
      cache?.warned.add(warning);
      for (const q of qs) results.set(q.address, { status: 'unknown' });
    }
  }
  return { results, warnings };
}
