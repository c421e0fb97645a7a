// Where a raw key goes the moment a response carries it (DESIGN.md "Keys"):
// journal (fsync) → secret store → journal entry cleared. If the store write fails, the journal
// keeps the key, no further key is issued, and the next run flushes the journal first.
import type { SecretMetadata } from '../secrets/store.js';

export interface CapturedKey {
  /** Name of a declared store, or undefined for the default store. */
  store?: string;
  /** Logical secret name (`<project_env>/<client>/<key>` or the key's override). */
  secretName: string;
  value: string;
  meta: SecretMetadata;
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
  prepare(stores: (string | undefined)[]): Promise<void>;
  /** Journals, then stores a batch of raw keys from one response. Throws if the store write failed. */
  capture(keys: CapturedKey[]): Promise<StoredKeyReceipt[]>;
}

/** Raised when keys are safe in the journal but could not reach their store. */
export class KeyStoreFailure extends Error {
  readonly journaled: number;
  constructor(message: string, journaled: number) {
    super(message);
    this.journaled = journaled;
  }
}
