/**
 * The local key journal: where a raw key goes first, before the secret store.
 *
 * File format (append-only, binary): a sequence of frames
 *
 *     "KSJ1" | u32 BE payload length | u32 BE CRC-32 of payload | payload
 *     payload = u8 id length | id (ASCII) | body
 *
 * A data frame's body is one age file (to the same recipients as the store: the local identity
 * plus the configured extra recipients) holding one record (id `<uuid>`) or the batch of records
 * of one append (id `<uuid>~<n>`, entries `<uuid>~<n>#<i>`): one encryption per response, not one
 * per key. An append is fsync'ed before it returns. A frame torn by a crash mid-append fails its
 * length/CRC check and is ignored (and trimmed by the next append); frames before it are
 * untouched. Clearing rewrites the file atomically: fully cleared frames go, and the ids of
 * entries cleared from a batch that still holds others are listed in one plaintext `cleared`
 * frame (ids only); the file is removed when nothing is left.
 *
 * Besides raw keys, the journal holds two kinds of plaintext records (ids and names, never a
 * value), so that a run killed at any moment leaves enough behind to find every key it issued:
 * - an *issue intent* (frame id `i-<uuid>`), written and fsync'ed before every key-issuing
 *   request: the environment, the client (or the names of the clients being created), the key
 *   names asked for, every key id the client had before, and the live keys it supersedes. It is
 *   cleared in the same write that journals the response's raw keys, so a pending intent means
 *   "no raw key of this request was kept": any key it created is an orphan. When the response is
 *   lost, it is cleared in the write that records the orphans and, if the request took effect,
 *   the keys it superseded as pending revokes: never without what it still owes.
 * - an *orphan record* (frame id `o-<uuid>`): keys known to be live without their raw value,
 *   waiting to be revoked once their replacement is stored.
 */
import { randomUUID } from 'node:crypto';
import { constants as fsc } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { crc32 } from 'node:zlib';
import { AgeKeys, ageDecrypt, ageEncrypt } from './age-keys.js';
import { registerSecret } from '../model/redact.js';
import { SecretStoreError, describeIoError, redactSecrets } from './errors.js';
import {
  FILE_MODE,
  LockTimeoutError,
  atomicWriteFile,
  type LockOptions,
  ensureDir,
  fsyncDir,
  readIfExists,
  removeStaleTemps,
  withLock,
} from './fsutil.js';
import type { OpenStoreOptions, SecretMetadata, SecretStore } from './store.js';

export interface JournalRecord {
  /** Which store the key belongs in: a URI the flush's store resolver understands (usually the config's store URI). */
  storeUri: string;
  /** The backend name (already passed through `store.secretName`). */
  name: string;
  /** The raw key. */
  value: string;
  meta: SecretMetadata;
}

export interface JournalEntry extends JournalRecord {
  id: string;
  createdAt: string;
}

/** Written before a key-issuing request; see the file comment. */
export interface IssueIntent {
  type: 'issue';
  projectEnv: string;
  /** The existing client the request adds keys to. */
  clientId?: string;
  /** The clients the request creates (bulk create), when there is no client id yet. */
  clientNames?: string[];
  /** Names of the keys the request asks for. */
  keyNames: string[];
  /** Every key id the client had before the request (empty for a client being created). */
  knownKeyIds: string[];
  /**
   * Live keys the request supersedes and the run revokes once their successors are stored
   * (`rotate --revoke-old`): if the response is lost, the write that clears the intent records
   * them as pending revokes (apply/recover.ts recordsOfLostResponse), whichever run settles it.
   */
  supersedes?: { keyId: string; name: string }[];
}

/** Live keys whose raw value never reached us, to revoke once their replacement is stored. */
export interface OrphanRecord {
  type: 'orphan';
  projectEnv: string;
  clientId: string;
  client: string;
  keyIds: string[];
  keyNames: string[];
  /**
   * Why nobody holds them: a request whose response was lost (the default), or a generation that a
   * rotation with `--revoke-old` superseded — recorded in the write that journals its successor, so
   * that a run killed before the revoke leaves the revoke pending for the next one.
   */
  reason?: 'lost-response' | 'superseded';
}

