// Checks of the secret names a configuration implies, before anything is read or written (plan,
// validate): two keys whose raw values would land in one secret (the second write would replace
// the first, and that first key would be lost), a store whose URI no backend takes, and a logical
// name its backend cannot take. Each kind has its own message, pointing at the field to fix.
import { address, defaultSecretName, type DesiredKey, type DesiredState, type SourceLocation } from '../model/index.js';
import type { StoreRegistry } from './registry.js';
import type { SecretStore } from './store.js';

export interface SecretNameProblem {
  /** `collision`: two keys, one secret. `store`: the store cannot be opened. `name`: the backend refuses the name. */
  kind: 'collision' | 'store' | 'name';
  /** For `store` and `name`: `file:line:column: field.path: message`; for `collision`, both keys with their places. */
  text: string;
}

const where = (s: SourceLocation | undefined) => (s ? ` (${s.file}:${s.line}:${s.column})` : '');
const at = (s: SourceLocation | undefined, field: string, message: string) =>
  s ? `${s.file}:${s.line}:${s.column}: ${s.path}${field}: ${message}` : `${field.replace(/^\./, '')}: ${message}`;

/** Every problem found; empty when all is well. */
export async function secretCollisions(desired: DesiredState, registry: StoreRegistry): Promise<SecretNameProblem[]> {
  const problems: SecretNameProblem[] = [];
  /** Secret names taken, by store (its URI), then by name. */
  const taken = new Map<string, Map<string, DesiredKey>>();
  const brokenStores = new Set<string>();
  // Each store opened once, not awaited once per key (tens of thousands of keys).
  const opened = new Map<string, SecretStore>();
  for (const c of desired.clients) {
    for (const k of c.keys) {
      const storeName = k.secret?.store ?? 'default';
      if (brokenStores.has(storeName)) continue;
      let store = opened.get(storeName);
      if (store === undefined) try {
        store = await registry.get(k.secret?.store);
        opened.set(storeName, store);
      } catch (e) {
        // The store's URI is the thing to fix: point at its declaration, once per store.
        brokenStores.add(storeName);
        const decl = desired.stores.find((s) => s.name === storeName) ?? desired.stores.find((s) => s.default);
        problems.push({ kind: 'store', text: decl ? at(decl.source, '.uri', (e as Error).message) : at(k.source, '.secret.store', (e as Error).message) });
        continue;
      }
      const logical = k.secret?.name ?? defaultSecretName(c.projectEnv, c.name, k.name);
      let name: string;
      try {
        name = store.secretName(logical);
      } catch (e) {
        const text = k.secret?.name !== undefined ? at(k.source, '.secret.name', (e as Error).message) : at(c.source, '.name', `${(e as Error).message} (the default secret name is <project_env>/<client>/<key>: give the key its own secret: { name })`);
        problems.push({ kind: 'name', text });
        continue;
      }
      let inStore = taken.get(store.displayUri);
      if (inStore === undefined) taken.set(store.displayUri, (inStore = new Map()));
      const first = inStore.get(name);
      if (first) {
        const addr = address.key(c.projectEnv, c.name, k.name);
        problems.push({
          kind: 'collision',
          text:
            `${address.key(first.projectEnv, first.client, first.name)}${where(first.source)} and ${addr}${where(k.source)} would both write the secret "${name}" in ${store.displayUri}: ` +
            'the second would replace the first key. Give one of them its own secret: { name }',
        });
      } else inStore.set(name, k);
    }
  }
  return problems;
}
