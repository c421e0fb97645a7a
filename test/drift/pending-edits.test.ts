// Issue 39 item 4: `kms-sync drift` called every unapplied edit of a project, environment or
// template "Changed outside kms-sync" (they carry no metadata, so no applied digest). `apply` now
// keeps the digests of what it applied in the configuration's inventory beside the journal
// (.kms-sync/inventory.json): an edit of the configuration not applied yet is pending, a change
// made in the service is changed outside. The built CLI against the emulator.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { allOutput, RAW_KEY_PATTERN, runCli, workspace } from '../support/cli.js';
import { patient } from '../support/patience.js';

const API_KEY = 'sk_test_pendingedits0123456';
const config = (url: string, rate: number, name = 'Mall') => `apiVersion: kms-sync/v1
owner: mall-config
projects:
  - slug: mall
    name: ${name}
    environments:
      - type: production
        url: ${url}
        templates:
          - { name: bronze, rateLimitDay: ${rate}, maxClients: 50 }
        clients:
          - { name: acme, template: bronze, keys: [{ name: primary }] }
`;

let emu: RunningEmulator;
let dir: string;
let env: NodeJS.ProcessEnv;
const run = (...args: string[]) => runCli([...args, '-f', 'kms-sync.yaml'], { env, cwd: dir });
const driftItems = async () => {
  const r = await run('drift', '--json');
  expect(r.code, r.stderr).toBe(2);
  return (JSON.parse(r.stdout).items as { category: string; address: string }[])
    .map((i) => `${i.category} ${i.address}`)
    .sort();
};

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  dir = workspace({ 'kms-sync.yaml': config('https://api.mall.example', 1000) });
  env = { KMS_API_URL: emu.url, KMS_API_KEY: API_KEY, SOPS_AGE_KEY_FILE: path.join(dir, 'age', 'keys.txt') };
});

afterAll(async () => {
  await emu?.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

describe('drift tells an unapplied edit of a project, environment or template from a change made outside', () => {
  it(
    'pending after an edit, changed outside after a change in the service, nothing once applied',
    async () => {
      const applied = await run('apply', '--auto-approve');
      expect(applied.code, applied.stderr).toBe(0);
      const kept = JSON.parse(readFileSync(path.join(dir, '.kms-sync', 'inventory.json'), 'utf8'));
      expect(
        kept.entries
          .filter((e: any) => e.applied)
          .map((e: any) => e.address)
          .sort(),
      ).toEqual(['env.mall-production', 'project.mall', 'template.mall-production/bronze']);

      // Edits of the configuration, not applied: pending, not "changed outside".
      writeFileSync(path.join(dir, 'kms-sync.yaml'), config('https://api2.mall.example', 500, 'Mall Two'));
      expect(await driftItems()).toEqual([
        'pending env.mall-production',
        'pending project.mall',
        'pending template.mall-production/bronze',
      ]);

      // Back as applied, and the template changed in the service: changed outside.
      writeFileSync(path.join(dir, 'kms-sync.yaml'), config('https://api.mall.example', 1000));
      const tpl = await fetch(`${emu.url}/project/mall-production`, {
        method: 'PUT',
        headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
        body: JSON.stringify({ singleEnv: { templates: [{ name: 'bronze', rateLimitDay: 7 }] } }),
      });
      expect(tpl.status).toBe(200);
      expect(await driftItems()).toEqual(['changed_outside template.mall-production/bronze']);

      // Applied again: no drift, and the digests follow what was applied.
      writeFileSync(path.join(dir, 'kms-sync.yaml'), config('https://api2.mall.example', 500, 'Mall Two'));
      expect((await run('apply', '--auto-approve')).code).toBe(0);
      const clean = await run('drift', '--json');
      expect(clean.code, clean.stdout).toBe(0);
    },
    patient(60_000),
  );

  it(
    'an inventory beside the configuration never claims a resource (a pull request can write it)',
    async () => {
      // A hand-made client, listed in a planted inventory: still unmanaged, never deleted by apply.
      const tpl = (
        (await (
          await fetch(`${emu.url}/client/templates?project_env=mall-production`, { headers: { 'x-api-key': API_KEY } })
        ).json()) as any
      ).data[0];
      const made = await fetch(`${emu.url}/client?project_env=mall-production`, {
        method: 'POST',
        headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'by-hand', templateId: tpl.id }),
      });
      const byHand = (await made.json()) as any;
      const file = path.join(dir, '.kms-sync', 'inventory.json');
      expect(existsSync(file)).toBe(true);
      const kept = JSON.parse(readFileSync(file, 'utf8'));
      kept.entries.push({
        kind: 'client',
        address: 'client.mall-production/by-hand',
        projectEnv: 'mall-production',
        id: byHand.id,
      });
      writeFileSync(file, JSON.stringify(kept));
      const plan = await run('plan', '--json');
      expect(plan.code, plan.stderr).toBe(0);
      const parsed = JSON.parse(plan.stdout);
      expect(parsed.resource_changes ?? parsed.operations ?? []).toEqual([]);
      expect((await run('apply', '--auto-approve')).code).toBe(0);
      const live = (
        (await (
          await fetch(`${emu.url}/client?project_env=mall-production`, { headers: { 'x-api-key': API_KEY } })
        ).json()) as any
      ).data.map((c: any) => c.name);
      expect(live).toContain('by-hand');
    },
    patient(60_000),
  );
});