export type JournalIntent = (IssueIntent | OrphanRecord) & { id: string; createdAt: string };

/**
 * Keys a Terraform provider create issued that Terraform has not yet shown it knows (frame id
 * `u-<uuid>`, plaintext, ids and names only), written in the same durable write as their raw
 * keys. Cleared once Terraform sends a state holding the key id; while pending, a create of the
 * same key name adopts the key (its raw value is in the store) instead of issuing a second one.
 * Not among `intents()`: they name no request to recover.
 */
export interface UnconfirmedRecord {
  type: 'unconfirmed';
  projectEnv: string;
  clientId: string;
  client: string;
  keyIds: string[];
  keyNames: string[];
  /**
   * Set on a key no create issued: the store held it and no Terraform state the plan showed named
   * it (a state lost, `terraform state rm`, a restored backup). The provider process (instance id)
   * that found it: a create of another process (Terraform's apply, after its plan) adopts it; the
   * finder itself never does (its create may be the new half of a replacement).
   */
  heldBy?: string;
}

export interface AppendOptions {
  /** Intent/orphan ids this write resolves (cleared in the same fsync'ed write). */
  resolve?: string[];
  /** Orphan records to add in the same write (ids from `newOrphanId`, so the caller can clear them). */
  orphans?: (OrphanRecord & { id: string })[];
  /** Unconfirmed-key records to add in the same write (ids from `newUnconfirmedId`). */
  unconfirmed?: (UnconfirmedRecord & { id: string })[];
}

/** Id of a new unconfirmed-key record. */
export function newUnconfirmedId(): string {
  return `${UNCONFIRMED_MARK}${randomUUID()}`;
}

/** Id of a new orphan record. */
export function newOrphanId(): string {
  return `${ORPHAN_MARK}${randomUUID()}`;
}

export interface FlushResult {
  flushed: { id: string; storeUri: string; name: string }[];
  failed: { storeUri: string; ids: string[]; names: string[]; error: SecretStoreError }[];
}

export type StoreResolver = (storeUri: string) => SecretStore | Promise<SecretStore>;

export type JournalOptions = Pick<
  OpenStoreOptions,
  'ageKeys' | 'env' | 'recipients' | 'onNotice' | 'lockTimeoutMs' | 'incarnation'
>;

/** `.kms-sync/journal` beside the config file. */
export function defaultJournalPath(configDir: string): string {
  return path.join(configDir, '.kms-sync', 'journal');
}

const MAGIC = Buffer.from('KSJ1', 'ascii');
const HEADER = 12;
const MAX_PAYLOAD = 1 << 20;

interface Frame {
  id: string;
  start: number;
  end: number;
  body: Uint8Array;
}

/** Finds every intact frame; skips damaged regions (resynchronising on the magic). */
export function scanJournal(buf: Uint8Array): { frames: Frame[]; validEnd: number; damagedBytes: number } {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const frames: Frame[] = [];
  let off = 0;
  let validEnd = 0;
  let damaged = 0;
  while (off < b.length) {
    const frame = frameAt(b, off);
    if (frame) {
      frames.push(frame);
      off = frame.end;
      validEnd = off;
      continue;
    }
    const next = b.indexOf(MAGIC, off + 1);
    const stop = next < 0 ? b.length : next;
    damaged += stop - off;
    off = stop;
  }
  return { frames, validEnd, damagedBytes: damaged };
}

function frameAt(b: Buffer, off: number): Frame | undefined {
  if (b.length - off < HEADER) return undefined;
  if (!b.subarray(off, off + 4).equals(MAGIC)) return undefined;
  const len = b.readUInt32BE(off + 4);
  const crc = b.readUInt32BE(off + 8);
  if (len < 2 || len > MAX_PAYLOAD || off + HEADER + len > b.length) return undefined;
  const payload = b.subarray(off + HEADER, off + HEADER + len);
  if (crc32(payload) !== crc) return undefined;
  const idLen = payload[0] as number;
  if (idLen === 0 || 1 + idLen >= payload.length) return undefined;
  const id = payload.subarray(1, 1 + idLen).toString('ascii');
  return { id, start: off, end: off + HEADER + len, body: payload.subarray(1 + idLen) };
}

