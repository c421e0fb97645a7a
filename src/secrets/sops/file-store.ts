/**
 * The embedded default secret store: a SOPS-compatible, age-encrypted YAML file.
 *
 *   secrets:
 *       <name>:
 *           value: ENC[AES256_GCM,...]      # only `value` is encrypted (encrypted_regex: ^value$)
 *           projectEnv: "..."
 *           client: "..."
 *           key: "..."
 *           keyId: "..."
 *           target: "..."                # the service target (model/target.ts), when known
 *           issuedAt: "..."
 *           expiresAt: null
 *           updatedAt: "..."
 *   sops: { age: [...], lastmodified, mac, encrypted_regex, version }
 *
 * `sops -d` and other SOPS readers decrypt it with the same age identity. Writes happen under an
 * exclusive lock file, go to a temp file that is fsync'ed and renamed over the store, the directory
 * is fsync'ed, and the file is read back and the new values checked before `put` resolves.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { AgeKeys, ageDecrypt, ageEncryptArmored, validateRecipient } from '../age-keys.js';
import { SecretStoreError, describeIoError } from '../errors.js';
import {
  FILE_MODE,
  LockTimeoutError,
  atomicWriteFile,
  ensureDir,
  readIfExists,
  readUnlessSame,
  removeStaleTemps,
  withLock,
  type LockOptions,
} from '../fsutil.js';
import { testPoint } from '../../model/test-hooks.js';
import type { OpenStoreOptions, SecretEntry, SecretListing, SecretMetadata, SecretStore } from '../store.js';
import {
  SopsFormatError,
  buildSopsMapping,
  decryptTree,
  emitSopsYaml,
  emitSopsImage,
  readMetadata,
  reencryptTree,
  sameTree,
  type DecryptedTree,
  type FragmentCache,
  encryptMac,
  encryptSubtree,
  getEntry,
  makeShouldEncrypt,
  map,
  nowRfc3339,
  parseYamlTree,
  scalar,
  setEntry,
  splitSopsFile,
  verifyMac,
  type AgeStanza,
  type CryptRules,
  type SMap,
  type SNode,
  type SopsMetadata,
} from './document.js';

export { SOPS_SCHEMES, SOPS_URI_FORMS, sopsUriToPath } from './uri.js';
import { sopsUriToPath } from './uri.js';
import { POLICY_HOW } from '../../model/policy.js';

/** The rules of files we create: only `value` leaves are encrypted, so names and dates diff well. */
export const KMS_SYNC_RULES: CryptRules = {
  unencryptedSuffix: '',
  encryptedSuffix: '',
  unencryptedRegex: '',
  encryptedRegex: '^value$',
  macOnlyEncrypted: false,
};

/** A write that follows the previous one within this time waits GROUP_COMMIT_WAIT_MS for more entries. */
const GROUP_COMMIT_IDLE_MS = 100;
const GROUP_COMMIT_WAIT_MS = 15;

const SECRETS_KEY = 'secrets';
const VALUE_KEY = 'value';
/** Plaintext metadata fields of an entry (`target` only in entries written with one). */
const META_FIELDS = ['projectEnv', 'client', 'key', 'keyId', 'target', 'issuedAt', 'expiresAt'] as const;

export function openSopsFileStore(uri: string, opts: OpenStoreOptions = {}): SopsFileStore {
  return new SopsFileStore(sopsUriToPath(uri, opts.baseDir), opts);
}

/** Secrets (entries with a value) in the `secrets:` mapping. */
function secretCount(secrets: SMap): number {
  let n = 0;
  for (const [, node] of secrets.entries) if (node.kind === 'map' && getEntry(node, VALUE_KEY) !== undefined) n++;
  return n;
}

const SEGMENT_SAFE = /[A-Za-z0-9._~%-]/;
/** Segments of safe characters only, none empty: the name maps to itself. */
const SAFE_NAME = /^[A-Za-z0-9._~%-]+(?:\/[A-Za-z0-9._~%-]+)*$/;
const SAFE_SEGMENT = /^[A-Za-z0-9._~%-]+$/;

interface LoadedRaw {
  data: SMap;
  meta: SopsMetadata;
  secrets: SMap;
}

interface LoadedVerified extends LoadedRaw {
  /** The secrets are in name order (the file is one this instance wrote). */
  sorted?: boolean;
  dataKey: Uint8Array;
  /** Plaintexts (and the ciphertexts they came from) of every encrypted leaf, by path. */
  dec: DecryptedTree;
}

