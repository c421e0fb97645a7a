// The inventory's next state (plan/inventory.ts afterApply, nextInventory) is made without a key
// string per entry: afterApply leaves a scan that an apply did not change as it is, and
// nextInventory keeps one entry per key in a map per kind. Both must give what the plain map of
// `${kind} ${id ?? address}` keys gives (the form they had), on random scans, applies and
// previous inventories: duplicates, deletes, replaces, claims, clients without ids. The scan's
// entries the previous inventory has are handed out again (ownedEntries with its index), and a
// next inventory that is the previous one is known without the map: the same entries either way.
import { describe, expect, it } from 'vitest';
import {
  address,
  OWNER_ID_KEY,
  OWNER_MARKER_KEY,
  OWNER_MARKER_VALUE,
  ownershipOf,
  type DesiredState,
  type JsonObject,
  type LiveState,
} from '../../src/model/index.js';
import {
  afterApply,
  InventoryIndex,
  madePlain,
  nextInventory,
  ownedEntries,
  parseInventory,
  plainEntries,
  type Inventory,
  type InventoryEntry,
  type InventoryScan,
} from '../../src/plan/inventory.js';
import type { Operation, Plan } from '../../src/plan/types.js';
import { xorshift32 } from '../support/xorshift.js';

const OWNER = 'next-config';
const key = (e: InventoryEntry) => `${e.kind} ${e.id ?? e.address}`;

/** afterApply as it was: every entry keyed in one map. */
function referenceAfterApply(scan: InventoryScan, done: Operation[], createdIds: ReadonlyMap<string, string>) {
  const owned = new Map(scan.owned.map((e) => [key(e), e]));
  for (const op of done) {
    if ((op.kind !== 'client' && op.kind !== 'endpoint') || !op.projectEnv) continue;
    const k = (id?: string) => `${op.kind} ${op.kind === 'client' ? id : op.address}`;
    if (op.action === 'delete' || op.action === 'replace') owned.delete(k(op.live?.id));
    if (op.action === 'delete') continue;
    const id = op.kind === 'client' ? (op.action === 'create' ? createdIds.get(op.address) : op.live?.id) : undefined;
    if (op.kind === 'client' && !id) continue;
    const metadata = (op.after as { metadata?: JsonObject } | null)?.metadata;
    if (op.action === 'create' || op.action === 'replace' || metadata?.[OWNER_ID_KEY] === OWNER)
      owned.set(k(id), { kind: op.kind, address: op.address, projectEnv: op.projectEnv, ...(id ? { id } : {}) });
  }
  return [...owned.values()];
}

/** nextInventory's entries as they were made: one map of keys over kept, found and recorded entries, sorted. */
const referenceEntries = (all: InventoryEntry[]) =>
  [...new Map(all.map((e) => [key(e), e])).values()].sort((a, b) =>
    a.address < b.address ? -1 : a.address > b.address ? 1 : 0,
  );