function encodeFrame(id: string, body: Uint8Array): Buffer {
  const idBuf = Buffer.from(id, 'ascii');
  const payload = Buffer.concat([Buffer.from([idBuf.length]), idBuf, body]);
  const header = Buffer.alloc(HEADER);
  MAGIC.copy(header, 0);
  header.writeUInt32BE(payload.length, 4);
  header.writeUInt32BE(crc32(payload), 8);
  return Buffer.concat([header, payload]);
}

export class Journal {
  readonly path: string;
  readonly ageKeys: AgeKeys;
  private readonly lockPath: string;
  private readonly lockOptions: LockOptions;

  constructor(filePath: string, opts: JournalOptions = {}) {
    this.path = path.resolve(filePath);
    this.lockPath = `${this.path}.lock`;
    this.lockOptions = {
      timeoutMs: opts.lockTimeoutMs ?? 10_000,
      ...(opts.incarnation ? { incarnation: opts.incarnation } : {}),
    };
    this.ageKeys =
      opts.ageKeys ??
      new AgeKeys({
        ...(opts.env ? { env: opts.env } : {}),
        ...(opts.recipients ? { recipients: opts.recipients } : {}),
        ...(opts.onNotice ? { onNotice: opts.onNotice } : {}),
      });
  }

  /** Durably records a raw key; resolves (with the entry's id) only after the data is fsync'ed. */
  async append(record: JournalRecord): Promise<string> {
    const [id] = await this.appendMany([record]);
    return id!;
  }

  /**
   * Durably records the raw keys of one response: one frame each (independently decryptable),
   * written and fsync'ed together, so a batch costs one lock and one fsync.
   */
  async appendMany(records: JournalRecord[], opts: AppendOptions = {}): Promise<string[]> {
    if (records.length === 0) {
      if (opts.resolve?.length || opts.orphans?.length || opts.unconfirmed?.length)
        await this.writeFrames(this.intentFrames(opts));
      return [];
    }
    for (const r of records) validateRecord(r);
    const ids: string[] = [];
    const frames: Buffer[] = [];
    try {
      const recipients = await this.ageKeys.recipients();
      const createdAt = new Date().toISOString();
      // One age file per batch: the raw keys of one response cost one encryption, not one each.
      const frameId = records.length === 1 ? randomUUID() : `${randomUUID()}${BATCH_MARK}${records.length}`;
      const entryIds = entryIdsOf(frameId);
      const entries: JournalEntry[] = records.map((record, i) => ({
        id: entryIds[i]!,
        storeUri: record.storeUri,
        name: record.name,
        value: record.value,
        meta: { ...record.meta, expiresAt: record.meta.expiresAt ?? null },
        createdAt,
      }));
      const plain = records.length === 1 ? { v: 1, ...entries[0]! } : { v: 2, entries };
      frames.push(encodeFrame(frameId, await ageEncrypt(Buffer.from(JSON.stringify(plain), 'utf8'), recipients)));
      ids.push(...entries.map((e) => e.id));
      frames.push(...this.intentFrames(opts));
    } catch (err) {
      throw this.wrap(err, 'could not append to the journal');
    }
    await this.writeFrames(frames);
    return ids;
  }

  /** Records an issue intent (fsync'ed) before a key-issuing request; returns its id. */
  async recordIntent(intent: IssueIntent): Promise<string> {
    const id = `${INTENT_MARK}${randomUUID()}`;
    await this.writeFrames([
      encodeFrame(id, Buffer.from(JSON.stringify({ ...intent, id, createdAt: new Date().toISOString() }), 'utf8')),
    ]);
    return id;
  }

  /** Clears intents/orphan records and adds orphan records, in one fsync'ed append. */
  async resolve(opts: AppendOptions): Promise<void> {
    if (!opts.resolve?.length && !opts.orphans?.length && !opts.unconfirmed?.length) return;
    await this.writeFrames(this.intentFrames(opts));
  }

