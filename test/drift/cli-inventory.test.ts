// Issue 36, "An inventory", for the CLI: what a configuration's applies created or claimed is
// kept in the service (per environment, written under the run lock) and sealed beside the journal,
// so a stripped ownership marker is drift that apply restores, on this runner and on a fresh
// checkout of another; a forged inventory file in the checkout (a pull request can write one)
// never makes a foreign client ours; shards keep their environments' parts. The built CLI against
// the emulator over HTTP.
import { cpSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { serviceInventory } from '../../src/engine/inventory.js';
import { Trace } from '../crash/lib.js';
import { allOutput, RAW_KEY_PATTERN, runCli, startCli, workspace } from '../support/cli.js';
import { patient, waitFor } from '../support/patience.js';

const API_KEY = 'sk_test_cliinventory0123456';
const H = { 'x-api-key': API_KEY, 'content-type': 'application/json' };
const config = (clients: string[], projects = ['shop']) => `apiVersion: kms-sync/v1
owner: shop-config
projects:
${projects
  .map(
    (slug) => `  - slug: ${slug}
    name: ${slug}
    environments:
      - type: production
        url: https://api.${slug}.example
        templates:
          - { name: bronze, rateLimitDay: 1000, maxClients: 50 }
        clients:
${clients.map((c) => `          - { name: ${c}, template: bronze, keys: [{ name: primary }] }`).join('\n')}
        endpoints:
          - { method: GET, path: /orders, name: Orders }
`,
  )
  .join('')}`;

let emu: RunningEmulator;
let dir: string;
const envFor = (d: string): NodeJS.ProcessEnv => ({
  KMS_API_URL: emu.url,
  KMS_API_KEY: API_KEY,
  SOPS_AGE_KEY_FILE: path.join(d, 'age', 'keys.txt'),
});
const runIn = (d: string, ...args: string[]) => runCli([...args, '-f', 'kms-sync.yaml'], { env: envFor(d), cwd: d });

const api = async (method: string, p: string, body?: unknown) => {
  const r = await fetch(`${emu.url}${p}`, { method, headers: H, ...(body ? { body: JSON.stringify(body) } : {}) });
  return { status: r.status, body: (await r.json().catch(() => undefined)) as any };
};
const clientsOf = async (pe: string) => (await api('GET', `/client?project_env=${pe}&limit=100`)).body.data as any[];
const endpointsOf = async (pe: string) =>
  (await api('GET', `/endpoint?project_env=${pe}&limit=100`)).body.data as any[];
/** A dashboard's metadata PUT: it replaces the map, markers and all. */
const stripMarkers = async (pe: string, client: string) => {
  const c = (await clientsOf(pe)).find((x) => x.name === client);
  expect((await api('PUT', `/client/${c.id}?project_env=${pe}`, { metadata: { team: 'sales' } })).status).toBe(200);
  const mp = encodeURIComponent('GET:/orders');
  expect((await api('PUT', `/endpoint/${mp}?project_env=${pe}`, { metadata: {} })).status).toBe(200);
  return c.id as string;
};
const planOps = async (d: string, ...args: string[]) => {
  const r = await runIn(d, 'plan', '--json', ...args);
  expect(r.code, r.stderr).toBe(0);
  return (
    JSON.parse(r.stdout).resource_changes as { address: string; change: { action: string; reason: string } }[]
  ).map((op) => `${op.change.action} ${op.address}: ${op.change.reason}`);
};
const inventoryRecords = async (pe: string) =>
  (await endpointsOf(pe)).filter((e) => e.path.startsWith('/__kms-sync/inventory/'));

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  dir = workspace({ 'kms-sync.yaml': config(['acme', 'globex']) });
});