export class SopsFileStore implements SecretStore {
  readonly kind = 'sops-file';
  readonly displayUri: string;
  /** Absolute path of the YAML file. */
  readonly path: string;
  readonly lockPath: string;
  readonly ageKeys: AgeKeys;
  /** This store's own recipients (its declaration's), besides the local identity: never another store's. */
  readonly storeRecipients: readonly string[];
  /** Whether a declared recipient may be added to a file that already holds secrets (operator policy). */
  readonly allowNewRecipients: boolean;
  /** Its time limit, and the incarnation of the state folder's owner when the agent opened it. */
  private readonly lockOptions: LockOptions;
  /** The bytes of the file this instance last verified, with its decrypted tree (never written anywhere). */
  private cache: { bytes: Buffer; loaded: LoadedVerified } | undefined;
  /** Where the file is read to be compared with the last one verified (readUnlessSame). */
  private readonly scratch = { buf: Buffer.alloc(0) };
  /** The last file loadRaw parsed, for the verified load that may follow (see loadRaw). */
  private parsed: WeakRef<{ bytes: Buffer; raw: LoadedRaw }> | undefined;
  /** Emitted (or read and checked) text of each secret entry, by node: a rewrite emits only what changed. */
  private readonly fragments: FragmentCache = new WeakMap();

  constructor(filePath: string, opts: OpenStoreOptions = {}) {
    this.path = path.resolve(filePath);
    this.lockPath = `${this.path}.lock`;
    this.displayUri = `sops://${this.path}`;
    this.lockOptions = {
      timeoutMs: opts.lockTimeoutMs ?? 10_000,
      ...(opts.incarnation ? { incarnation: opts.incarnation } : {}),
    };
    this.ageKeys =
      opts.ageKeys ??
      new AgeKeys({
        ...(opts.env ? { env: opts.env } : {}),
        ...(opts.onNotice ? { onNotice: opts.onNotice } : {}),
      });
    this.allowNewRecipients = Boolean(opts.allowNewRecipients);
    this.storeRecipients = [
      ...new Set([...this.ageKeys.extraRecipients, ...(opts.recipients ?? []).map(validateRecipient)]),
    ];
  }

  /** Recipients the file's data key is wrapped for now (its `sops.age` stanzas); empty when there is no file. Needs no identity. */
  async fileRecipients(): Promise<{ recipients: string[]; secrets: number }> {
    const loaded = await this.guard(() => this.loadRaw(), 'cannot be read');
    if (!loaded) return { recipients: [], secrets: 0 };
    return { recipients: loaded.meta.age.map((s) => s.recipient), secrets: loaded.secrets.entries.length };
  }

  /**
   * The recipients another version of this file (a git revision's text) wraps its data key for;
   * undefined when that text is no SOPS file this store could read. Needs no identity.
   */
  recipientsIn(text: string): string[] | undefined {
    try {
      return parseRaw(text).meta.age.map((s) => s.recipient);
    } catch {
      return undefined;
    }
  }

  /**
   * Wraps the data key for this store's recipients that the file lacks (after apply allowed them:
   * --allow-new-recipients), in one verified write; nothing when none is missing or there is no file.
   */
  async addMissingRecipients(): Promise<string[]> {
    let added: string[] = [];
    try {
      await withLock(this.lockPath, this.lockOptions, async () => {
        const loaded = await this.loadVerified();
        if (!loaded) return;
        const wanted = await this.ageKeys.recipientsWith(this.storeRecipients);
        added = wanted.filter((r) => !loaded.meta.age.some((s) => s.recipient === r));
        if (added.length) await this.writeLocked([]);
      });
    } catch (err) {
      throw this.wrap(err, 'could not add its recipients', 'IO');
    }
    return added;
  }