  /** Clears the orphan records whose keys are all among `revoked` (the run revoked them). */
  async resolveOrphans(revoked: ReadonlySet<string>): Promise<void> {
    if (revoked.size === 0) return;
    const done = (await this.intents())
      .filter((i) => i.type === 'orphan' && i.keyIds.every((id) => revoked.has(id)))
      .map((i) => i.id);
    await this.resolve({ resolve: done });
  }

  /** Pending intents and orphan records, oldest first (plaintext: no identity needed). */
  async intents(): Promise<JournalIntent[]> {
    const { intents, cleared } = await this.readFrames();
    const out: JournalIntent[] = [];
    for (const f of intents) {
      if (cleared.has(f.id)) continue;
      try {
        const v = JSON.parse(Buffer.from(f.body).toString('utf8')) as JournalIntent;
        if (v && v.id === f.id && (v.type === 'issue' || v.type === 'orphan')) out.push(v);
      } catch {
        // a record that cannot be read names nothing to recover
      }
    }
    return out;
  }

  /** Pending unconfirmed-key records, oldest first (plaintext). */
  async unconfirmed(): Promise<(UnconfirmedRecord & { id: string; createdAt: string })[]> {
    const { intents, cleared } = await this.readFrames();
    const out: (UnconfirmedRecord & { id: string; createdAt: string })[] = [];
    for (const f of intents) {
      if (cleared.has(f.id) || !f.id.startsWith(UNCONFIRMED_MARK)) continue;
      try {
        const v = JSON.parse(Buffer.from(f.body).toString('utf8')) as UnconfirmedRecord & {
          id: string;
          createdAt: string;
        };
        if (v && v.id === f.id && v.type === 'unconfirmed' && Array.isArray(v.keyIds)) out.push(v);
      } catch {
        // unreadable: names nothing
      }
    }
    return out;
  }

  private intentFrames(opts: AppendOptions): Buffer[] {
    const frames: Buffer[] = [];
    const createdAt = new Date().toISOString();
    for (const o of [...(opts.orphans ?? []), ...(opts.unconfirmed ?? [])]) {
      frames.push(encodeFrame(o.id, Buffer.from(JSON.stringify({ ...o, createdAt }), 'utf8')));
    }
    if (opts.resolve?.length)
      frames.push(encodeFrame(CLEARED_FRAME_ID, Buffer.from(JSON.stringify(opts.resolve), 'utf8')));
    return frames;
  }

  /** Appends frames in one write, fsync'ed, under the lock (trims a torn tail first). */
  private async writeFrames(frames: Buffer[]): Promise<void> {
    if (frames.length === 0) return;
    try {
      await this.commit(frames, undefined);
    } catch (err) {
      throw this.wrap(err, 'could not append to the journal');
    }
  }

