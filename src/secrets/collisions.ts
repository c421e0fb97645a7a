// Checks of the secret names a configuration implies, before anything is read or written (plan,
// validate): two keys whose raw values would land in one secret (the second write would replace
// the first, and that first key would be lost), a store whose URI no backend takes, and a logical
// name its backend cannot take. Each kind has its own message, pointing at the field to fix.
import {
  address,
  defaultSecretName,
  type DesiredClient,
  type DesiredKey,
  type DesiredState,
  type SourceLocation,
} from '../model/index.js';
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

/*
 * Self-named keys: a key named by default (`<project_env>/<client>/<key>`, no part holding a `/`)
 * in a store that keeps that name as it is (its keepsSegment says so of each part, or its
 * secretName gives the name back).
 *
 * Two self-named keys of one store never collide: the desired state holds each identity once (the
 * builder refuses a second client of one name in an environment, and a second key of one name in
 * a client), so their logical names differ, and so do their names in the store. They need no entry
 * in the map of names taken, which for 100,000 clients is 200,000 strings to build and hash (~0.3 s
 * of a plan). Only a key of another kind (its own name, or one the store renames) could take one
 * of their names, and they are looked up against those.
 */

/**
 * What the keys checked so far took, carried from one call to the next when a configuration is
 * checked environment by environment (engine/run.ts): the names of the keys that are not
 * self-named, by store, and the stores self-named keys write to.
 */
export interface SecretNamesTaken {
  taken: Map<string, Map<string, { key: DesiredKey; order: number }>>;
  selfNamedIn: Set<string>;
}

export const noSecretNamesTaken = (): SecretNamesTaken => ({ taken: new Map(), selfNamedIn: new Set() });

/** Whether a store holds keys of both kinds: the check of one environment alone cannot see all of them. */
export const mixedStores = (seen: SecretNamesTaken): boolean =>
  [...seen.taken.keys()].some((uri) => seen.selfNamedIn.has(uri));

/**
 * Every problem found; empty when all is well. With `seen`, the keys of earlier calls count too
 * (their collisions with these keys are found), and these are added to it.
 */
export async function secretCollisions(
  desired: DesiredState,
  registry: StoreRegistry,
  seen: SecretNamesTaken = noSecretNamesTaken(),
): Promise<SecretNameProblem[]> {
  const problems: SecretNameProblem[] = [];
  /** Names taken by the keys that are not self-named, by store (its URI), then by name. */
  const taken = seen.taken;
  /** Store URIs that self-named keys write to. */
  const selfNamedIn = seen.selfNamedIn;
  const brokenStores = new Set<string>();
  // Each store opened once, not awaited once per key (tens of thousands of keys).
  const opened = new Map<string, SecretStore>();
  let last: string | undefined;
  // Indexed loops here and in eachKey: they run once per plan, mostly before V8 optimizes them,
  // and there a for-of allocates an iterator result per item.
  for (let ci = 0; ci < desired.clients.length; ci++) {
    const keys = desired.clients[ci]!.keys;
    for (let ki = 0; ki < keys.length; ki++) {
      const k = keys[ki]!;
      const storeName = k.secret?.store ?? 'default';
      if (storeName === last || brokenStores.has(storeName) || opened.has(storeName)) continue;
      last = storeName;
      try {
        opened.set(storeName, await registry.get(k.secret?.store));
      } catch (e) {
        // The store's URI is the thing to fix: point at its declaration, once per store.
        brokenStores.add(storeName);
        const decl = desired.stores.find((s) => s.name === storeName) ?? desired.stores.find((s) => s.default);
        problems.push({
          kind: 'store',
          text: decl
            ? at(decl.source, '.uri', (e as Error).message)
            : at(k.source, '.secret.store', (e as Error).message),
        });
      }
    }
  }
  const collision = (first: DesiredKey, second: DesiredKey, name: string, store: string): SecretNameProblem => ({
    kind: 'collision',
    text:
      `${address.key(first.projectEnv, first.client, first.name)}${where(first.source)} and ${address.key(second.projectEnv, second.client, second.name)}${where(second.source)} ` +
      `would both write the secret "${name}" in ${store}: the second would replace the first key. Give one of them its own secret: { name }`,
  });
  /**
   * Calls `visit` with every key of an open store that is not self-named, with its name there and
   * its place in order (with `report`, name problems go to `problems`), and `self` with each
   * self-named one.
   */
  const eachKey = (
    report: boolean,
    visit: (k: DesiredKey, store: string, name: string, order: number) => void,
    self: (c: DesiredClient, k: DesiredKey, store: string, order: number) => void,
  ) => {
    let order = 0;
    for (let ci = 0; ci < desired.clients.length; ci++) {
      const c = desired.clients[ci]!;
      const plainClient = !c.projectEnv.includes('/') && !c.name.includes('/');
      // Whether the store last asked keeps this client's environment and name segments.
      let asked: SecretStore | undefined;
      let kept = false;
      for (let ki = 0; ki < c.keys.length; ki++) {
        const k = c.keys[ki]!;
        order++;
        const store = opened.get(k.secret?.store ?? 'default');
        if (store === undefined) continue;
        const byDefault = k.secret?.name === undefined;
        const plain = byDefault && plainClient && !k.name.includes('/');
        if (plain && store.keepsSegment) {
          if (store !== asked) {
            asked = store;
            kept = store.keepsSegment(c.projectEnv) && store.keepsSegment(c.name);
          }
          if (kept && store.keepsSegment(k.name)) {
            self(c, k, store.displayUri, order);
            continue;
          }
        }
        const logical = k.secret?.name ?? defaultSecretName(c.projectEnv, c.name, k.name);
        let name: string;
        try {
          name = store.secretName(logical);
        } catch (e) {
          if (report) {
            const text =
              k.secret?.name !== undefined
                ? at(k.source, '.secret.name', (e as Error).message)
                : at(
                    c.source,
                    '.name',
                    `${(e as Error).message} (the default secret name is <project_env>/<client>/<key>: give the key its own secret: { name })`,
                  );
            problems.push({ kind: 'name', text });
          }
          continue;
        }
        if (plain && name === logical) self(c, k, store.displayUri, order);
        else visit(k, store.displayUri, name, order);
      }
    }
  };
  eachKey(
    true,
    (key, store, name, order) => {
      let inStore = taken.get(store);
      if (inStore === undefined) taken.set(store, (inStore = new Map()));
      const first = inStore.get(name);
      if (first) problems.push(collision(first.key, key, name, store));
      else inStore.set(name, { key, order });
    },
    (_c, _k, store) => selfNamedIn.add(store),
  );
  // A store written by keys of both kinds (rare): its self-named keys against the others' names.
  const mixed = [...taken.keys()].filter((uri) => selfNamedIn.has(uri));
  if (mixed.length > 0) {
    const names = new Map(mixed.map((uri) => [uri, taken.get(uri)!]));
    eachKey(
      false,
      () => undefined,
      (c, k, store, order) => {
        const name = defaultSecretName(c.projectEnv, c.name, k.name);
        const other = names.get(store)?.get(name);
        if (other)
          problems.push(
            other.order < order ? collision(other.key, k, name, store) : collision(k, other.key, name, store),
          );
      },
    );
  }
  return problems;
}
