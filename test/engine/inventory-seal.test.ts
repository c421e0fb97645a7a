// The seal of the CLI's inventory beside the journal (engine/inventory.ts): it covers
// canonicalJson({ owner, entries }) byte for byte, so files sealed before keep their ownership;
// an apply reads the copy twice (at its start, and under the lock after it), and a copy changed
// in between (another shard wrote it, or someone edited it) is read and checked again.
import { createHmac, randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  cliInventory,
  cliInventoryFile,
  inventorySealKey,
  keepInventory,
  sealHolds,
} from '../../src/engine/inventory.js';
import { address, canonicalJson, type JsonObject } from '../../src/model/index.js';
import type { Inventory, InventoryEntry } from '../../src/plan/inventory.js';
import { scratchDir } from '../support/scratch.js';

const KEY = inventorySealKey('sk_test_inventoryseal012345');
const OWNER = 'seal-config';
const PE = 'shop-production';
const client = (name: string, id = randomUUID()): InventoryEntry => ({
  kind: 'client',
  address: address.client(PE, name),
  projectEnv: PE,
  id,
});
/** The seal as the first sealed inventories were made: an HMAC of canonicalJson. */
const canonicalSeal = (owner: string, entries: readonly object[]) =>
  createHmac('sha256', KEY)
    .update(canonicalJson({ owner, entries: entries as JsonObject[] }))
    .digest('base64url');
const inventory = (entries: InventoryEntry[], seal?: string): Inventory => ({
  formatVersion: 1,
  owner: OWNER,
  updatedAt: '2026-11-28T00:00:00.000Z',
  entries,
  ...(seal ? { seal } : {}),
});
const noWarning = (line: string) => {
  throw new Error(`unexpected warning: ${line}`);
};