  /**
   * Group commit: appends and clears that arrive while a write of the journal is under way go
   * into the next write together (one lock, one write, one fsync for all of them), in arrival
   * order; each caller resolves only once the write holding its frames is durable. Parallel key
   * requests journal an intent, the raw keys and a clear each: one write per operation made the
   * journal lock the bottleneck of a rotation (issue 16).
   */
  private commit(frames: Buffer[], drop: ReadonlySet<string> | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queued.push({ frames, drop, resolve, reject });
      this.writer ??= this.drainQueue();
    });
  }

  private readonly queued: {
    frames: Buffer[];
    drop: ReadonlySet<string> | undefined;
    resolve: () => void;
    reject: (e: unknown) => void;
  }[] = [];
  private writer: Promise<void> | undefined;

  private async drainQueue(): Promise<void> {
    while (this.queued.length > 0) {
      const group = this.queued.splice(0);
      const frames = Buffer.concat(group.flatMap((g) => g.frames));
      const clears = group.filter((g) => g.drop !== undefined);
      try {
        await ensureDir(path.dirname(this.path));
        await withLock(this.lockPath, this.lockOptions, async () => {
          if (clears.length === 0) await this.appendLocked(frames);
          else await this.rewriteLocked(new Set(clears.flatMap((g) => [...g.drop!])), frames);
        });
        for (const g of group) g.resolve();
      } catch (err) {
        for (const g of group) g.reject(err);
      }
    }
    this.writer = undefined;
  }

  /** Appends `frame` (fsync'ed); the lock is held. */
  private async appendLocked(frame: Buffer): Promise<void> {
    if (frame.length === 0) return;
    const existing = await readIfExists(this.path);
    const fh = await fs.open(this.path, fsc.O_WRONLY | fsc.O_CREAT, FILE_MODE);
    try {
      let end = existing?.length ?? 0;
      if (existing && existing.length > 0) {
        const { validEnd } = scanJournal(existing);
        if (validEnd < existing.length) {
          await fh.truncate(validEnd); // trim a torn tail left by a crash
          end = validEnd;
        }
      }
      await fh.write(frame, 0, frame.length, end);
      await fh.sync();
    } finally {
      await fh.close();
    }
    if (existing === undefined) await fsyncDir(path.dirname(this.path));
  }

  /** Decrypts and returns every pending entry, oldest first. */
  async pending(): Promise<JournalEntry[]> {
    const { data: frames, cleared } = await this.readFrames();
    if (frames.length === 0) return [];
    const { identities, sources } = await this.ageKeys.requireIdentities().catch((err: unknown) => {
      throw this.wrap(err, `holds ${frames.length} pending batch(es) of keys but cannot be decrypted`);
    });
    const out: JournalEntry[] = [];
    let undecryptable = 0;
    for (const f of frames) {
      let plain: Uint8Array | undefined;
      try {
        plain = await ageDecrypt(f.body, identities);
      } catch {
        plain = undefined;
      }
      const entries = plain ? parseFrameEntries(plain, f.id) : undefined;
      if (!entries) {
        undecryptable += entryIdsOf(f.id).filter((id) => !cleared.has(id)).length;
        continue;
      }
      for (const e of entries) if (!cleared.has(e.id)) out.push(e);
    }
    if (undecryptable > 0) {
      throw new SecretStoreError(
        `journal ${this.path} holds ${undecryptable} pending key(s) that none of the local age identities ` +
          `(from ${sources.join(', ')}) can decrypt; they are kept`,
        { code: 'NO_IDENTITY', store: this.path },
      );
    }
    return out;
  }

  /** The live frames of the journal file (none when it does not exist). */
  private async readFrames(): Promise<ReturnType<typeof liveFrames>> {
    let buf: Buffer | undefined;
    try {
      buf = await readIfExists(this.path);
    } catch (err) {
      throw this.wrap(err, 'cannot read the journal');
    }
    return liveFrames(buf && buf.length > 0 ? scanJournal(buf).frames : []);
  }

  /** Ids of the pending entries, without decrypting them. */
  async pendingIds(): Promise<string[]> {
    try {
      const buf = await readIfExists(this.path);
      if (!buf) return [];
      const { data, cleared } = liveFrames(scanJournal(buf).frames);
      return data.flatMap((f) => entryIdsOf(f.id)).filter((id) => !cleared.has(id));
    } catch (err) {
      throw this.wrap(err, 'cannot read the journal');
    }
  }

  /** Removes the given entries (atomic rewrite; the file is removed when nothing is left). */
  async clear(ids: Iterable<string>): Promise<void> {
    const drop = new Set(ids);
    if (drop.size === 0) return;
    await this.rewrite(drop);
  }

  /**
   * Drops what is no longer live (cleared entries, resolved intents and orphan records), and
   * removes the file when nothing is left: an apply that converged leaves no journal behind.
   */
  async compact(): Promise<void> {
    if (
      await fs.stat(this.path).then(
        () => true,
        () => false,
      )
    )
      await this.rewrite(new Set());
  }

  private async rewrite(drop: ReadonlySet<string>): Promise<void> {
    try {
      await this.commit([], drop);
    } catch (err) {
      throw this.wrap(err, 'could not clear journal entries');
    }
  }

  /**
   * Rewrites the journal without what `drop` clears, with `frame` (appends of the same group
   * commit) after what is kept; the lock is held.
   */
  private async rewriteLocked(drop: ReadonlySet<string>, frame: Buffer): Promise<void> {
    const buf = await readIfExists(this.path);
    if (!buf) return this.appendLocked(frame);
    const { data: keys, intents, cleared } = liveFrames(scanJournal(buf).frames);
    const data = [...keys, ...intents].sort((a, b) => a.start - b.start);
    const before = new Set(cleared);
    for (const id of drop) cleared.add(id);
    const keep = data.filter((f) => entryIdsOf(f.id).some((id) => !cleared.has(id)));
    const tombstones = keep.flatMap((f) => entryIdsOf(f.id)).filter((id) => cleared.has(id));
    if (keep.length === data.length && tombstones.every((id) => before.has(id)) && tombstones.length === before.size)
      return this.appendLocked(frame);
    if (keep.length === 0 && frame.length === 0) {
      await fs.unlink(this.path);
      await fsyncDir(path.dirname(this.path));
      return;
    }
    // Entries cleared from a batch that still holds others are listed in one plaintext
    // frame (ids only, never values); the batch goes once all its entries are cleared.
    const parts = keep.map((f) => buf.subarray(f.start, f.end));
    if (tombstones.length) parts.push(encodeFrame(CLEARED_FRAME_ID, Buffer.from(JSON.stringify(tombstones), 'utf8')));
    parts.push(frame);
    await atomicWriteFile(this.path, Buffer.concat(parts));
  }

  /**
   * Writes pending entries to their stores (one batched putMany per store) and clears those that
   * were stored. Entries whose store fails stay in the journal; their errors are returned.
   */
  async flush(resolveStore: StoreResolver): Promise<FlushResult> {
    // Temp files of a rewrite killed mid-way (`.journal.tmp-<pid>-…`) go first.
    const dirExists = await fs.stat(path.dirname(this.path)).then(
      () => true,
      () => false,
    );
    if (dirExists) await withLock(this.lockPath, this.lockOptions, () => removeStaleTemps(this.path));
    const entries = await this.pending();
    const result: FlushResult = { flushed: [], failed: [] };
    const groups = new Map<string, JournalEntry[]>();
    for (const e of entries) {
      const g = groups.get(e.storeUri);
      if (g) g.push(e);
      else groups.set(e.storeUri, [e]);
    }
    for (const [storeUri, group] of groups) {
      const latest = new Map<string, JournalEntry>(); // a later key for the same name supersedes an earlier one
      for (const e of group) latest.set(e.name, e);
      try {
        const store = await resolveStore(storeUri);
        await store.putMany([...latest.values()].map((e) => ({ name: e.name, value: e.value, meta: e.meta })));
      } catch (err) {
        result.failed.push({
          storeUri,
          ids: group.map((e) => e.id),
          names: [...latest.keys()],
          error:
            err instanceof SecretStoreError
              ? err
              : new SecretStoreError(`store ${storeUri}: ${describeIoError(err)}`, { code: 'IO', store: storeUri }),
        });
        continue;
      }
      await this.clear(group.map((e) => e.id));
      for (const e of group) result.flushed.push({ id: e.id, storeUri, name: e.name });
    }
    return result;
  }

  private wrap(err: unknown, what: string): SecretStoreError {
    if (err instanceof SecretStoreError) {
      return new SecretStoreError(`journal ${this.path} ${what}: ${err.message}`, { code: err.code, store: this.path });
    }
    if (err instanceof LockTimeoutError) {
      return new SecretStoreError(`journal ${this.path} ${what}: locked: ${err.message}`, {
        code: 'LOCKED',
        store: this.path,
      });
    }
    return new SecretStoreError(`journal ${this.path} ${what}: ${redactSecrets(describeIoError(err))}`, {
      code: 'IO',
      store: this.path,
    });
  }
}