  /**
   * A new data key, wrapped for the file's recipients but `removed` (and never for fewer than this
   * store's own and the local identity's), every value re-encrypted under it, in one verified
   * write: a removed recipient's stanza, kept elsewhere, opens no value of the new file. Returns
   * the recipients removed; nothing when the file wraps its key for none of them, or there is no file.
   */
  async rekeyWithout(removed: readonly string[]): Promise<string[]> {
    let dropped: string[] = [];
    try {
      await withLock(this.lockPath, this.lockOptions, async () => {
        const loaded = await this.loadVerified();
        if (!loaded) return;
        const wanted = await this.ageKeys.recipientsWith(this.storeRecipients);
        dropped = loaded.meta.age.map((s) => s.recipient).filter((r) => removed.includes(r) && !wanted.includes(r));
        if (dropped.length === 0) return;
        const dataKey = randomBytes(32);
        const remaining = [
          ...new Set([...loaded.meta.age.map((s) => s.recipient).filter((r) => !dropped.includes(r)), ...wanted]),
        ];
        const stanzas: AgeStanza[] = [];
        for (const r of remaining) stanzas.push({ recipient: r, enc: await ageEncryptArmored(dataKey, r) });
        const data = reencryptTree(loaded.data, loaded.meta.rules, loaded.dataKey, dataKey);
        const dec = decryptTree(data, loaded.meta.rules, dataKey);
        // Same plaintexts under the new key: the MAC over them is the one the file had.
        if (dec.mac !== loaded.dec.mac)
          throw this.error("re-key check failed: the re-encrypted values differ from the file's", 'VERIFY_FAILED');
        const lastModified = nowRfc3339();
        const sops = buildSopsMapping({
          previous: loaded.meta.raw,
          age: stanzas,
          lastModified,
          mac: encryptMac(dec.mac, dataKey, lastModified),
          rules: loaded.meta.rules,
        });
        const text = emitSopsYaml(data, sops);
        const bytes = Buffer.from(text, 'utf8');
        const verified = this.verifyText(text, bytes, dataKey, []);
        await removeStaleTemps(this.path);
        await atomicWriteFile(this.path, bytes);
        const back = await fs.readFile(this.path);
        if (!back.equals(bytes)) {
          this.cache = undefined;
          throw this.error('read-back check failed: the file on disk differs from what was written', 'VERIFY_FAILED');
        }
        this.cache = { bytes, loaded: verified };
      });
    } catch (err) {
      throw this.wrap(err, 'could not be re-keyed', 'IO');
    }
    return dropped;
  }

