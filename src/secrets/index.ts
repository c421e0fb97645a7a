/** The secrets layer: the store interface, the embedded SOPS file store, the key journal, age keys. */
export * from './store.js';
export { openStore, supportedStoreSchemes, STORE_BACKENDS, type LazyStoreBackend } from './registry.js';
export {
  AgeKeys,
  defaultAgeKeyFile,
  parseIdentities,
  validateRecipient,
  type AgeKeyOptions,
  type CreatedIdentity,
} from './age-keys.js';
export { SopsFileStore, sopsUriToPath, openSopsFileStore, KMS_SYNC_RULES } from './sops/file-store.js';
export {
  Journal,
  defaultJournalPath,
  type JournalEntry,
  type JournalRecord,
  type FlushResult,
  type StoreResolver,
  type JournalOptions,
} from './journal.js';