/** A batch frame's id ends in `~<entries>`; its entries' ids are `<frame id>#<index>`. */
const BATCH_MARK = '~';
/** The frame listing entries cleared from batches that still hold others. */
const CLEARED_FRAME_ID = 'cleared';
/** Plaintext intent and orphan frames (see the file comment). */
const INTENT_MARK = 'i-';
const ORPHAN_MARK = 'o-';
const UNCONFIRMED_MARK = 'u-';
const isIntentFrame = (id: string) =>
  id.startsWith(INTENT_MARK) || id.startsWith(ORPHAN_MARK) || id.startsWith(UNCONFIRMED_MARK);

function entryIdsOf(frameId: string): string[] {
  const at = frameId.lastIndexOf(BATCH_MARK);
  if (at < 0) return [frameId];
  const n = Number(frameId.slice(at + 1));
  return Number.isInteger(n) && n > 0 && n <= 10_000 ? Array.from({ length: n }, (_, i) => `${frameId}#${i}`) : [];
}

/** Splits frames into key frames, intent/orphan frames and the set of cleared ids. */
function liveFrames(frames: Frame[]): { data: Frame[]; intents: Frame[]; cleared: Set<string> } {
  const cleared = new Set<string>();
  const data: Frame[] = [];
  const intents: Frame[] = [];
  for (const f of frames) {
    if (isIntentFrame(f.id)) {
      intents.push(f);
      continue;
    }
    if (f.id !== CLEARED_FRAME_ID) {
      data.push(f);
      continue;
    }
    try {
      const ids: unknown = JSON.parse(Buffer.from(f.body).toString('utf8'));
      if (Array.isArray(ids)) for (const id of ids) if (typeof id === 'string') cleared.add(id);
    } catch {
      // an unreadable list clears nothing: keys stay pending, never lost
    }
  }
  return { data, intents, cleared };
}

