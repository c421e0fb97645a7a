// Test-only SecretStore doubles: an in-memory store and a fault-injecting wrapper.
import { SecretStoreError, type SecretEntry, type SecretMetadata, type SecretStore } from '../../src/secrets/store.js';

export class MemoryStore implements SecretStore {
  readonly kind = 'memory';
  readonly displayUri: string;
  readonly data = new Map<string, { value: string; meta: SecretMetadata }>();
  puts = 0;
  constructor(uri = 'memory://test') {
    this.displayUri = uri;
  }
  secretName(logical: string): string {
    return logical;
  }
  async checkWritable(): Promise<void> {}
  async put(name: string, value: string, meta: SecretMetadata): Promise<void> {
    await this.putMany([{ name, value, meta }]);
  }
  async putMany(entries: SecretEntry[]): Promise<void> {
    this.puts += 1;
    for (const e of entries) this.data.set(e.name, { value: e.value, meta: e.meta });
  }
  async exists(name: string): Promise<boolean> {
    return this.data.has(name);
  }
  async existsMany(names: string[]): Promise<Set<string>> {
    return new Set(names.filter((n) => this.data.has(n)));
  }
  async read(name: string): Promise<string | undefined> {
    return this.data.get(name)?.value;
  }
}

/** Wraps a store; while `failing` is true every write and check throws (like an unreachable backend). */
export class FaultyStore implements SecretStore {
  failing = true;
  attempts = 0;
  readonly inner: SecretStore;
  readonly error: Error;
  constructor(
    inner: SecretStore,
    error: Error = new SecretStoreError('backend unreachable (injected)', { code: 'IO' }),
  ) {
    this.inner = inner;
    this.error = error;
  }
  get kind(): string {
    return this.inner.kind;
  }
  get displayUri(): string {
    return this.inner.displayUri;
  }
  secretName(logical: string): string {
    return this.inner.secretName(logical);
  }
  async checkWritable(): Promise<void> {
    if (this.failing) throw this.error;
    await this.inner.checkWritable();
  }
  async put(name: string, value: string, meta: SecretMetadata): Promise<void> {
    await this.putMany([{ name, value, meta }]);
  }
  async putMany(entries: SecretEntry[]): Promise<void> {
    this.attempts += 1;
    if (this.failing) throw this.error;
    await this.inner.putMany(entries);
  }
  exists(name: string): Promise<boolean> {
    return this.inner.exists(name);
  }
  existsMany(names: string[]): Promise<Set<string>> {
    return this.inner.existsMany(names);
  }
}