  /**
   * `<project_env>/<client>/<key>` → the key under `secrets:`. Segments keep [A-Za-z0-9._~%-];
   * anything else is percent-encoded (UTF-8). Deterministic, but a name that holds a `%XX` of its
   * own can meet an encoded one: the collision check compares names after this mapping.
   */
  secretName(logical: string): string {
    // Most names need no encoding: checked in one pass (plan and validate call this per key).
    if (SAFE_NAME.test(logical)) return logical;
    const segments = logical.split('/');
    if (logical === '' || segments.some((s) => s === '')) {
      throw this.error(`invalid logical secret name '${logical}': empty segment`, 'INVALID_ARGUMENT');
    }
    return segments
      .map((seg) =>
        Array.from(seg)
          .map((ch) =>
            SEGMENT_SAFE.test(ch)
              ? ch
              : Array.from(Buffer.from(ch, 'utf8'))
                  .map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`)
                  .join(''),
          )
          .join(''),
      )
      .join('/');
  }

  keepsSegment(segment: string): boolean {
    return SAFE_SEGMENT.test(segment);
  }

  async checkWritable(): Promise<void> {
    try {
      await ensureDir(path.dirname(this.path));
      await withLock(this.lockPath, this.lockOptions, async () => {
        await removeStaleTemps(this.path);
        await this.loadVerified();
        await this.ageKeys.recipientsWith(this.storeRecipients);
        const probe = path.join(path.dirname(this.path), `.${path.basename(this.path)}.tmp-${process.pid}-probe`);
        const fh = await fs.open(probe, 'wx', FILE_MODE);
        try {
          await fh.sync();
        } finally {
          await fh.close();
          await fs.unlink(probe).catch(() => undefined);
        }
      });
    } catch (err) {
      throw this.wrap(err, 'is not writable', 'NOT_WRITABLE');
    }
  }

  async put(name: string, value: string, meta: SecretMetadata): Promise<void> {
    await this.putMany([{ name, value, meta }]);
  }

  /**
   * Group commit: batches that arrive while a write is under way go into the next write together,
   * so concurrent callers (parallel bulk creates) cost one re-encryption of the file, not one
   * each. Every caller resolves only once the write holding its entries is on disk and verified.
   */
  async putMany(entries: SecretEntry[]): Promise<void> {
    if (entries.length === 0) return;
    for (const e of entries) this.validateEntry(e);
    await new Promise<void>((resolve, reject) => {
      this.queued.push({ entries, resolve, reject });
      this.writer ??= this.drainQueue();
    });
  }

  private readonly queued: { entries: SecretEntry[]; resolve: () => void; reject: (e: unknown) => void }[] = [];
  private writer: Promise<void> | undefined;
  private lastWriteEnd = -Infinity;

  private async drainQueue(): Promise<void> {
    while (this.queued.length > 0) {
      // Group commit: while writes follow one another (a key at a time from parallel requests),
      // a write first waits a moment for the entries of the captures in flight, so a stream of
      // keys costs a few whole-file writes of several keys each instead of one write per key (a
      // write is the whole file). The keys wait in the fsync'ed journal meanwhile.
      if (performance.now() - this.lastWriteEnd < GROUP_COMMIT_IDLE_MS)
        await new Promise((ok) => setTimeout(ok, GROUP_COMMIT_WAIT_MS));
      const group = this.queued.splice(0);
      const batch = new Map<string, SecretEntry>();
      for (const g of group) for (const e of g.entries) batch.set(e.name, e); // a later put of a name wins
      try {
        await ensureDir(path.dirname(this.path));
        await withLock(this.lockPath, this.lockOptions, async () => {
          await testPoint('store-locked');
          await removeStaleTemps(this.path);
          await this.writeLocked([...batch.values()]);
        });
        for (const g of group) g.resolve();
      } catch (err) {
        const failure = this.wrap(err, `could not store ${batch.size} secret(s)`, 'IO');
        for (const g of group) g.reject(failure);
      } finally {
        this.lastWriteEnd = performance.now();
      }
    }
    this.writer = undefined;
  }

  async exists(name: string): Promise<boolean> {
    return (await this.existsMany([name])).has(name);
  }

  /**
   * Removes secrets, each only if it still holds the key it was judged by (`keyId`, checked under
   * the store's lock: a run that stored a new key under that name meanwhile keeps it). One atomic
   * write; returns the names removed.
   */
  async deleteMany(targets: { name: string; keyId?: string }[]): Promise<string[]> {
    if (targets.length === 0) return [];
    let removed: string[] = [];
    try {
      await ensureDir(path.dirname(this.path));
      await withLock(this.lockPath, this.lockOptions, async () => {
        await removeStaleTemps(this.path);
        removed = await this.writeLocked([], new Map(targets.map((t) => [t.name, t.keyId])));
      });
    } catch (err) {
      throw this.wrap(err, `could not remove ${targets.length} secret(s)`, 'IO');
    }
    return removed;
  }

  /** Reads names only: needs no identity and does not check the MAC. */
  async existsMany(names: string[]): Promise<Set<string>> {
    const loaded = await this.guard(() => this.loadRaw(), 'cannot be read');
    const out = new Set<string>();
    if (!loaded) return out;
    for (const n of names) {
      const node = getEntry(loaded.secrets, n);
      if (node?.kind === 'map' && getEntry(node, VALUE_KEY) !== undefined) out.add(n);
    }
    return out;
  }

  /** Decrypts (and authenticates the whole file) to return one value. */
  async read(name: string): Promise<string | undefined> {
    const loaded = await this.guard(() => this.loadVerified(), 'cannot be read');
    if (!loaded) return undefined;
    return storedValue(loaded, name);
  }

  /** All values, decrypted and authenticated. */
  async readAll(): Promise<Map<string, string>> {
    const loaded = await this.guard(() => this.loadVerified(), 'cannot be read');
    const out = new Map<string, string>();
    if (!loaded) return out;
    for (const [name] of loaded.secrets.entries) {
      const v = storedValue(loaded, name);
      if (v !== undefined) out.set(name, v);
    }
    return out;
  }

  /** Names and plaintext metadata; needs no identity and does not check the MAC. */
  async list(): Promise<SecretListing[]> {
    const loaded = await this.guard(() => this.loadRaw(), 'cannot be read');
    if (!loaded) return [];
    const out: SecretListing[] = [];
    for (const [name, node] of loaded.secrets.entries) {
      if (node.kind !== 'map' || getEntry(node, VALUE_KEY) === undefined) continue;
      const meta: Partial<SecretMetadata> = {};
      for (const f of META_FIELDS) {
        const v = getEntry(node, f);
        if (v?.kind !== 'scalar') continue;
        if (typeof v.value === 'string' && !v.value.startsWith('ENC[')) meta[f] = v.value;
        else if (v.value === null && f === 'expiresAt') meta.expiresAt = null;
      }
      const upd = getEntry(node, 'updatedAt');
      const updatedAt = upd?.kind === 'scalar' && typeof upd.value === 'string' ? upd.value : loaded.meta.lastModified;
      out.push({ name, updatedAt, meta });
    }
    return out;
  }

  // -------------------------------------------------------------------------------------------

  private validateEntry(e: SecretEntry): void {
    if (typeof e.name !== 'string' || e.name === '' || e.name.length > 1024 || /[\u0000-\u001f\u007f]/.test(e.name)) {
      throw this.error('invalid secret name (empty, too long or with control characters)', 'INVALID_ARGUMENT');
    }
    if (e.name === 'sops') throw this.error("'sops' is not a valid secret name", 'INVALID_ARGUMENT');
    if (typeof e.value !== 'string' || e.value === '') {
      throw this.error(`secret '${e.name}': the value must be a non-empty string`, 'INVALID_ARGUMENT');
    }
    const m = e.meta as unknown as Record<string, unknown> | undefined;
    if (!m || typeof m !== 'object') throw this.error(`secret '${e.name}': metadata missing`, 'INVALID_ARGUMENT');
    for (const f of ['projectEnv', 'client', 'key', 'keyId', 'issuedAt'] as const) {
      if (typeof m[f] !== 'string')
        throw this.error(`secret '${e.name}': metadata '${f}' must be a string`, 'INVALID_ARGUMENT');
    }
    if (m.expiresAt !== undefined && m.expiresAt !== null && typeof m.expiresAt !== 'string') {
      throw this.error(`secret '${e.name}': metadata 'expiresAt' must be a string or null`, 'INVALID_ARGUMENT');
    }
    if (m.target !== undefined && (typeof m.target !== 'string' || m.target === '')) {
      throw this.error(
        `secret '${e.name}': metadata 'target', when given, must be a non-empty string`,
        'INVALID_ARGUMENT',
      );
    }
  }

  private async writeLocked(entries: SecretEntry[], remove?: Map<string, string | undefined>): Promise<string[]> {
    const loaded = await this.loadVerified();
    if (remove && !loaded) return [];
    const recipients = await this.ageKeys.recipientsWith(this.storeRecipients);
    let dataKey: Uint8Array;
    let data: SMap;
    let rules: CryptRules;
    let previousSops: SMap | undefined;
    let stanzas: AgeStanza[];
    if (loaded) {
      dataKey = loaded.dataKey;
      data = loaded.data;
      rules = loaded.meta.rules;
      previousSops = loaded.meta.raw;
      stanzas = [...loaded.meta.age];
    } else {
      dataKey = randomBytes(32);
      data = map([[SECRETS_KEY, map()]]);
      rules = KMS_SYNC_RULES;
      previousSops = undefined;
      stanzas = [];
    }
    // A declared recipient the file lacks can read every key already in it: added only when the
    // operator allowed it (--allow-new-recipients); the plan showed it as a change.
    const adding = this.storeRecipients.filter((r) => !stanzas.some((s) => s.recipient === r));
    if (adding.length && loaded && secretCount(loaded.secrets) > 0 && !this.allowNewRecipients) {
      throw this.error(
        `it holds ${secretCount(loaded.secrets)} secret(s) and its declaration adds the age recipient(s) ${adding.join(', ')}, which could then decrypt all of them; ` +
          `refused: review the plan's security section and allow it with ${POLICY_HOW.allowNewRecipients}`,
        'NEW_RECIPIENT',
      );
    }
    for (const r of recipients) {
      if (!stanzas.some((s) => s.recipient === r))
        stanzas.push({ recipient: r, enc: await ageEncryptArmored(dataKey, r) });
    }
    let secrets = getEntry(data, SECRETS_KEY);
    if (secrets === undefined || (secrets.kind === 'scalar' && secrets.value === null)) {
      secrets = map();
      setEntry(data, SECRETS_KEY, secrets);
    }
    if (secrets.kind !== 'map') throw new SopsFormatError('parse', `'${SECRETS_KEY}' must be a mapping`);
    const removed: string[] = [];
    if (remove) {
      const kept = secrets.entries.filter(([name, node]) => {
        if (!remove.has(name)) return true;
        const expected = remove.get(name);
        const keyId = node.kind === 'map' ? getEntry(node, 'keyId') : undefined;
        const current = keyId?.kind === 'scalar' && typeof keyId.value === 'string' ? keyId.value : undefined;
        if (expected !== undefined && current !== expected) return true;
        removed.push(name);
        return false;
      });
      if (removed.length === 0) return [];
      secrets.entries.splice(0, secrets.entries.length, ...kept);
    }
    const shouldEncrypt = makeShouldEncrypt(rules);
    const updatedAt = new Date().toISOString();
    // Entries are kept in name order. In a file this instance wrote (so sorted), each entry is
    // put in its place by a binary search, without indexing or sorting thousands of entries again.
    const inOrder = loaded?.sorted === true;
    for (const e of entries) {
      const base = [SECRETS_KEY, e.name];
      if (!shouldEncrypt([...base, VALUE_KEY])) {
        throw this.error(
          `secret '${e.name}': the file's SOPS encryption rules would leave its value unencrypted; refusing to write`,
          'UNSUPPORTED',
        );
      }
      const node = encryptSubtree(entryNode(e, updatedAt), base, rules, dataKey);
      if (inOrder) putInOrder(secrets, e.name, node);
      else setEntry(secrets, e.name, node);
    }
    if (!inOrder) secrets.entries.sort(([a], [b]) => byName(a, b));

    const lastModified = nowRfc3339();
    // Values unchanged since the last verified load are not decrypted again (work ∝ what changed).
    const dec = decryptTree(data, rules, dataKey, loaded?.dec);
    const sops = buildSopsMapping({
      previous: previousSops,
      age: stanzas,
      lastModified,
      mac: encryptMac(dec.mac, dataKey, lastModified),
      rules,
    });
    // Before touching the disk: the new text parses back to the tree meant, its MAC verifies and
    // every new value decrypts. The usual file is built entry by entry (the bytes of unchanged
    // entries copied from the last image) and only the entries emitted now are parsed back; other
    // shapes are emitted and parsed whole.
    const fresh: [string, SNode, string][] = [];
    // A removal is emitted and verified whole (the incremental emitter follows additions only).
    let bytes = remove ? undefined : emitSopsImage(data, sops, this.fragments, fresh);
    let verified: LoadedVerified;
    if (bytes === undefined) {
      const text = emitSopsYaml(data, sops);
      bytes = Buffer.from(text, 'utf8');
      verified = this.verifyText(text, bytes, dataKey, entries);
    } else {
      verified = this.verifyFragments(data, sops, dataKey, dec, fresh, entries);
    }
    await atomicWriteFile(this.path, bytes);
    // After: what the disk returns is byte for byte the text just verified.
    if ((await readUnlessSame(this.path, bytes, this.scratch)) !== 'same') {
      this.cache = undefined;
      throw this.error('read-back check failed: the file on disk differs from what was written', 'VERIFY_FAILED');
    }
    this.cache = { bytes, loaded: { ...verified, sorted: true } };
    return removed;
  }

