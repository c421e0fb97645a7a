// The inventory a configuration keeps in the service (engine/inventory.ts), at fleet size: 100,000
// clients of one environment fit in records within the service's request limit, read back
// exactly through the live reader's list, and a write killed between its parts and its head
// leaves the previous generation in force. The CLI's sealed copy keeps the mark of the records it
// was written with: records of that mark hold its entries and are not decoded; any others are.
// Against the emulator over HTTP.
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KmsClient } from '../../src/api/client.js';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { MAX_BODY_BYTES } from '../../src/emulator/server.js';
import {
  cliInventory,
  cliInventoryFile,
  holdFromService,
  inventoryRecordPath,
  inventoryRecords,
  inventorySealKey,
  keepRunInventory,
  RECORD_BUDGET,
  sealHolds,
  serviceInventory,
  writeServiceInventory,
} from '../../src/engine/inventory.js';
import { address, type LiveRecord } from '../../src/model/index.js';
import { InventoryIndex, parseInventory, type Inventory, type InventoryEntry } from '../../src/plan/inventory.js';
import { patient } from '../support/patience.js';
import { scratchDir } from '../support/scratch.js';

const API_KEY = 'sk_test_inventoryrecords01234';
const OWNER = 'fleet-config';
const PE = 'fleet-production';
let emu: RunningEmulator;
let api: KmsClient;

const clients = (n: number): InventoryEntry[] =>
  Array.from({ length: n }, (_, i) => ({
    kind: 'client',
    address: address.client(PE, `c${i}`),
    projectEnv: PE,
    id: randomUUID(),
  }));
const endpoint = (p: string): InventoryEntry => ({
  kind: 'endpoint',
  address: address.endpoint(PE, 'GET', p),
  projectEnv: PE,
});

/** The records as the live reader keeps them (src/live/read.ts). */
const read = async (pe = PE): Promise<LiveRecord[]> =>
  (await api.listEndpoints(pe))
    .filter((e) => e.path.startsWith('/__kms-sync/inventory/'))
    .map((e) => ({ projectEnv: pe, path: e.path, metadata: e.metadata as LiveRecord['metadata'] }));

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  api = new KmsClient({ baseUrl: emu.url, apiKey: API_KEY });
  const made = await fetch(`${emu.url}/project`, {
    method: 'POST',
    headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
    body: JSON.stringify({
      slug: 'fleet',
      name: 'Fleet',
      envs: [{ type: 'production', url: 'https://f.example', templates: [] }],
    }),
  });
  expect(made.status).toBe(201);
});

afterAll(async () => {
  await api?.close();
  await emu?.close();
});