describe("the CLI inventory's seal", () => {
  it('holds for a copy sealed over canonicalJson, whatever its key order, odd fields and characters', () => {
    const entries: InventoryEntry[] = [
      client('acme'),
      { kind: 'endpoint', address: address.endpoint(PE, 'GET', '/orders/{id}'), projectEnv: PE },
      { kind: 'project', address: address.project('shop'), applied: 'abcdef0123456789' },
      // Key order of a hand-written file, and text that JSON escapes.
      { projectEnv: PE, id: 'c-"quoted"\\é\u2028', address: address.client(PE, 'zeta ü'), kind: 'client' },
    ];
    expect(sealHolds(inventory(entries, canonicalSeal(OWNER, entries)), KEY)).toBe(true);
    // A field the format does not know, and a value that is not a string: still canonicalJson's.
    const odd = [...entries, { ...client('extra'), note: { b: 1, a: [2, 'x'] } } as unknown as InventoryEntry];
    expect(sealHolds(inventory(odd, canonicalSeal(OWNER, odd)), KEY)).toBe(true);
    const numeric = [...entries, { ...client('n'), id: 7 } as unknown as InventoryEntry];
    // canonicalJson keeps a "__proto__" key as a field (JSON.parse gives one), not as a prototype.
    expect(canonicalJson(JSON.parse('{"b":1,"__proto__":{"a":2}}'))).toBe('{"__proto__":{"a":2},"b":1}');
    expect(canonicalJson(JSON.parse('{"__proto__":"x"}'))).not.toBe(canonicalJson({}));
    expect(sealHolds(inventory(numeric, canonicalSeal(OWNER, numeric)), KEY)).toBe(true);
    // Anything changed breaks it: an entry, the owner, another key.
    const seal = canonicalSeal(OWNER, entries);
    expect(sealHolds(inventory([...entries.slice(1), client('acme')], seal), KEY)).toBe(false);
    expect(sealHolds({ ...inventory(entries, seal), owner: 'other' }, KEY)).toBe(false);
    expect(sealHolds(inventory(entries, seal), inventorySealKey('sk_test_another012345678'))).toBe(false);
  });

  it('an apply that changed nothing leaves the file as it was; one changed meanwhile is checked again', async () => {
    const dir = scratchDir();
    const file = cliInventoryFile(dir);
    const owned = [client('acme'), client('globex')];
    const scan = { owned, envsRead: [PE] };
    const plan = { operations: [], unmanaged: [], warnings: [] } as never;
    await keepInventory(file, scan, undefined, plan, OWNER, { now: new Date(), sealKey: KEY });
    const first = readFileSync(file, 'utf8');
    expect(sealHolds(JSON.parse(first) as Inventory, KEY)).toBe(true);

    // Read at the start of a run, kept after it: nothing changed, nothing written.
    let start = await cliInventory(dir, OWNER, KEY, noWarning);
    await keepInventory(file, scan, undefined, plan, OWNER, { now: new Date(), sealKey: KEY, known: start.known });
    expect(readFileSync(file, 'utf8')).toBe(first);
    // A client renamed, or one more: written and sealed again.
    for (const owned2 of [
      [owned[0]!, { ...owned[1]!, address: address.client(PE, 'g2') }],
      [...owned, client('initech')],
    ]) {
      start = await cliInventory(dir, OWNER, KEY, noWarning);
      await keepInventory(file, { owned: owned2, envsRead: [PE] }, undefined, plan, OWNER, {
        now: new Date(),
        sealKey: KEY,
        known: start.known,
      });
      const kept = JSON.parse(readFileSync(file, 'utf8')) as Inventory;
      expect(sealHolds(kept, KEY)).toBe(true);
      expect(kept.entries.map((e) => e.address).sort()).toEqual(owned2.map((e) => e.address).sort());
    }
    await keepInventory(file, scan, undefined, plan, OWNER, { now: new Date(), sealKey: KEY });

    // Forged between the run's first read and its end (a client of someone else's added, the seal
    // kept): the copy under the lock is not the one checked at the start, so its seal is checked
    // again and its entries are not carried over.
    start = await cliInventory(dir, OWNER, KEY, noWarning);
    const forged = JSON.parse(first) as Inventory;
    const foreign = client('foreign');
    forged.entries.push({
      ...foreign,
      projectEnv: 'other-production',
      address: address.client('other-production', 'x'),
    });
    writeFileSync(file, JSON.stringify(forged));
    await keepInventory(file, scan, undefined, plan, OWNER, { now: new Date(), sealKey: KEY, known: start.known });
    const after = JSON.parse(readFileSync(file, 'utf8')) as Inventory;
    expect(sealHolds(after, KEY)).toBe(true);
    expect(after.entries.map((e) => e.id)).not.toContain(foreign.id);
    expect(after.entries.map((e) => e.id).sort()).toEqual(owned.map((e) => e.id).sort());
  });

  it('a sealed file given a field the format does not know, its seal kept, is refused', async () => {
    const dir = scratchDir();
    const file = cliInventoryFile(dir);
    const owned = [client('acme'), client('globex')];
    const plan = { operations: [], unmanaged: [], warnings: [] } as never;
    await keepInventory(file, { owned, envsRead: [PE] }, undefined, plan, OWNER, { now: new Date(), sealKey: KEY });
    const sealed = readFileSync(file, 'utf8');
    expect((await cliInventory(dir, OWNER, KEY, noWarning)).known.sealed).toBe(true);
    // The seal kept; one entry given one more field (a string, an object).
    const globex = `"address":${JSON.stringify(address.client(PE, 'globex'))}`;
    // "__proto__" too: an assignment of it is dropped, or sets a prototype, where canonicalJson builds
    // the sealed text, so that entry's text would be the sealed one.
    const edits = [`${globex},"note":"x"`, `${globex},"extra":{"id":"x"}`, `${globex},"__proto__":"x"`];
    for (const edit of [...edits, `${globex},"__proto__":{"id":"x"}`]) {
      expect(sealed).toContain(globex);
      writeFileSync(file, sealed.replace(globex, edit));
      const warnings: string[] = [];
      const read = await cliInventory(dir, OWNER, KEY, (line) => warnings.push(line));
      expect([edit, read.known.sealed]).toEqual([edit, false]);
      expect(warnings.join('\n')).toMatch(/not sealed with this service credential/);
    }
  });

  it('a sealed copy with a field the format does not know is written again in the known form, though its entries are the scan', async () => {
    const dir = scratchDir();
    const file = cliInventoryFile(dir);
    const owned = [client('acme'), client('globex')];
    const plan = { operations: [], unmanaged: [], warnings: [] } as never;
    // Sealed by the credential's holder over canonicalJson, one entry with a note (a later format, a hand edit).
    const odd = [owned[0]!, { ...owned[1]!, note: 'x' } as unknown as InventoryEntry].sort((a, b) =>
      a.address < b.address ? -1 : 1,
    );
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, JSON.stringify(inventory(odd, canonicalSeal(OWNER, odd))));
    const start = await cliInventory(dir, OWNER, KEY, noWarning);
    expect(start.known.sealed).toBe(true);
    await keepInventory(file, { owned, envsRead: [PE] }, undefined, plan, OWNER, {
      now: new Date(),
      sealKey: KEY,
      known: start.known,
    });
    const kept = JSON.parse(readFileSync(file, 'utf8')) as Inventory;
    expect(sealHolds(kept, KEY)).toBe(true);
    expect(kept.entries).toEqual([...owned].sort((a, b) => (a.address < b.address ? -1 : 1)));
    // Written once in the known form, the same scan leaves it as it is.
    const text = readFileSync(file, 'utf8');
    const again = await cliInventory(dir, OWNER, KEY, noWarning);
    await keepInventory(file, { owned, envsRead: [PE] }, undefined, plan, OWNER, {
      now: new Date(),
      sealKey: KEY,
      known: again.known,
    });
    expect(readFileSync(file, 'utf8')).toBe(text);
  });

  it('is checked on the text of a copy as written, and only a text the seal covers byte for byte holds', async () => {
    const dir = scratchDir();
    const file = cliInventoryFile(dir);
    const owned = [client('acme'), client('globex'), client('zeta ü"')];
    const plan = { operations: [], unmanaged: [], warnings: [] } as never;
    await keepInventory(file, { owned, envsRead: [PE] }, undefined, plan, OWNER, { now: new Date(), sealKey: KEY });
    const text = readFileSync(file, 'utf8');
    const inv = JSON.parse(text) as Inventory;
    // Its entries are written as the seal covers them: the seal is an HMAC of that text.
    const entriesText = text.slice(text.indexOf('"entries":') + 10, text.lastIndexOf(',"seal":'));
    expect(createHmac('sha256', KEY).update(`{"entries":${entriesText},"owner":"${OWNER}"}`).digest('base64url')).toBe(
      inv.seal,
    );
    expect((await cliInventory(dir, OWNER, KEY, noWarning)).known.sealed).toBe(true);

    const sealedWith = async (t: string) => {
      writeFileSync(file, t);
      return (await cliInventory(dir, OWNER, KEY, () => undefined)).known.sealed;
    };
    const foreign = {
      kind: 'client',
      address: address.client('other-production', 'x'),
      id: randomUUID(),
      projectEnv: 'other-production',
    };
    // A second `entries` after the sealed one (JSON.parse takes the last): not what was sealed.
    expect(await sealedWith(text.replace(',"seal":', `,"entries":[${JSON.stringify(foreign)}],"seal":`))).toBe(false);
    // Before it: the sealed one is what is read.
    writeFileSync(
      file,
      text.replace('{"formatVersion":1,', `{"entries":[${JSON.stringify(foreign)}],"formatVersion":1,`),
    );
    const first = await cliInventory(dir, OWNER, KEY, () => undefined);
    expect(first.known.sealed).toBe(true);
    expect(first.before!.entries.map((e) => e.id)).not.toContain(foreign.id);
    // Another owner, another entry, another seal.
    expect(await sealedWith(text.replace(`"owner":"${OWNER}"`, '"owner":"other"'))).toBe(false);
    expect(await sealedWith(text.replace(owned[0]!.id!, randomUUID()))).toBe(false);
    // An entry parseInventory leaves out (a kind it does not know), in a text sealed as it is:
    // what was sealed is not what was read.
    const bogus = `${entriesText.slice(0, -1)},{"address":"client.x","kind":"bogus"}]`;
    const bogusSeal = createHmac('sha256', KEY).update(`{"entries":${bogus},"owner":"${OWNER}"}`).digest('base64url');
    expect(await sealedWith(text.replace(entriesText, bogus).replace(inv.seal!, bogusSeal))).toBe(false);
    // A copy written before, its entries' keys in another order: its seal (over canonicalJson) still holds.
    const before = {
      ...inv,
      entries: inv.entries.map((e) => ({ kind: e.kind, address: e.address, projectEnv: e.projectEnv, id: e.id })),
    };
    expect(await sealedWith(`${JSON.stringify(before)}\n`)).toBe(true);
    expect(await sealedWith(text)).toBe(true);
  });
});
