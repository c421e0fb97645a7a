import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AgeKeys } from '../../src/secrets/age-keys.js';
import { Journal, defaultJournalPath, scanJournal, type JournalRecord } from '../../src/secrets/journal.js';
import { SopsFileStore } from '../../src/secrets/sops/file-store.js';
import { SecretStoreError } from '../../src/secrets/store.js';
import { FaultyStore, MemoryStore } from './fault-store.js';
import { expectNoSecrets, fakeKey, meta, sandbox, type Sandbox } from './helpers.js';

let sb: Sandbox;
let file: string;
const values: string[] = [];

beforeEach(async () => {
  sb = await sandbox();
  file = defaultJournalPath(path.join(sb.dir, 'config'));
});
afterEach(async () => {
  await sb.cleanup();
});

function record(name: string, storeUri = 'sops:secrets.yaml'): JournalRecord {
  const value = fakeKey();
  values.push(value);
  return { storeUri, name, value, meta: meta(name) };
}

async function rejection(p: Promise<unknown>): Promise<SecretStoreError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(SecretStoreError);
    const e = err as SecretStoreError;
    expectNoSecrets(`${e.message}\n${e.stack ?? ''}`, values);
    return e;
  }
  throw new Error('expected a rejection');
}

describe('journal', () => {
  it('lives at .kms-sync/journal beside the config', () => {
    expect(defaultJournalPath('/repo/infra')).toBe('/repo/infra/.kms-sync/journal');
  });

  it('append → pending → clear; encrypted at rest, 0600, removed when empty', async () => {
    const j = new Journal(file, { env: sb.env });
    expect(await j.pending()).toEqual([]);
    const r1 = record('e/c/k1');
    const r2 = record('e/c/k2');
    const id1 = await j.append(r1);
    const id2 = await j.append(r2);
    expect(id1).not.toBe(id2);

    const raw = await fs.readFile(file);
    expect(raw.includes(Buffer.from(r1.value))).toBe(false);
    expect(raw.includes(Buffer.from('e/c/k1'))).toBe(false); // names are encrypted too
    expect((await fs.stat(file)).mode & 0o777).toBe(0o600);
    expect((await fs.stat(path.dirname(file))).mode & 0o777).toBe(0o700);

    const pending = await new Journal(file, { env: sb.env }).pending();
    expect(pending.map((e) => [e.id, e.name, e.value, e.storeUri])).toEqual([
      [id1, r1.name, r1.value, r1.storeUri],
      [id2, r2.name, r2.value, r2.storeUri],
    ]);
    expect(pending[0]?.meta).toMatchObject({ projectEnv: 'e', client: 'c', key: 'k1', expiresAt: null });

    await j.clear([id1]);
    expect((await j.pending()).map((e) => e.id)).toEqual([id2]);
    await j.clear([id2]);
    expect(await j.pending()).toEqual([]);
    await expect(fs.stat(file)).rejects.toThrow();
    expect(await fs.readdir(path.dirname(file))).toEqual([]);
  });

  it('appendMany writes a batch as one frame (one encryption), torn as a whole or not at all', async () => {
    const j = new Journal(file, { env: sb.env });
    expect(await j.appendMany([])).toEqual([]);
    const first = await j.append(record('e/c/0'));
    const rs = [record('e/c/a'), record('e/c/b'), record('e/c/c')];
    const ids = await j.appendMany(rs);
    expect(new Set(ids).size).toBe(3);
    expect((await j.pending()).map((e) => [e.id, e.value])).toEqual([
      [first, expect.any(String)],
      ...ids.map((id, i) => [id, rs[i]?.value]),
    ]);
    const buf = await fs.readFile(file);
    const frames = scanJournal(buf).frames;
    expect(frames).toHaveLength(2);
    expect(buf.includes(Buffer.from(rs[0]!.value))).toBe(false); // encrypted, like every frame
    // A batch torn by a crash was never acknowledged: it goes as a whole, earlier frames stay.
    await fs.writeFile(file, buf.subarray(0, (frames[1]?.start ?? 0) + 5));
    expect(await j.pendingIds()).toEqual([first]);
    expect(
      (await rejection(j.appendMany([rs[0] as JournalRecord, { ...(rs[1] as JournalRecord), value: '' }]))).code,
    ).toBe('INVALID_ARGUMENT');
    expect(await j.pendingIds()).toEqual([first]); // an invalid batch writes nothing
  });

  it('clears entries of a batch one by one (ids only in the clear list), then drops the batch', async () => {
    const j = new Journal(file, { env: sb.env });
    const rs = [record('e/c/a'), record('e/c/b'), record('e/c/c')];
    const ids = await j.appendMany(rs);
    await j.clear([ids[1]!]);
    expect((await j.pending()).map((e) => e.name)).toEqual([rs[0]!.name, rs[2]!.name]);
    expect(await j.pendingIds()).toEqual([ids[0], ids[2]]);
    const text = await fs.readFile(file);
    for (const r of rs) expect(text.includes(Buffer.from(r.value))).toBe(false);
    // A second journal object sees the same state (it is all on disk).
    expect(await new Journal(file, { env: sb.env }).pendingIds()).toEqual([ids[0], ids[2]]);
    await j.clear([ids[0]!, ids[2]!]);
    expect(await j.pendingIds()).toEqual([]);
    await expect(fs.stat(file)).rejects.toThrow(); // nothing left: the file is gone
  });

  it('ignores a torn tail (crash mid-append) and keeps every earlier entry; the next append trims it', async () => {
    const j = new Journal(file, { env: sb.env });
    const ids = [await j.append(record('e/c/a')), await j.append(record('e/c/b')), await j.append(record('e/c/c'))];
    const full = await fs.readFile(file);
    const frames = scanJournal(full).frames;
    expect(frames.map((f) => f.id)).toEqual(ids);
    for (const cut of [1, 7, 12, 40, (frames[2]?.end ?? 0) - (frames[2]?.start ?? 0) - 1]) {
      await fs.writeFile(file, full.subarray(0, full.length - cut));
      expect((await j.pending()).map((e) => e.id)).toEqual(ids.slice(0, 2));
    }
    const id4 = await j.append(record('e/c/d'));
    expect((await j.pending()).map((e) => e.id)).toEqual([...ids.slice(0, 2), id4]);
    expect(scanJournal(await fs.readFile(file)).damagedBytes).toBe(0);
  });

  it('skips a damaged frame in the middle without losing the frames after it', async () => {
    const j = new Journal(file, { env: sb.env });
    const ids = [await j.append(record('e/c/a')), await j.append(record('e/c/b')), await j.append(record('e/c/c'))];
    const buf = Buffer.from(await fs.readFile(file));
    const mid = scanJournal(buf).frames[1];
    buf[(mid?.start ?? 0) + 20] = (buf[(mid?.start ?? 0) + 20] as number) ^ 0xff;
    await fs.writeFile(file, buf);
    expect((await j.pending()).map((e) => e.id)).toEqual([ids[0], ids[2]]);
    const id4 = await j.append(record('e/c/d'));
    expect((await j.pending()).map((e) => e.id)).toEqual([ids[0], ids[2], id4]);
  });

  it('is encrypted to the same recipients as the store (extra recipients can read it)', async () => {
    const team = await sandbox();
    try {
      const [teamRecipient] = await new AgeKeys({ env: team.env }).recipients();
      const j = new Journal(file, { env: sb.env, recipients: [teamRecipient as string] });
      const r = record('e/c/k');
      await j.append(r);
      expect((await new Journal(file, { env: team.env }).pending())[0]?.value).toBe(r.value);
    } finally {
      await team.cleanup();
    }
  });

  it('refuses (keeps the entries, names no values) when no identity can decrypt them', async () => {
    const j = new Journal(file, { env: sb.env });
    await j.append(record('e/c/k'));
    const stranger = await sandbox();
    try {
      await new AgeKeys({ env: stranger.env }).recipients();
      const err = await rejection(new Journal(file, { env: stranger.env }).pending());
      expect(err.code).toBe('NO_IDENTITY');
      expect(err.message).toContain('1 pending key');
      expect(await j.pendingIds()).toHaveLength(1);
    } finally {
      await stranger.cleanup();
    }
  });

  it('validates records without echoing the value', async () => {
    const j = new Journal(file, { env: sb.env });
    const r = record('e/c/k');
    expect((await rejection(j.append({ ...r, storeUri: '' }))).code).toBe('INVALID_ARGUMENT');
    expect((await rejection(j.append({ ...r, value: '' }))).code).toBe('INVALID_ARGUMENT');
  });
});