describe("a configuration's inventory in the service", () => {
  it(
    '100,000 clients of one environment: 12 records within the request limit, read back exactly',
    async () => {
      const entries = [...clients(100_000), endpoint('/orders'), endpoint('/orders/{id}')];
      const bodies = inventoryRecords(OWNER, PE, entries, { generation: 'g1', now: new Date() });
      const sizes = bodies.map((b) => Buffer.byteLength(JSON.stringify({ metadata: b })));
      expect(bodies).toHaveLength(12);
      for (const s of sizes) expect(s).toBeLessThanOrEqual(RECORD_BUDGET + 1024);
      expect(Math.max(...sizes)).toBeLessThan(MAX_BODY_BYTES / 4);

      emu.resetCounts();
      expect(await writeServiceInventory(api, OWNER, PE, entries, undefined, new Date())).toBe('written');
      // Made four to a request, the head in the last after the parts: 3 requests, each within the limit.
      expect(emu.counts()).toEqual({ 'POST /endpoint': 3 });
      const back = serviceInventory(await read(), PE, OWNER)!;
      expect(back.complete).toBe(true);
      expect(back.paths).toHaveLength(12);
      expect(back.clients.sort()).toEqual(entries.flatMap((e) => (e.id ? [e.id] : [])).sort());
      expect(back.endpoints.sort()).toEqual(['GET:/orders', 'GET:/orders/{id}']);
      // Nothing changed: nothing written.
      expect(await writeServiceInventory(api, OWNER, PE, entries, back, new Date())).toBe('unchanged');
    },
    patient(60_000),
  );

  it(
    'a write killed after its parts and before its head leaves the previous generation in force; the next write cleans up',
    async () => {
      const before = serviceInventory(await read(), PE, OWNER)!;
      const next = clients(30_000);
      // What a killed write leaves: the new generation's parts, no new head.
      const torn = inventoryRecords(OWNER, PE, next, { generation: 'torn', now: new Date() });
      expect(torn.length).toBeGreaterThan(1);
      for (const [i, b] of torn.entries())
        if (i > 0)
          await api.createEndpoints(PE, [
            {
              method: 'POST',
              path: `${inventoryRecordPath(OWNER)}/torn/${i}`,
              name: 'kms-sync inventory',
              metadata: b,
            },
          ]);
      const seen = serviceInventory(await read(), PE, OWNER)!;
      expect(seen.generation).toBe(before.generation);
      expect(seen.clients.sort()).toEqual(before.clients.sort());
      expect(seen.paths.length).toBe(before.paths.length + torn.length - 1);

      // The next apply writes a new generation and removes the old one and the torn parts.
      expect(await writeServiceInventory(api, OWNER, PE, next, seen, new Date())).toBe('written');
      const after = serviceInventory(await read(), PE, OWNER)!;
      expect(after.complete).toBe(true);
      expect(after.paths).toHaveLength(torn.length);
      expect(after.clients.sort()).toEqual(next.map((e) => e.id!).sort());
      // Another owner's records are not this one's.
      expect(serviceInventory(await read(), PE, 'someone-else')).toBeUndefined();
    },
    patient(60_000),
  );

  it(
    'a request of records refused (a head the read did not see) or whose answer was lost is made again record by record',
    async () => {
      const owner = 'batch-config';
      const first = clients(30_000);
      emu.resetCounts();
      expect(await writeServiceInventory(api, owner, PE, first, undefined, new Date())).toBe('written');
      expect(emu.counts()).toEqual({ 'POST /endpoint': 1 });
      const one = serviceInventory(await read(), PE, owner)!;
      expect(one.paths).toHaveLength(4);

      // The head is there, though the read (none) did not see it: the request is refused whole (409),
      // then each record is made, the head written over last.
      const second = clients(30_000);
      emu.resetCounts();
      expect(await writeServiceInventory(api, owner, PE, second, undefined, new Date())).toBe('written');
      expect(emu.counts()).toEqual({ 'POST /endpoint': 5, 'PUT /endpoint/{method_path}': 1 });
      const two = serviceInventory(await read(), PE, owner)!;
      expect(two.complete).toBe(true);
      expect(two.generation).not.toBe(one.generation);
      expect(two.clients.sort()).toEqual(second.map((e) => e.id!).sort());
      // The first generation's parts, which that write did not know of, are left to the next one.
      expect(two.paths).toHaveLength(7);

      // The parts' request takes effect and its answer is lost: each part is made again (there: written
      // over), then the head; the records of both earlier generations go.
      const third = clients(30_000);
      emu.addFault({ method: 'POST', route: '/endpoint', mode: 'drop-after-commit' });
      expect(await writeServiceInventory(api, owner, PE, third, two, new Date())).toBe('written');
      const three = serviceInventory(await read(), PE, owner)!;
      expect(three.complete).toBe(true);
      expect(three.paths).toHaveLength(4);
      expect(three.clients.sort()).toEqual(third.map((e) => e.id!).sort());
    },
    patient(60_000),
  );

  it(
    "the CLI's copy keeps its records' mark under a seal: records of that mark are not decoded, others are and are written again",
    async () => {
      const owner = 'marked-config';
      const conn = { api, sealKey: inventorySealKey(API_KEY) };
      const dir = scratchDir();
      const file = cliInventoryFile(dir);
      let owned = [...clients(10_000), endpoint('/marked')];
      let ids = owned.flatMap((e) => (e.id ? [e.id] : [])).sort();
      const plan = { operations: [], unmanaged: [], warnings: [] } as never;
      const keep = async (serviceRead: Map<string, NonNullable<ReturnType<typeof serviceInventory>>>, known?: object) =>
        expect(
          await keepRunInventory(conn, {
            owner,
            scan: { owned, envsRead: [PE] },
            serviceRead,
            plan,
            desired: undefined,
            file,
            ...(known ?? {}),
          }),
        ).toEqual([]);
      const records = async () => ({ records: await read() });
      /** What a plan finds: the local copy's index, the records read with it, and the ids it holds. */
      const planned = async () => {
        const local = await cliInventory(dir, owner, conn.sealKey, (line) => {
          throw new Error(line);
        });
        const serviceRead = holdFromService(local.index, await records(), owner);
        return { local, serviceRead, held: local.index.portable().clients.sort() };
      };

      // The first apply writes the records, then the copy with their mark.
      await keep(new Map());
      const first = readFileSync(file, 'utf8');
      const copy = JSON.parse(first) as Inventory;
      const records1 = serviceInventory((await records()).records, PE, owner)!;
      expect(copy.service).toEqual({ [PE]: records1.mark });
      expect(records1.mark).toMatch(new RegExp(`^${records1.generation}\\.2\\.`));

      // The next plan finds them with that mark: not decoded, and the index holds what a decode gives.
      let p = await planned();
      expect(p.local.index.serviceMark(PE)).toBe(records1.mark);
      expect(p.serviceRead.get(PE)).toMatchObject({ asLocal: true, clients: [], endpoints: [], complete: true });
      expect(p.held).toEqual(ids);
      const decoded = new InventoryIndex(parseInventory(copy)!.entries);
      holdFromService(decoded, await records(), owner);
      expect(decoded.portable().clients.sort()).toEqual(p.held);
      // An apply that changes nothing writes neither.
      await keep(p.serviceRead, { known: p.local.known });
      expect(readFileSync(file, 'utf8')).toBe(first);
      expect(serviceInventory((await records()).records, PE, owner)!.paths).toEqual(records1.paths);

      // A client more (an apply that created one): records of the mark are read as the copy's entries, and written again.
      const [extra] = clients(1);
      owned = [...owned, extra!];
      ids = [...ids, extra!.id!].sort();
      await keep(p.serviceRead, { known: p.local.known });
      const grown = serviceInventory((await records()).records, PE, owner)!;
      expect(grown.generation).not.toBe(records1.generation);
      expect(grown.clients.sort()).toEqual(ids);
      p = await planned();
      expect(p.local.index.serviceMark(PE)).toBe(grown.mark);
      expect(p.serviceRead.get(PE)!.asLocal).toBe(true);

      // The head changed in the service with its generation kept (a hand edit): another mark, decoded, and
      // written again by the next apply, whose copy carries the new records' mark.
      const head = inventoryRecordPath(owner);
      const headBody = (await records()).records.find((r) => r.path === head)!.metadata!;
      const cut = Buffer.from(headBody.clients as string, 'base64url')
        .subarray(16)
        .toString('base64url');
      await api.updateEndpoint(PE, `POST:${head}`, { metadata: { ...headBody, clients: cut } });
      p = await planned();
      const edited = p.serviceRead.get(PE)!;
      expect(edited.asLocal).toBeUndefined();
      expect(edited.generation).toBe(grown.generation);
      expect(edited.clients).toHaveLength(ids.length - 1);
      await keep(p.serviceRead, { known: p.local.known });
      const records2 = serviceInventory((await records()).records, PE, owner)!;
      expect(records2.generation).not.toBe(grown.generation);
      expect(records2.clients.sort()).toEqual(ids);
      const second = JSON.parse(readFileSync(file, 'utf8')) as Inventory;
      expect(second.service).toEqual({ [PE]: records2.mark });
      expect(second.entries).toHaveLength(copy.entries.length + 1);

      // Marks under a seal that does not hold (edited, or written with another credential) are not believed;
      // the entries' seal still holds (it covers them alone, as a reader that knows no marks checks it).
      const forged = { ...second, service: { [PE]: records1.mark! } };
      writeFileSync(file, `${JSON.stringify(forged)}\n`);
      p = await planned();
      expect(p.local.index.serviceMark(PE)).toBeUndefined();
      expect(p.serviceRead.get(PE)!.asLocal).toBeUndefined();
      expect(p.held).toEqual(ids);
      expect(p.local.known.sealed).toBe(true);
      const { service: _s, serviceSeal: _ss, ...unmarked } = second;
      expect(sealHolds(parseInventory(unmarked)!, conn.sealKey)).toBe(true);
    },
    patient(60_000),
  );
});