  /** Each fragment emitted now parses back to its node; the MAC and the new values check out. */
  private verifyFragments(
    data: SMap,
    sops: SMap,
    dataKey: Uint8Array,
    dec: DecryptedTree,
    fresh: [string, SNode, string][],
    entries: SecretEntry[],
  ): LoadedVerified {
    for (const [name, node, fragment] of fresh) {
      const back = parseYamlTree(name === 'sops' && node === sops ? fragment : fragment.replace(/^ {4}/gm, ''));
      if (back.entries.length !== 1 || back.entries[0]![0] !== name || !sameTree(back.entries[0]![1], node)) {
        throw this.error(
          `secret '${name}' did not emit as meant (verification before writing failed)`,
          'VERIFY_FAILED',
        );
      }
    }
    const meta = readMetadata(sops);
    verifyMac(meta, dec.mac, dataKey);
    // The new entries were emitted now: found by their nodes, not by a search of the store's names.
    const emitted = new Map<string, SNode>();
    for (const [name, node] of fresh) if (node !== sops) emitted.set(name, node);
    for (const e of entries) {
      const path = [SECRETS_KEY, e.name, VALUE_KEY];
      const node = emitted.get(e.name);
      const p = node ? dec.plainIn(node, path) : dec.plainAt(path);
      if (p?.type !== 'str' || p.value !== e.value) {
        throw this.error(`secret '${e.name}' did not read back as written`, 'VERIFY_FAILED');
      }
    }
    const secrets = getEntry(data, SECRETS_KEY) as SMap;
    return { data, meta, secrets, dataKey, dec };
  }

