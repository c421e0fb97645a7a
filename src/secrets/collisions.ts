// Two keys whose raw values would land in one secret: the second write would replace the first,
// and that first key would be lost. Found before anything is read or written (plan, validate).
import { address, defaultSecretName, type DesiredState, type SourceLocation } from '../model/index.js';
import type { StoreRegistry } from './registry.js';

const where = (s: SourceLocation | undefined) => (s ? ` (${s.file}:${s.line}:${s.column})` : '');

/** One message per collision or per name the backend cannot take; empty when all is well. */
export async function secretCollisions(desired: DesiredState, registry: StoreRegistry): Promise<string[]> {
  const problems: string[] = [];
  const taken = new Map<string, { addr: string; source?: SourceLocation }>();
  for (const c of desired.clients) {
    for (const k of c.keys) {
      const addr = address.key(c.projectEnv, c.name, k.name);
      const logical = k.secret?.name ?? defaultSecretName(c.projectEnv, c.name, k.name);
      let store;
      let name: string;
      try {
        store = await registry.get(k.secret?.store);
        name = store.secretName(logical);
      } catch (e) {
        problems.push(`${addr}${where(k.source)}: ${(e as Error).message}`);
        continue;
      }
      const slot = `${store.displayUri}\u0000${name}`;
      const first = taken.get(slot);
      if (first) {
        problems.push(
          `${first.addr}${where(first.source)} and ${addr}${where(k.source)} would both write the secret "${name}" in ${store.displayUri}: ` +
            'the second would replace the first key. Give one of them its own secret: { name }',
        );
      } else taken.set(slot, { addr, ...(k.source ? { source: k.source } : {}) });
    }
  }
  return problems;
}