describe("the inventory's next state", () => {
  it('is the one a map of every key gives, with or without the apply changing what is owned', () => {
    const next = xorshift32(11);
    let unchanged = 0;
    for (let round = 0; round < 400; round++) {
      const pe = `p-e${next(2)}`;
      const entry = (): InventoryEntry => {
        const n = next(12);
        if (next(3) === 0)
          return {
            kind: 'endpoint',
            address: `endpoint.${pe}/GET:/r/${n}`,
            projectEnv: pe,
            ...(next(9) ? {} : { id: `x${n}` }),
          };
        // A client without an id (keyed by its address) now and then.
        return next(15) === 0
          ? { kind: 'client', address: `client.${pe}/c${n}`, projectEnv: pe }
          : { kind: 'client', address: `client.${pe}/c${n}`, projectEnv: pe, id: `id-${n}` };
      };
      // Duplicates only now and then: most scans hold each key once.
      const owned = Array.from({ length: next(14) }, entry);
      const scan: InventoryScan = {
        owned: next(2) ? [...new Map(owned.map((e) => [key(e), e])).values()] : owned,
        envsRead: [pe],
      };
      const actions = ['update', 'update', 'update', 'create', 'delete', 'replace'] as const;
      const done: Operation[] = Array.from({ length: next(4) }, () => {
        const target = scan.owned.length && next(4) ? scan.owned[next(scan.owned.length)]! : entry();
        const action = next(3) ? 'update' : actions[next(actions.length)]!;
        const claims = next(4) !== 0;
        return {
          // A client renamed now and then: its id keeps the key, its address changes.
          address: next(5) ? target.address : `${target.address}-renamed`,
          kind: next(10) ? target.kind : 'template',
          action,
          ...(next(12) ? { projectEnv: target.projectEnv! } : {}),
          reason: '',
          actionReason: 'changed',
          before: null,
          after: { metadata: claims ? { [OWNER_ID_KEY]: OWNER } : { other: 'x' } },
          changes: [],
          ...(next(8) && target.id ? { live: { id: target.id } } : {}),
        } as unknown as Operation;
      });
      const createdIds = new Map(
        done.filter((op) => op.action === 'create').map((op) => [op.address, `new-${next(3)}`]),
      );
      const after = afterApply(scan, done, createdIds, OWNER);
      expect(after.owned).toEqual(referenceAfterApply(scan, done, createdIds));
      if (after === scan) unchanged++;

      // The previous inventory: entries of this and another environment, and records.
      const previous: Inventory = {
        formatVersion: 1,
        owner: OWNER,
        updatedAt: '',
        entries: [
          ...Array.from({ length: next(6) }, entry),
          { kind: 'client', address: 'client.q-e/c1', projectEnv: 'q-e', id: 'id-1' },
          { kind: 'project', address: 'project.p', applied: 'aaaa' },
          { kind: 'env', address: `env.${pe}`, projectEnv: pe, applied: 'bbbb' },
        ],
      };
      const desired: DesiredState = {
        projects: [{ slug: 'p', name: 'p' }],
        envs: [{ project: 'p', type: pe.slice(2), projectEnv: pe, url: 'https://x.test' }],
        templates: [],
        clients: [],
        endpoints: [],
        stores: [],
      } as unknown as DesiredState;
      const plan = { operations: next(2) ? [{ address: `env.${pe}` }] : [] } as unknown as Plan;
      const inv = nextInventory(previous, after, desired, plan, OWNER, { now: new Date(0) });
      // What it keeps and records is nextInventory's own; the entries are those one map of keys gives.
      const kept = previous.entries.filter((e) => e.projectEnv === 'q-e');
      const records = inv.entries.filter((e) => e.kind === 'project' || e.kind === 'env');
      expect(inv.entries).toEqual(referenceEntries([...kept, ...after.owned, ...records]));
    }
    // Both ways of afterApply were taken.
    expect(unchanged).toBeGreaterThan(40);
    expect(unchanged).toBeLessThan(360);
  });

  it('from entries handed out again is the one fresh entries give, and the previous list itself when nothing changed', () => {
    const next = xorshift32(37);
    const desired = {
      projects: [{ slug: 'p', name: 'p' }],
      envs: [{ project: 'p', type: 'e0', projectEnv: 'p-e0', url: 'https://x.test' }],
      templates: [],
      clients: [],
      endpoints: [],
      stores: [],
    } as unknown as DesiredState;
    const plan = { operations: [], unmanaged: [], warnings: [] } as unknown as Plan;
    const now = { now: new Date(0) };
    // The records nextInventory makes of `desired`: the previous list holds them as made.
    const records = nextInventory(undefined, { owned: [], envsRead: [] }, desired, plan, OWNER, now).entries;
    let same = 0;
    let held = 0;
    for (let round = 0; round < 300; round++) {
      const envs = next(3) ? ['p-e0'] : ['p-e0', 'p-e1'];
      const marker = (): JsonObject | undefined =>
        next(8) === 0
          ? next(2)
            ? undefined
            : { [OWNER_MARKER_KEY]: OWNER_MARKER_VALUE }
          : { [OWNER_MARKER_KEY]: OWNER_MARKER_VALUE, [OWNER_ID_KEY]: next(10) ? OWNER : 'other' };
      const state = {
        projects: [],
        envs: envs.map((projectEnv) => ({ projectEnv })),
        templates: [],
        clients: envs.flatMap((pe) =>
          Array.from({ length: next(12) }, (_, i) => ({
            id: `id-${pe}-${i}`,
            projectEnv: pe,
            // A name twice now and then (two clients of one name).
            name: `c${next(20) ? i : 0}`,
            metadata: marker(),
            keys: [],
          })),
        ),
        endpoints: envs.flatMap((pe) =>
          Array.from({ length: next(4) }, (_, i) => ({
            projectEnv: pe,
            method: 'GET',
            path: `/r/${i}`,
            metadata: marker(),
          })),
        ),
      } as unknown as LiveState;
      state.clients.sort((a, b) => (a.projectEnv + a.name < b.projectEnv + b.name ? -1 : 1));
      // The previous inventory: what the state owns, as a sealed copy's text gives it, sorted, then changed now and then.
      const fresh = ownedEntries(state, OWNER);
      let entries = [
        ...fresh.map((e) => ({ ...e })),
        ...records,
        { kind: 'client', address: 'client.q-e/c1', projectEnv: 'q-e', id: 'q1' },
      ];
      // Clients whose markers leave their owner to the inventory: held now and then.
      for (const c of state.clients)
        if (
          ownershipOf(c.metadata, OWNER, true).kind === 'ours' &&
          ownershipOf(c.metadata, OWNER).kind !== 'ours' &&
          next(2)
        )
          entries.push({
            kind: 'client',
            address: address.client(c.projectEnv, c.name),
            projectEnv: c.projectEnv,
            id: c.id,
          });
      const change = next(10);
      if (change === 0 && entries.length > 3) entries.splice(next(entries.length), 1);
      if (change === 1)
        entries.push({ kind: 'client', address: `client.p-e0/c${next(12)}`, projectEnv: 'p-e0', id: 'gone' });
      if (change === 2 && fresh.length) entries[next(fresh.length)] = { ...fresh[next(fresh.length)]!, id: 'other-id' };
      if (change === 3) entries = entries.map((e) => (e.kind === 'env' ? { ...e, applied: 'changed' } : e));
      entries.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
      if (change === 4)
        entries.push(
          ...entries.splice(
            entries.findIndex((e) => e.projectEnv === 'q-e'),
            1,
          ),
        );
      const previous = parseInventory(
        JSON.parse(JSON.stringify({ formatVersion: 1, owner: OWNER, updatedAt: '', entries })),
      )!;
      expect(plainEntries(previous.entries)).toBe(true);
      const index = new InventoryIndex(previous.entries);
      // Held: looked up where the markers leave ownership to the inventory, as the eager index did.
      index.markHeld(state);
      const ids = new Set(previous.entries.flatMap((e) => (e.kind === 'client' && e.id ? [e.id] : [])));
      for (const c of state.clients) {
        expect(ownershipOf(c.metadata, OWNER, c.held)).toEqual(ownershipOf(c.metadata, OWNER, ids.has(c.id)));
        if (c.held) held++;
      }
      const again = ownedEntries(state, OWNER, index);
      const reference = ownedEntries(state, OWNER);
      expect(again).toEqual(reference);
      const scan = { owned: madePlain([...again]), envsRead: envs };
      const inv = nextInventory(previous, scan, desired, plan, OWNER, now);
      const made = nextInventory(
        previous,
        { owned: madePlain([...reference]), envsRead: envs },
        desired,
        plan,
        OWNER,
        now,
      );
      expect(inv).toEqual(made);
      if (inv.entries === previous.entries) same++;
    }
    // The previous list was known as it is in some rounds, not in all.
    expect(same).toBeGreaterThan(30);
    expect(same).toBeLessThan(280);
    expect(held).toBeGreaterThan(10);
  });
});