  /** Parses `text` (whose bytes are `bytes`), authenticates it and checks every entry decrypts to the value written. */
  private verifyText(text: string, bytes: Buffer, dataKey: Uint8Array, entries: SecretEntry[]): LoadedVerified {
    const raw = parseRaw(text, this.fragments, bytes);
    const dec = decryptTree(raw.data, raw.meta.rules, dataKey);
    verifyMac(raw.meta, dec.mac, dataKey);
    for (const e of entries) {
      const p = dec.plainAt([SECRETS_KEY, e.name, VALUE_KEY]);
      if (p?.type !== 'str' || p.value !== e.value) {
        throw this.error(`secret '${e.name}' did not read back as written`, 'VERIFY_FAILED');
      }
    }
    return { ...raw, dataKey, dec };
  }

  /** The file parsed, not authenticated: for callers that read names and plaintext metadata, never change the tree. */
  private async loadRaw(): Promise<LoadedRaw | undefined> {
    const buf = await readIfExists(this.path);
    if (buf === undefined) return undefined;
    if (this.cache?.bytes.equals(buf)) return this.cache.loaded;
    const raw = parseRaw(buf.toString('utf8'), this.fragments, buf);
    // A verified load of the same bytes (a write's, a check's) decrypts this tree instead of parsing
    // the file again; held weakly, so a run that only lists keeps no second copy of the store.
    this.parsed = new WeakRef({ bytes: buf, raw });
    return raw;
  }

