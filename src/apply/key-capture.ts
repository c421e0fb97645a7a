// Where a raw key goes the moment a response carries it (DESIGN.md "Keys"):
// journal (fsync) → secret store → journal entry cleared. If the store write fails, the journal
// keeps the key, no further key is issued, and the next run flushes the journal first.
import type { AppendOptions, IssueIntent } from '../secrets/journal.js';
import type { SecretMetadata } from '../secrets/store.js';

export interface CapturedKey {
  /** Name of a declared store, or undefined for the default store. */
  store?: string;
  /** Logical secret name (`<project_env>/<client>/<key>` or the key's override). */
  secretName: string;
  value: string;
  meta: SecretMetadata;
  /** The client holding the key: where to revoke it if it could be saved nowhere. */
  clientId: string;
}

export interface StoredKeyReceipt {
  address: string;
  store: string;
  secret: string;
}

/** The apply engine's only way to hand over a raw key. */
export interface KeyCapture {
  /**
   * Called once before the first key-issuing request: flushes any pending journal entries and
   * checks that every store the plan writes to is reachable and writable.
   */
  prepare(stores: (string | undefined)[], writes?: { store?: string; secretName: string }[]): Promise<void>;
  /**
   * Makes a batch of raw keys from one response durable (journal, fsync) and resolves then; the
   * write to their stores follows in the background and `stored` settles when it is done, so
   * the writes of concurrent batches can be grouped. `stored` rejects with a KeyStoreFailure
   * when a store write failed: the keys stay in the journal.
   * If the journal itself cannot be written, the keys go straight to their stores; if that fails
   * too, `capture` rejects with a KeyStoreFailure whose `unsaved` keys the caller must revoke.
   */
  capture(keys: CapturedKey[], opts?: AppendOptions): Promise<{ stored: Promise<StoredKeyReceipt[]> }>;
  /**
   * Durably records, before a key-issuing request, what it asks for and which key ids the client
   * already had: if the run dies before the response is journaled, the next run finds the keys
   * it created (orphans) by comparing ids. `capture(..., { resolve: [id] })` clears it.
   */
  intend(intent: IssueIntent): Promise<string>;
  /** Clears intents (a request that issued nothing) and/or records orphans, durably. */
  resolve(opts: AppendOptions): Promise<void>;
}

/** A store write failed; `unsaved` lists keys that are neither journaled nor stored. */
export class KeyStoreFailure extends Error {
  readonly unsaved: CapturedKey[];
  constructor(message: string, unsaved: CapturedKey[] = []) {
    super(message);
    this.unsaved = unsaved;
  }
}
