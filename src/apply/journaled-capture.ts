// The KeyCapture of a real run: local encrypted journal first, then the secret store.
import { groupBy } from '../model/index.js';
import { Journal, type AppendOptions, type IssueIntent, type JournalRecord } from '../secrets/journal.js';
import type { StoreRegistry } from '../secrets/registry.js';
import type { SecretStore } from '../secrets/store.js';
import { describeConflicts, TargetGuard } from '../secrets/target-guard.js';
import { testPoint } from '../model/test-hooks.js';
import { KeyStoreFailure, type CapturedKey, type KeyCapture, type StoredKeyReceipt } from './key-capture.js';

/** A secret the run is about to write: its store (undefined = the default) and logical name. */
export interface PlannedWrite {
  store?: string;
  secretName: string;
}

export class JournaledKeyCapture implements KeyCapture {
  readonly journal: Journal;
  private readonly stores: StoreRegistry;
  private readonly guard: TargetGuard;

  /** `target`: the service this run issues keys at (model/target.ts); its secrets record it. */
  constructor(stores: StoreRegistry, journal?: Journal, opts: { target?: string } = {}) {
    this.stores = stores;
    this.journal =
      journal ??
      new Journal(stores.journalPath(), {
        ageKeys: stores.ageKeys,
        ...(stores.incarnation ? { incarnation: stores.incarnation } : {}),
      });
    this.guard = new TargetGuard(opts.target);
  }

  /** A store by name or URI, with the writes every key takes: stamped with its target, never over another target's secret. */
  async storeFor(nameOrUri: string | undefined): Promise<SecretStore> {
    return this.guard.wrap(await this.stores.get(nameOrUri));
  }

  /** Flushes what an earlier run left in the journal; returns how many keys were flushed. */
  async flushPending(): Promise<number> {
    const result = await this.journal.flush((uri) => this.storeFor(uri));
    if (result.failed.length > 0) {
      const names = result.failed.flatMap((f) => f.names).length;
      throw new KeyStoreFailure(
        `${names} key(s) from an earlier run are still in the journal and their store is not writable (${result.failed.map((f) => f.error.message).join('; ')}); no new key will be issued until they are flushed (see docs/troubleshooting.md#keys-left-in-the-journal)`,
      );
    }
    return result.flushed.length;
  }

  /**
   * Before the first key is issued: the journal is flushed, every store is writable, and none of
   * the secrets the run will write holds another service target's key (refused here, before any
   * key exists, rather than at the store write after it was issued).
   */
  async prepare(stores: (string | undefined)[], writes: PlannedWrite[] = []): Promise<void> {
    await this.flushPending();
    for (const name of new Set(stores.length ? stores : [undefined])) {
      const store = await this.stores.get(name);
      await store.checkWritable();
    }
    await this.checkTargets(writes);
  }

  /** Refuses (before any key is issued) writes whose secrets hold another service target's key. */
  async checkTargets(writes: PlannedWrite[]): Promise<void> {
    const [first] = await this.targetConflicts(writes);
    if (first) throw new KeyStoreFailure(`refusing to issue keys: ${first}. Nothing was issued`);
  }

  /**
   * Per store, why writing `writes` would be refused (its secrets hold another service target's
   * keys): what checkTargets refuses at apply, for `plan` to say beforehand. `skip` leaves out the
   * stores the caller may not contact.
   */
  async targetConflicts(
    writes: PlannedWrite[],
    skip: (store: string | undefined) => boolean = () => false,
  ): Promise<string[]> {
    if (!this.guard.target || writes.length === 0) return [];
    const out: string[] = [];
    for (const [name, ws] of groupBy(writes, (w) => w.store)) {
      if (skip(name)) continue;
      const store = await this.stores.get(name);
      const clashes = await this.guard.conflicts(
        store,
        ws.map((w) => store.secretName(w.secretName)),
      );
      if (clashes.length) out.push(describeConflicts(store, clashes, this.guard.target));
    }
    return out;
  }

  /** At the end of a run: the journal file goes when nothing in it is live any more. */
  compact(): Promise<void> {
    return this.journal.compact();
  }

