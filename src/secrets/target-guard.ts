// "Two targets never share a secret" (DESIGN.md "Keys"): every secret records the service target
// whose key it holds (model/target.ts), and a write through this guard never replaces a secret
// that another target's key is in. One configuration folder applied to staging and to production
// with one store would otherwise overwrite the first service's raw keys with the second's, leaving
// live keys nobody holds. Secrets written before targets were recorded carry none: they are
// taken as this target's (the behaviour before), and carry it from their next write on.
import { SecretStoreError, targetMatches, type SecretEntry, type SecretMetadata, type SecretStore } from './store.js';

export interface TargetConflict {
  name: string;
  /** The target the secret belongs to now. */
  holder: string;
}

export class TargetGuard {
  /** This run's target; undefined: no check (a caller that knows no service). */
  readonly target: string | undefined;
  private readonly owners = new Map<SecretStore, Promise<Map<string, string | undefined>>>();

  constructor(target: string | undefined) {
    this.target = target;
  }

  /** Name → recorded target of a store's secrets, listed once per run (where the store lists). */
  private ownersOf(store: SecretStore): Promise<Map<string, string | undefined>> {
    let p = this.owners.get(store);
    if (!p) {
      p = store.list
        ? store.list().then((l) => new Map(l.map((s) => [s.name, s.meta?.target])))
        : Promise.resolve(new Map());
      this.owners.set(store, p);
      p.catch(() => this.owners.delete(store));
    }
    return p;
  }

  /** Secrets among `names` (backend names) that hold another target's key. */
  async conflicts(store: SecretStore, names: Iterable<string>, target = this.target): Promise<TargetConflict[]> {
    if (!target) return [];
    const owners = await this.ownersOf(store);
    const out: TargetConflict[] = [];
    for (const name of names) {
      const holder = owners.get(name);
      // A backend that keeps a long target as its tag (targetTag) matches it too.
      if (holder !== undefined && !targetMatches(holder, target)) out.push({ name, holder });
    }
    return out;
  }

  /** Entries carry their target (a journaled one keeps the target it was issued by). */
  stamp(meta: SecretMetadata): SecretMetadata {
    return meta.target !== undefined || this.target === undefined ? meta : { ...meta, target: this.target };
  }

  /**
   * The store, with writes that refuse to replace another target's secret (SecretStoreError
   * 'CONFLICT': the caller keeps the key in the journal) and stamp the target on what they write.
   */
  wrap(store: SecretStore): SecretStore {
    const putMany = async (entries: SecretEntry[]): Promise<void> => {
      const stamped = entries.map((e) => ({ ...e, meta: this.stamp(e.meta) }));
      const clashes: TargetConflict[] = [];
      for (const e of stamped) clashes.push(...(await this.conflicts(store, [e.name], e.meta.target)));
      if (clashes.length)
        throw new SecretStoreError(describeConflicts(store, clashes, stamped[0]!.meta.target!), {
          code: 'CONFLICT',
          store: store.displayUri,
        });
      await store.putMany(stamped);
      const owners = await this.ownersOf(store).catch(() => undefined);
      for (const e of stamped) owners?.set(e.name, e.meta.target);
    };
    // Delegation, not a prototype: a backend's methods keep their own `this`.
    const wrapped: SecretStore & { path?: unknown } = {
      kind: store.kind,
      displayUri: store.displayUri,
      secretName: (logical) => store.secretName(logical),
      checkWritable: () => store.checkWritable(),
      put: (name, value, meta) => putMany([{ name, value, meta }]),
      putMany,
      exists: (name) => store.exists(name),
      existsMany: (names) => store.existsMany(names),
      ...(store.keepsSegment ? { keepsSegment: (s: string) => store.keepsSegment!(s) } : {}),
      ...(store.read ? { read: (name: string) => store.read!(name) } : {}),
      ...(store.list ? { list: () => store.list!() } : {}),
      ...(store.deleteMany ? { deleteMany: (t: { name: string; keyId?: string }[]) => store.deleteMany!(t) } : {}),
      ...('path' in store ? { path: (store as { path?: unknown }).path } : {}),
    };
    return wrapped;
  }
}

/** The refusal, with the ways out. */
export function describeConflicts(store: SecretStore, clashes: TargetConflict[], target: string): string {
  const shown = clashes
    .slice(0, 3)
    .map((c) => `${c.name} holds a key of ${c.holder}`)
    .join('; ');
  const more = clashes.length > 3 ? ` and ${clashes.length - 3} more` : '';
  return (
    `store ${store.displayUri} holds the secrets of another service: ${shown}${more}; this run's service is ${target}. ` +
    'Writing would replace raw keys that are still live there. Give each service its own store ' +
    '(e.g. stores: [{ name: main, default: true, uri: "sops:.kms-sync/secrets.${env:KMS_STAGE}.sops.yaml" }], run with --allow-env KMS_STAGE), ' +
    `and move the secrets already in ${store.displayUri} to the new store of the service they belong to (${clashes[0]!.holder}): ` +
    'for a file, rename it to that service\'s new file name, or its keys become "secret not held"; ' +
    'or set KMS_SYNC_TARGET to one name if both URLs reach the same service (see docs/troubleshooting.md#store-holds-another-services-secrets)'
  );
}
