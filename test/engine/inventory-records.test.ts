// The inventory a configuration keeps in the service (engine/inventory.ts), at fleet size: 100,000
// clients of one environment fit in records within the service's request limit, read back
// exactly through the live reader's list, and a write killed between its parts and its head
// leaves the previous generation in force. Against the emulator over HTTP.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KmsClient } from '../../src/api/client.js';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { MAX_BODY_BYTES } from '../../src/emulator/server.js';
import {
  inventoryRecordPath,
  inventoryRecords,
  RECORD_BUDGET,
  serviceInventory,
  writeServiceInventory,
} from '../../src/engine/inventory.js';
import { address, type LiveRecord } from '../../src/model/index.js';
import type { InventoryEntry } from '../../src/plan/inventory.js';
import { patient } from '../support/patience.js';

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
const read = async (): Promise<LiveRecord[]> =>
  (await api.listEndpoints(PE))
    .filter((e) => e.path.startsWith('/__kms-sync/inventory/'))
    .map((e) => ({ projectEnv: PE, path: e.path, metadata: e.metadata as LiveRecord['metadata'] }));

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

      expect(await writeServiceInventory(api, OWNER, PE, entries, undefined, new Date())).toBe('written');
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
});