  /**
   * Journal writes in progress, and the store writes that follow them: a second interrupt waits
   * for these (briefly) before exiting, so a key on its way to its store lands there (and is
   * reported stored) rather than being left to the next run's flush.
   */
  private readonly journaling = new Set<Promise<unknown>>();

  /** Resolves once every journal and store write in progress has finished (or after `ms`). */
  async drain(ms = 5000): Promise<void> {
    if (this.journaling.size === 0) return;
    await Promise.race([Promise.allSettled([...this.journaling]), new Promise((ok) => setTimeout(ok, ms).unref())]);
  }

  private tracked<T>(p: Promise<T>): Promise<T> {
    this.journaling.add(p);
    const done = () => this.journaling.delete(p);
    p.then(done, done);
    return p;
  }

  intend(intent: IssueIntent): Promise<string> {
    return this.tracked(this.journal.recordIntent(intent));
  }

  resolve(opts: AppendOptions): Promise<void> {
    return this.tracked(this.journal.resolve(opts));
  }

  capture(keys: CapturedKey[], opts: AppendOptions = {}): Promise<{ stored: Promise<StoredKeyReceipt[]> }> {
    return this.tracked(this.captureNow(keys, opts));
  }

  private async captureNow(keys: CapturedKey[], opts: AppendOptions): Promise<{ stored: Promise<StoredKeyReceipt[]> }> {
    const records: JournalRecord[] = [];
    for (const k of keys) {
      const store = await this.stores.get(k.store);
      records.push({
        storeUri: this.stores.uriOf(k.store),
        name: store.secretName(k.secretName),
        value: k.value,
        meta: this.guard.stamp(k.meta),
      });
    }
    // 1. Journal every raw key of the response (durable) before anything else can fail.
    let ids: string[] | undefined;
    let journalError: unknown;
    try {
      ids = await this.journal.appendMany(records, opts);
    } catch (e) {
      journalError = e;
    }
    if (!ids) {
      // No journal: the stores are the only safe place left, so write them before returning.
      try {
        return { stored: Promise.resolve(await this.store(keys, records, undefined)) };
      } catch (e) {
        throw new KeyStoreFailure(
          `the journal could not be written (${(journalError as Error).message}) and neither could the store (${(e as Error).message})`,
          keys,
        );
      }
    }
    // 2. + 3. Store them, batched per store, then clear the journal entries that landed.
    await testPoint('after-journal');
    const stored = this.tracked(this.store(keys, records, ids));
    stored.catch(() => undefined); // the caller observes it; never an unhandled rejection
    return { stored };
  }

  private async store(
    keys: CapturedKey[],
    records: JournalRecord[],
    ids: string[] | undefined,
  ): Promise<StoredKeyReceipt[]> {
    const receipts: StoredKeyReceipt[] = [];
    const byStore = groupBy(records.keys(), (i) => records[i]!.storeUri);
    const failures: string[] = [];
    for (const [uri, idx] of byStore) {
      const store = await this.storeFor(uri);
      try {
        await store.putMany(
          idx.map((i) => ({ name: records[i]!.name, value: records[i]!.value, meta: records[i]!.meta })),
        );
        await testPoint('after-store');
        if (ids) {
          await this.journal.clear(idx.map((i) => ids[i]!));
          await testPoint('cleared');
        }
        for (const i of idx) {
          const k = keys[i]!;
          receipts.push({
            address: `key.${k.meta.projectEnv}/${k.meta.client}/${k.meta.key}`,
            store: store.displayUri,
            secret: records[i]!.name,
          });
        }
      } catch (e) {
        failures.push(`${store.displayUri}: ${(e as Error).message}`);
      }
    }
    if (failures.length) {
      const unsaved = ids
        ? []
        : keys.filter(
            (k) => !receipts.some((r) => r.address === `key.${k.meta.projectEnv}/${k.meta.client}/${k.meta.key}`),
          );
      throw new KeyStoreFailure(
        `secret store write failed (${failures.join('; ')})${ids ? `; the keys are safe in the journal ${this.journal.path}` : ''}`,
        unsaved,
      );
    }
    return receipts;
  }
}