/** The entries of one decrypted frame (v1: one record; v2: a batch), checked against its id. */
function parseFrameEntries(plain: Uint8Array, frameId: string): JournalEntry[] | undefined {
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(plain).toString('utf8'));
  } catch {
    return undefined;
  }
  if (!v || typeof v !== 'object') return undefined;
  const o = v as { v?: unknown; entries?: unknown };
  if (o.v !== 2) {
    const one = toEntry(o, frameId);
    return one ? [one] : undefined;
  }
  const ids = entryIdsOf(frameId);
  if (!Array.isArray(o.entries) || o.entries.length !== ids.length) return undefined;
  const out: JournalEntry[] = [];
  for (const [i, e] of o.entries.entries()) {
    const entry = toEntry(e, ids[i]!);
    if (!entry) return undefined;
    out.push(entry);
  }
  return out;
}

function validateRecord(r: JournalRecord): void {
  const bad = (why: string): SecretStoreError =>
    new SecretStoreError(`invalid journal record: ${why}`, { code: 'INVALID_ARGUMENT' });
  if (typeof r.storeUri !== 'string' || r.storeUri === '') throw bad('storeUri must be a non-empty string');
  if (typeof r.name !== 'string' || r.name === '') throw bad('name must be a non-empty string');
  if (typeof r.value !== 'string' || r.value === '') throw bad(`value of '${r.name}' must be a non-empty string`);
  if (!r.meta || typeof r.meta !== 'object') throw bad(`metadata of '${r.name}' missing`);
}

function toEntry(v: unknown, id: string): JournalEntry | undefined {
  if (!v || typeof v !== 'object') return undefined;
  const o = v as Record<string, unknown>;
  if (o.id !== id) return undefined; // a frame's body must belong to its header's id
  if (typeof o.storeUri !== 'string' || typeof o.name !== 'string' || typeof o.value !== 'string') return undefined;
  if (!o.meta || typeof o.meta !== 'object' || typeof o.createdAt !== 'string') return undefined;
  // A raw key read back (recovery, the journal's flush) is redacted by value from here on, as when it was issued.
  registerSecret(o.value, 'raw key');
  return {
    id,
    storeUri: o.storeUri,
    name: o.name,
    value: o.value,
    meta: o.meta as SecretMetadata,
    createdAt: o.createdAt,
  };
}