afterAll(async () => {
  await emu?.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

describe('the CLI keeps an inventory the pull request cannot forge', () => {
  it(
    'a stripped marker is drift that apply restores; a fresh checkout on another runner knows from the service',
    async () => {
      const applied = await runIn(dir, 'apply', '--auto-approve');
      expect(applied.code, applied.stderr).toBe(0);
      // One record in the environment, holding the clients and the endpoint the apply created.
      const records = await inventoryRecords('shop-production');
      expect(records).toHaveLength(1);

      const acme = await stripMarkers('shop-production', 'acme');
      const ops = await planOps(dir);
      expect(ops).toEqual([
        expect.stringMatching(/^update client\.shop-production\/acme: ownership marker removed outside kms-sync/),
        expect.stringMatching(
          /^update endpoint\.shop-production\/GET:\/orders: ownership marker removed outside kms-sync/,
        ),
      ]);
      const drift = await runIn(dir, 'drift', '--json');
      expect(drift.code, drift.stderr).toBe(2);
      expect(drift.stdout).toContain('ownership marker removed');

      // Another runner: a fresh checkout, nothing local. The service's copy says whose they are.
      const other = workspace({ 'kms-sync.yaml': config(['acme', 'globex']) });
      cpSync(path.join(dir, 'age'), path.join(other, 'age'), { recursive: true });
      expect(await planOps(other)).toEqual(ops);
      // Its keys are still checked: this checkout holds none of their secrets, and says so for acme's too.
      const findings = JSON.parse((await runIn(other, 'plan', '--json')).stdout).key_findings as { address: string }[];
      expect(findings.map((f) => f.address)).toContain('key.shop-production/acme/primary');
      const healed = await runIn(other, 'apply', '--auto-approve');
      expect(healed.code, healed.stderr).toBe(0);
      const back = (await clientsOf('shop-production')).find((c) => c.id === acme);
      expect(back.metadata).toMatchObject({ 'managed-by': 'kms-sync', 'kms-sync/owner': 'shop-config', team: 'sales' });
      expect(await planOps(other)).toEqual([]);

      // Offboarded on that runner with its markers stripped again: deleted as ours (its keys go with it).
      await stripMarkers('shop-production', 'acme');
      writeFileSync(path.join(other, 'kms-sync.yaml'), config(['globex']));
      expect(await planOps(other)).toEqual([
        expect.stringMatching(/^update endpoint\.shop-production\/GET:\/orders: ownership marker removed/),
        expect.stringMatching(
          /^delete client\.shop-production\/acme: .*its ownership marker was removed, its inventory holds it/,
        ),
      ]);
      const off = await runIn(other, 'apply', '--auto-approve');
      expect(off.code, off.stderr).toBe(0);
      expect((await clientsOf('shop-production')).map((c) => c.name)).toEqual(['globex']);
      writeFileSync(path.join(dir, 'kms-sync.yaml'), config(['globex']));
    },
    patient(90_000),
  );

  it(
    'the sealed copy beside the journal holds when the service copy is gone; a forged copy claims nothing',
    async () => {
      // Someone removes the service's records: this runner's sealed copy still knows.
      for (const r of await inventoryRecords('shop-production'))
        await api('DELETE', `/endpoint/${encodeURIComponent(`POST:${r.path}`)}?project_env=shop-production`);
      await stripMarkers('shop-production', 'globex');
      expect(await planOps(dir)).toEqual([
        expect.stringMatching(/^update client\.shop-production\/globex: ownership marker removed/),
        expect.stringMatching(/^update endpoint\.shop-production\/GET:\/orders: ownership marker removed/),
      ]);
      expect((await runIn(dir, 'apply', '--auto-approve')).code).toBe(0);

      // The attack: a pull request plants an inventory naming a client made by hand (another
      // team's, no markers), sealed with a key of its own making. It stays unmanaged: no update,
      // no delete, not even with the configuration not naming it.
      const tpl = (await api('GET', '/client/templates?project_env=shop-production')).body.data[0];
      const foreign = (
        await api('POST', '/client?project_env=shop-production', { name: 'partner', templateId: tpl.id })
      ).body;
      const file = path.join(dir, '.kms-sync', 'inventory.json');
      const kept = JSON.parse(readFileSync(file, 'utf8'));
      expect(typeof kept.seal).toBe('string');
      kept.entries.push({
        kind: 'client',
        address: 'client.shop-production/partner',
        projectEnv: 'shop-production',
        id: foreign.id,
      });
      kept.seal = 'forged-by-a-pull-request-0123456789abcdefghij';
      writeFileSync(file, JSON.stringify(kept));
      const plan = await runIn(dir, 'plan', '--json');
      expect(plan.code, plan.stderr).toBe(0);
      expect(JSON.parse(plan.stdout).resource_changes).toEqual([]);
      expect(plan.stderr).toContain('is not sealed with this service credential');
      const applied = await runIn(dir, 'apply', '--auto-approve');
      expect(applied.code, applied.stderr).toBe(0);
      expect((await clientsOf('shop-production')).map((c) => c.name).sort()).toEqual(['globex', 'partner']);
      // The apply wrote a new sealed copy without the planted entry.
      expect(readFileSync(file, 'utf8')).not.toContain(foreign.id);
    },
    patient(90_000),
  );

  it(
    'a saved plan applied (plan --out, then apply PLANFILE) keeps the inventory too',
    async () => {
      const d = workspace({ 'kms-sync.yaml': config(['initech'], ['saved']) });
      const planned = await runIn(d, 'plan', '--out', 'plan.json');
      expect(planned.code, planned.stderr).toBe(0);
      const applied = await runCli(['apply', 'plan.json'], { env: envFor(d), cwd: d });
      expect(applied.code, applied.stderr).toBe(0);
      expect(await inventoryRecords('saved-production')).toHaveLength(1);
      await stripMarkers('saved-production', 'initech');
      const fresh = workspace({ 'kms-sync.yaml': config(['initech'], ['saved']) });
      cpSync(path.join(d, 'age'), path.join(fresh, 'age'), { recursive: true });
      expect(await planOps(fresh)).toEqual([
        expect.stringMatching(/^update client\.saved-production\/initech: ownership marker removed/),
        expect.stringMatching(/^update endpoint\.saved-production\/GET:\/orders: ownership marker removed/),
      ]);
    },
    patient(90_000),
  );

  it(
    'an apply killed after its writes, before or while its inventory is written: nothing lost, the next apply records it all',
    async () => {
      const projects = ['halt', 'stop'];
      const pes = projects.map((p) => `${p}-production`);
      const d = workspace({ 'kms-sync.yaml': config(['acme', 'globex'], projects) });
      const file = path.join(d, '.kms-sync', 'inventory.json');
      const trace = new Trace(path.join(d, 'trace.log'));
      /** `apply` held where its inventory is about to be written (its writes done), killed once `meanwhile` has run. */
      const killedAtItsInventory = async (pauseMs: number, meanwhile: () => Promise<void> = async () => {}) => {
        trace.mark();
        const run = startCli(['apply', '--auto-approve', '-f', 'kms-sync.yaml'], {
          cwd: d,
          env: {
            PATH: process.env.PATH,
            HOME: process.env.HOME,
            TMPDIR: process.env.TMPDIR,
            NO_COLOR: '1',
            ...envFor(d),
            KMS_SYNC_TEST_TRACE: trace.file,
            KMS_SYNC_TEST_PAUSE: `inventory-write:${pauseMs}`,
          },
        });
        expect(await trace.waitFor(['inventory-write'], 60_000), run.output()).toBe('inventory-write');
        await meanwhile();
        run.child.kill('SIGKILL');
        expect(await run.exit).toBeNull();
      };
      const idsOf = async (pe: string) => (await clientsOf(pe)).map((c) => c.id as string).sort();
      /** The records of an environment as a plan reads them. */
      const recorded = async (pe: string) =>
        serviceInventory(
          (await inventoryRecords(pe)).map((e) => ({ projectEnv: pe, path: e.path, metadata: e.metadata })),
          pe,
          'shop-config',
        );

      // Killed with every client and endpoint made and nothing of the inventory written: nothing is
      // lost or left to fight over (their markers say whose they are), the next plan is empty.
      await killedAtItsInventory(60_000);
      for (const pe of pes) {
        expect((await clientsOf(pe)).map((c) => c.name).sort()).toEqual(['acme', 'globex']);
        expect(await inventoryRecords(pe)).toEqual([]);
      }
      expect(existsSync(file)).toBe(false);
      expect(await planOps(d)).toEqual([]);

      // Killed again while the records are written: one environment's request takes effect and
      // is never answered, the other's is; the copy beside the journal is not written.
      await killedAtItsInventory(3_000, async () => {
        emu.addFault({ method: 'POST', route: '/endpoint', mode: 'delay-after-commit', delayMs: 15_000 });
        expect(
          await waitFor(async () => (await Promise.all(pes.map(recorded))).every((r) => r?.complete), 30_000),
        ).toBe(true);
      });
      emu.clearFaults();
      expect(existsSync(file)).toBe(false);
      expect(await planOps(d)).toEqual([]);

      // The next apply records every client and endpoint: in the service, and sealed beside the journal.
      const applied = await runIn(d, 'apply', '--auto-approve');
      expect(applied.code, applied.stderr).toBe(0);
      const local = JSON.parse(readFileSync(file, 'utf8'));
      expect(typeof local.seal).toBe('string');
      for (const pe of pes) {
        const r = (await recorded(pe))!;
        expect(r.complete).toBe(true);
        expect(r.clients.sort()).toEqual(await idsOf(pe));
        expect(r.endpoints).toEqual(['GET:/orders']);
        expect(
          local.entries
            .filter((e: any) => e.projectEnv === pe && e.kind === 'client')
            .map((e: any) => e.id)
            .sort(),
        ).toEqual(await idsOf(pe));
      }
      // What a fresh checkout believes: the records say whose the stripped clients and endpoints are.
      for (const pe of pes) await stripMarkers(pe, 'acme');
      const fresh = workspace({ 'kms-sync.yaml': config(['acme', 'globex'], projects) });
      cpSync(path.join(d, 'age'), path.join(fresh, 'age'), { recursive: true });
      expect(await planOps(fresh)).toEqual([
        ...pes.map((pe) => expect.stringMatching(new RegExp(`^update client\\.${pe}/acme: ownership marker removed`))),
        ...pes.map((pe) =>
          expect.stringMatching(new RegExp(`^update endpoint\\.${pe}/GET:/orders: ownership marker removed`)),
        ),
      ]);
    },
    patient(120_000),
  );

  it(
    'shards each keep their environments part, in the service and beside the journal',
    async () => {
      const projects = ['north', 'south', 'east', 'west'];
      const d = workspace({ 'kms-sync.yaml': config(['acme'], projects) });
      for (const k of ['1/2', '2/2']) {
        const r = await runIn(d, 'apply', '--auto-approve', '--shard', k);
        expect(r.code, r.stderr).toBe(0);
      }
      const local = JSON.parse(readFileSync(path.join(d, '.kms-sync', 'inventory.json'), 'utf8'));
      for (const p of projects) {
        expect(await inventoryRecords(`${p}-production`)).toHaveLength(1);
        expect(local.entries.map((e: any) => e.address)).toContain(`client.${p}-production/acme`);
      }
      // Each shard, from a fresh checkout, finds its stripped markers through the service.
      for (const p of projects) await stripMarkers(`${p}-production`, 'acme');
      const fresh = workspace({ 'kms-sync.yaml': config(['acme'], projects) });
      cpSync(path.join(d, 'age'), path.join(fresh, 'age'), { recursive: true });
      const seen: string[] = [];
      for (const k of ['1/2', '2/2']) seen.push(...(await planOps(fresh, '--shard', k)));
      const prefix = (op: string) => op.slice(0, op.indexOf(':', op.indexOf('/')));
      expect(
        seen
          .filter((op) => op.includes('ownership marker removed'))
          .map(prefix)
          .sort(),
      ).toEqual(
        projects.flatMap((p) => [`update client.${p}-production/acme`, `update endpoint.${p}-production/GET`]).sort(),
      );
    },
    patient(90_000),
  );
});
