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

export async function checkSecretPresence(registry: StoreRegistry, queries: PresenceQuery[], target?: string): Promise<{ results: Map<string, PresenceResult>; warnings: string[] }> {
  const results = new Map<string, PresenceResult>();
  const warnings: string[] = [];
  const byStore = groupBy(queries, (q) => q.store);
  for (const [storeName, qs] of byStore) {
    try {
      const store = await registry.get(storeName);
      const names = qs.map((q) => store.secretName(q.secretName));
      const present = await store.existsMany(names);
      const metas = store.list ? new Map((await store.list()).map((l) => [l.name, l.meta])) : undefined;
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
      warnings.push(`could not check the secrets in store ${storeName ?? 'default'}: ${(e as Error).message}`);
      for (const q of qs) results.set(q.address, { status: 'unknown' });
    }
  }
  return { results, warnings };
}