  /**
   * Loads, unwraps the data key, decrypts and authenticates the file. When the file is exactly the
   * text this instance last wrote and verified, that verified tree is reused (cloned).
   */
  private async loadVerified(): Promise<LoadedVerified | undefined> {
    const cached = this.cache;
    const buf = cached ? await readUnlessSame(this.path, cached.bytes, this.scratch) : await readIfExists(this.path);
    if (buf === undefined) return undefined;
    if (buf === 'same') return cloneLoaded(cached!.loaded);
    const parsed = this.parsed?.deref();
    this.parsed = undefined;
    const raw = parsed?.bytes.equals(buf) ? parsed.raw : parseRaw(buf.toString('utf8'), this.fragments, buf);
    const dataKey = await this.unwrapDataKey(raw.meta);
    const dec = decryptTree(raw.data, raw.meta.rules, dataKey);
    verifyMac(raw.meta, dec.mac, dataKey);
    const loaded: LoadedVerified = { ...raw, dataKey, dec };
    this.cache = { bytes: buf, loaded };
    // The caller may change its copy (a write); a tree loadRaw handed out is never changed.
    return cloneLoaded(loaded);
  }

  private async unwrapDataKey(meta: SopsMetadata): Promise<Uint8Array> {
    const { identities, sources } = await this.ageKeys.requireIdentities();
    if (meta.age.length === 0) {
      throw this.error('the file has no age recipients (other SOPS key types are not supported here)', 'UNSUPPORTED');
    }
    for (const stanza of meta.age) {
      let key: Uint8Array | undefined;
      try {
        key = await ageDecrypt(stanza.enc, identities);
      } catch {
        throw this.error(`the data key wrapped for ${stanza.recipient} is malformed or was tampered with`, 'INTEGRITY');
      }
      if (key === undefined) continue;
      if (key.length !== 32) throw this.error('the decrypted data key is not 32 bytes', 'INTEGRITY');
      return key;
    }
    throw this.error(
      `none of the local age identities (from ${sources.join(', ')}) can decrypt the data key; ` +
        `the file is encrypted for ${meta.age.map((s) => s.recipient).join(', ')}`,
      'NO_IDENTITY',
    );
  }