describe('journal flush', () => {
  it('writes pending entries to their stores and clears them; a failing store keeps its entries', async () => {
    const j = new Journal(file, { env: sb.env });
    const good = new MemoryStore('memory://good');
    const badBackend = new MemoryStore('memory://bad');
    const bad = new FaultyStore(badBackend);
    const g1 = record('e/c/g1', 'good');
    const g2 = record('e/c/g2', 'good');
    const b1 = record('e/c/b1', 'bad');
    const ids = { g1: await j.append(g1), b1: await j.append(b1), g2: await j.append(g2) };
    const resolve = (uri: string) => (uri === 'good' ? good : bad);

    const res = await j.flush(resolve);
    expect(res.flushed.map((f) => f.id).sort()).toEqual([ids.g1, ids.g2].sort());
    expect(good.puts).toBe(1); // one batched putMany per store
    expect(good.data.get('e/c/g1')?.value).toBe(g1.value);
    expect(good.data.get('e/c/g2')?.value).toBe(g2.value);
    expect(res.failed).toHaveLength(1);
    expect(res.failed[0]).toMatchObject({ storeUri: 'bad', ids: [ids.b1], names: ['e/c/b1'] });
    expect(res.failed[0]?.error).toBeInstanceOf(SecretStoreError);
    expectNoSecrets(res.failed[0]?.error.message ?? '', values);
    expect(await j.pendingIds()).toEqual([ids.b1]);

    // The next run: the store is back, the journal is flushed and emptied.
    bad.failing = false;
    const again = await new Journal(file, { env: sb.env }).flush(resolve);
    expect(again.failed).toEqual([]);
    expect(again.flushed.map((f) => f.id)).toEqual([ids.b1]);
    expect(await badBackend.read('e/c/b1')).toBe(b1.value);
    expect(await j.pendingIds()).toEqual([]);
  });

  it('a resolver that throws a plain error: entries stay, the error carries no value', async () => {
    const j = new Journal(file, { env: sb.env });
    const r = record('e/c/k', 'vault://nowhere');
    await j.append(r);
    const res = await j.flush(() => {
      throw new Error(`cannot open store (value ${r.value} must not leak)`);
    });
    expect(res.failed).toHaveLength(1);
    expectNoSecrets(res.failed[0]?.error.message ?? '', values);
    expect(await j.pendingIds()).toHaveLength(1);
  });

  it('a later key for the same name supersedes an earlier one', async () => {
    const j = new Journal(file, { env: sb.env });
    const first = record('e/c/k', 'mem');
    const second = { ...record('e/c/k', 'mem') };
    await j.append(first);
    await j.append(second);
    const mem = new MemoryStore();
    const res = await j.flush(() => mem);
    expect(res.flushed).toHaveLength(2);
    expect(await mem.read('e/c/k')).toBe(second.value);
    expect(await j.pendingIds()).toEqual([]);
  });

  it('end to end with the SOPS store: journal first, store write fails, next run flushes it', async () => {
    const storePath = path.join(sb.dir, 'secrets.yaml');
    const real = new SopsFileStore(storePath, { env: sb.env });
    const faulty = new FaultyStore(real);
    const j = new Journal(file, { env: sb.env });
    const r = record(real.secretName('acme-prod/web/primary'), `sops://${storePath}`);
    // The apply order: journal (fsync) → store → clear.
    const id = await j.append(r);
    await rejection(faulty.putMany([{ name: r.name, value: r.value, meta: r.meta }]));
    expect(await j.pendingIds()).toEqual([id]);
    // Next run, store reachable again:
    const res = await new Journal(file, { env: sb.env }).flush(() => new SopsFileStore(storePath, { env: sb.env }));
    expect(res.failed).toEqual([]);
    expect(await real.read(r.name)).toBe(r.value);
    expect(await j.pendingIds()).toEqual([]);
  });
});