  private async guard<T>(fn: () => Promise<T>, what: string): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw this.wrap(err, what, 'IO');
    }
  }

  private error(message: string, code: SecretStoreError['code']): SecretStoreError {
    return new SecretStoreError(`secret store ${this.displayUri}: ${message}`, { code, store: this.displayUri });
  }

  private wrap(err: unknown, what: string, fallback: SecretStoreError['code']): SecretStoreError {
    if (err instanceof SecretStoreError) {
      if (err.store !== undefined) return err;
      return new SecretStoreError(`secret store ${this.displayUri} ${what}: ${err.message}`, {
        code: err.code,
        store: this.displayUri,
      });
    }
    if (err instanceof SopsFormatError) {
      if (err.kind === 'integrity') {
        return this.error(
          `failed its integrity check (${err.message}): the file was modified outside SOPS/kms-sync or is corrupt`,
          'INTEGRITY',
        );
      }
      const code = err.kind === 'unsupported' ? 'UNSUPPORTED' : err.kind === 'decrypt' ? 'DECRYPT' : 'PARSE';
      return this.error(`${what}: not a valid SOPS file (${err.message})`, code);
    }
    if (err instanceof LockTimeoutError) return this.error(`${what}: locked: ${err.message}`, 'LOCKED');
    return this.error(`${what}: ${describeIoError(err)}`, fallback);
  }
}

function parseRaw(text: string, slices?: FragmentCache, image?: Uint8Array): LoadedRaw {
  const root = parseYamlTree(text, slices, image);
  const { data, meta } = splitSopsFile(root);
  let secrets: SNode | undefined = getEntry(data, SECRETS_KEY);
  if (secrets === undefined || (secrets.kind === 'scalar' && secrets.value === null)) {
    secrets = map();
    setEntry(data, SECRETS_KEY, secrets);
  }
  if (secrets.kind !== 'map') throw new SopsFormatError('parse', `'${SECRETS_KEY}' must be a mapping`);
  return { data, meta, secrets };
}

/**
 * A copy whose `data` and `secrets` mappings can be changed (entries added, replaced, sorted): the
 * entry nodes themselves are shared, never mutated (a write replaces an entry's node), so copying
 * the two entry lists is enough; a deep copy of thousands of entries per write is not needed.
 */
function cloneLoaded(l: LoadedVerified): LoadedVerified {
  const secretsNode = getEntry(l.data, SECRETS_KEY);
  const secrets: SMap = secretsNode?.kind === 'map' ? map([...secretsNode.entries]) : map();
  const data = map(l.data.entries.map(([k, v]): [string, SNode] => [k, k === SECRETS_KEY ? secrets : v]));
  const meta: SopsMetadata = { ...l.meta, age: [...l.meta.age], raw: structuredClone(l.meta.raw) };
  return { data, meta, secrets, dataKey: l.dataKey, dec: l.dec, ...(l.sorted ? { sorted: true } : {}) };
}

const byName = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Replaces or inserts the entry `name` of a mapping whose entries are in name order, keeping that order. */
function putInOrder(m: SMap, name: string, node: SNode): void {
  const list = m.entries;
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid]![0] < name) lo = mid + 1;
    else hi = mid;
  }
  if (lo < list.length && list[lo]![0] === name) list[lo] = [name, node];
  else list.splice(lo, 0, [name, node]);
}

/** An entry's node: `target` only when the metadata has one (entries without it read as before). */
function entryNode(e: SecretEntry, updatedAt: string): SMap {
  return map([
    [VALUE_KEY, scalar(e.value)],
    ['projectEnv', scalar(e.meta.projectEnv)],
    ['client', scalar(e.meta.client)],
    ['key', scalar(e.meta.key)],
    ['keyId', scalar(e.meta.keyId)],
    ...(typeof e.meta.target === 'string' ? [['target', scalar(e.meta.target)] as [string, SNode]] : []),
    ['issuedAt', scalar(e.meta.issuedAt)],
    ['expiresAt', scalar(e.meta.expiresAt ?? null)],
    ['updatedAt', scalar(updatedAt)],
  ]);
}

function storedValue(loaded: LoadedVerified, name: string): string | undefined {
  const node = getEntry(loaded.secrets, name);
  if (node?.kind !== 'map') return undefined;
  const leaf = getEntry(node, VALUE_KEY);
  if (leaf === undefined) return undefined;
  const p = loaded.dec.plainAt([SECRETS_KEY, name, VALUE_KEY]);
  if (p) return p.type === 'bytes' ? Buffer.from(p.value).toString('utf8') : String(p.value);
  return leaf.kind === 'scalar' && leaf.value !== null ? String(leaf.value) : undefined;
}
