// The sync engine end to end: the CLI as a process, the emulator over HTTP on 127.0.0.1, the
// default SOPS store on disk. Each test builds on the live state the previous one left.
import { readFileSync, writeFileSync, existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { SopsFileStore } from '../../src/secrets/index.js';
import { allOutput, RAW_KEY_PATTERN, runCli, workspace } from '../support/cli.js';

const API_KEY = 'sk_test_engine0123456789';

const project = (
  over: { name?: string; url?: string; gold?: number } = {},
) => `# yaml-language-server: $schema=../schemas/kms-sync.schema.json
apiVersion: kms-sync/v1
projects:
  - slug: shop
    name: ${over.name ?? 'Shop'}
    description: The shop API
    environments:
      - type: production
        url: ${over.url ?? 'https://api.shop.example'}
        templates:
          - { name: gold, rateLimitDay: ${over.gold ?? 10000}, maxClients: 50 }
          - { name: bronze, rateLimitDay: 100, maxClients: 50 }
      - type: staging
        url: https://staging.shop.example
        templates:
          - { name: bronze, rateLimitDay: 100, maxClients: 50 }
`;

const team = (
  over: {
    cidr?: string;
    autoRotate?: boolean;
    description?: string;
    extraClient?: boolean;
    protectedClient?: boolean;
  } = {},
) => `apiVersion: kms-sync/v1
projects:
  - slug: shop
    environments:
      - type: production
        clients:
          - name: globex
            type: company
            template: gold
            ipWhitelist: [${over.cidr ?? '10.0.0.0/8'}]
            metadata: { team: payments }
            keys:
              - { name: primary, ttl: 90d, autoRotate: ${over.autoRotate ?? true} }
              - { name: backup, expiresAt: "2030-01-01T00:00:00Z" }
          - name: initech
            template: bronze
            ${over.protectedClient ? 'protected: true' : ''}
            keys:
              - { name: main }
${
  over.extraClient
    ? `          - name: hooli
            template: bronze
            keys:
              - { name: main }
`
    : ''
}        endpoints:
          - { method: GET, path: /v1/orders, name: List orders, description: ${over.description ?? 'All orders'} }
          - { method: POST, path: /v1/orders, name: Create order }
      - type: staging
        clients:
          - name: globex
            template: bronze
            keys:
              - { name: primary }
`;

let emu: RunningEmulator;
let dir: string;
let env: NodeJS.ProcessEnv;
const h = () => ({ 'x-api-key': API_KEY, 'content-type': 'application/json' });
const api = async (method: string, p: string, body?: unknown) => {
  const r = await fetch(emu.url + p, {
    method,
    headers: h(),
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return (await r.json()) as any;
};
const write = (files: Record<string, string>) => {
  for (const [rel, text] of Object.entries(files)) writeFileSync(path.join(dir, rel), text);
};
const planJson = async (...extra: string[]) => {
  const r = await runCli(['plan', '-f', 'config', '--json', ...extra], { env, cwd: dir });
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as {
    resource_changes: {
      address: string;
      change: {
        actions: string[];
        action: string;
        fields: { path: string; before: unknown; after: unknown }[];
        action_reason: string;
      };
    }[];
    unmanaged: { address: string; project_env?: string }[];
    warnings: string[];
  };
};
const store = () => new SopsFileStore(path.join(dir, 'config', '.kms-sync', 'secrets.sops.yaml'), { env });
const clients = async (pe: string) => (await api('GET', `/client?project_env=${pe}&limit=100`)).data as any[];

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  dir = workspace({ 'config/project.yaml': project(), 'config/teams/payments.yaml': team() });
  env = {
    KMS_API_URL: emu.url,
    KMS_API_KEY: API_KEY,
    SOPS_AGE_KEY_FILE: path.join(dir, 'age', 'keys.txt'),
    KMS_SYNC_ALLOW_LOCAL_STORE: '1',
  };
});

afterAll(async () => {
  await emu?.close();
  // No raw key ever appears in anything the CLI printed.
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

describe('sync engine against the emulator', () => {
  it('creates everything from empty and stores every raw key in the default store', async () => {
    const plan = await runCli(['plan', '-f', 'config', '--detailed-exitcode'], { env, cwd: dir });
    expect(plan.code).toBe(2);
    expect(plan.stdout).toContain('Plan: 11 to create, 0 to update, 0 to replace, 0 to rotate, 0 to delete.');
    const apply = await runCli(['apply', '-f', 'config', '--auto-approve'], { env, cwd: dir });
    expect(apply.code, apply.stdout + apply.stderr).toBe(0);
    expect(apply.stdout).toContain('Apply complete!');
    const prod = await clients('shop-production');
    expect(prod.map((c) => c.name).sort()).toEqual(['globex', 'initech']);
    // Owner id derived from the folder outside git (docs/ownership.md): local:<folder>.
    expect(prod.find((c) => c.name === 'globex').metadata).toEqual({
      team: 'payments',
      'managed-by': 'kms-sync',
      'kms-sync/owner': 'local:config',
      'kms-sync/applied': expect.stringMatching(/^[0-9a-f]{16}$/),
    });
    // The raw keys are in the store, readable and valid against the service.
    const s = store();
    const names = (await s.list()).map((x) => x.name).sort();
    expect(names).toEqual([
      'shop-production/globex/backup',
      'shop-production/globex/primary',
      'shop-production/initech/main',
      'shop-staging/globex/primary',
    ]);
    const raw = await s.read('shop-production/initech/main');
    expect(raw).toMatch(/^kmsc_/);
    const initech = prod.find((c) => c.name === 'initech');
    const v = await api('POST', `/client/${initech.id}?project_env=shop-production&method_path=GET:/v1/orders`, {
      headers: { 'x-api-key': raw },
    });
    expect(v.success).toBe(true);
    // The journal is empty after a clean run.
    expect(existsSync(path.join(dir, 'config', '.kms-sync', 'journal'))).toBe(false);
  });

  it('plans no changes right after apply', async () => {
    const r = await runCli(['plan', '-f', 'config', '--detailed-exitcode'], { env, cwd: dir });
    expect(r.code, r.stdout).toBe(0);
    expect(r.stdout).toContain('No changes.');
  });

  it('shows exactly the changed field of each resource kind, then applies it', async () => {
    write({
      'config/project.yaml': project({ name: 'Shop Inc', url: 'https://api2.shop.example', gold: 20000 }),
      'config/teams/payments.yaml': team({ cidr: '192.168.0.0/16', autoRotate: false, description: 'Every order' }),
    });
    const plan = await planJson();
    const got = plan.resource_changes.map((c) => [
      c.address,
      c.change.action,
      c.change.fields.map((f) => f.path).join(','),
    ]);
    expect(got).toEqual([
      ['project.shop', 'update', 'name'],
      ['env.shop-production', 'update', 'url'],
      ['template.shop-production/gold', 'update', 'rateLimitDay'],
      ['client.shop-production/globex', 'update', 'ipWhitelist'],
      ['key.shop-production/globex/primary', 'update', 'autoRotate'],
      ['endpoint.shop-production/GET:/v1/orders', 'update', 'description'],
    ]);
    const apply = await runCli(['apply', '-f', 'config', '--auto-approve'], { env, cwd: dir });
    expect(apply.code, apply.stdout).toBe(0);
    expect((await runCli(['plan', '-f', 'config', '--detailed-exitcode'], { env, cwd: dir })).code).toBe(0);
  });

  it('treats equivalent notations as equal (CIDR, timestamps)', async () => {
    write({
      'config/teams/payments.yaml': team({
        cidr: '192.168.7.7/16',
        autoRotate: false,
        description: 'Every order',
      }).replace('2030-01-01T00:00:00Z', '2030-01-01T01:00:00+01:00'),
    });
    const r = await runCli(['plan', '-f', 'config', '--detailed-exitcode'], { env, cwd: dir });
    expect(r.code, r.stdout).toBe(0);
  });

  it('detects drift made through the API and corrects it', async () => {
    const globex = (await clients('shop-production')).find((c) => c.name === 'globex');
    await api('PUT', `/client/${globex.id}?project_env=shop-production`, { ipWhitelist: ['0.0.0.0/0'] });
    const plan = await planJson();
    expect(plan.resource_changes).toHaveLength(1);
    expect(plan.resource_changes[0]!.change.fields).toEqual([
      { path: 'ipWhitelist', before: ['0.0.0.0/0'], after: ['192.168.0.0/16'] },
    ]);
    expect((await runCli(['apply', '-f', 'config', '--auto-approve'], { env, cwd: dir })).code).toBe(0);
    const after = (await clients('shop-production')).find((c) => c.name === 'globex');
    expect(after.ipWhitelist).toEqual(['192.168.0.0/16']);
  });

  it('keeps unmanaged resources unless --prune, and deletes what it created when removed from the config', async () => {
    const tpl = (await api('GET', '/client/templates?project_env=shop-production')).data.find(
      (t: any) => t.name === 'bronze',
    );
    await api('POST', '/client?project_env=shop-production', { name: 'by-hand', templateId: tpl.id });
    await api('POST', '/endpoint?project_env=shop-production', { method: 'GET', path: '/sdk/registered' });
    const kept = await planJson();
    expect(kept.resource_changes).toEqual([]);
    expect(kept.unmanaged.map((u) => u.address)).toEqual([
      'client.shop-production/by-hand',
      'endpoint.shop-production/GET:/sdk/registered',
    ]);
    // 1.1: the snake_case name beside the 1.0 camelCase one.
    expect(kept.unmanaged[0]).toMatchObject({ project_env: 'shop-production', projectEnv: 'shop-production' });
    const pruned = await planJson('--prune');
    expect(pruned.resource_changes.map((c) => [c.address, c.change.action, c.change.action_reason])).toEqual([
      ['endpoint.shop-production/GET:/sdk/registered', 'delete', 'delete_unmanaged_prune'],
      ['client.shop-production/by-hand', 'delete', 'delete_unmanaged_prune'],
    ]);
    expect((await runCli(['apply', '-f', 'config', '--auto-approve', '--prune'], { env, cwd: dir })).code).toBe(0);
    expect((await clients('shop-production')).map((c) => c.name).sort()).toEqual(['globex', 'initech']);
    // Removing a key kms-sync manages from the config revokes it.
    write({
      'config/teams/payments.yaml': team({
        cidr: '192.168.0.0/16',
        autoRotate: false,
        description: 'Every order',
      }).replace(/\n\s+- \{ name: backup.*\n/, '\n'),
    });
    const revoke = await planJson();
    expect(revoke.resource_changes.map((c) => [c.address, c.change.action])).toEqual([
      ['key.shop-production/globex/backup', 'delete'],
    ]);
  });

  it('never deletes a protected resource', async () => {
    write({
      'config/teams/payments.yaml': team({
        cidr: '192.168.0.0/16',
        autoRotate: false,
        description: 'Every order',
        protectedClient: true,
      }),
    });
    expect((await runCli(['apply', '-f', 'config', '--auto-approve'], { env, cwd: dir })).code).toBe(0);
    const initech = (await clients('shop-production')).find((c) => c.name === 'initech');
    expect(initech.metadata['kms-sync/protected']).toBe('true');
    // Now drop initech from the configuration entirely: still kept, with a warning.
    write({
      'config/teams/payments.yaml': team({
        cidr: '192.168.0.0/16',
        autoRotate: false,
        description: 'Every order',
      }).replace(/ {10}- name: initech[\s\S]*?- \{ name: main \}\n/, ''),
    });
    const plan = await planJson('--prune');
    expect(plan.resource_changes.filter((c) => c.address.includes('initech'))).toEqual([]);
    expect(plan.warnings.join('\n')).toContain(
      'client.shop-production/initech: removed from the configuration but marked protected',
    );
    write({
      'config/teams/payments.yaml': team({
        cidr: '192.168.0.0/16',
        autoRotate: false,
        description: 'Every order',
        protectedClient: true,
      }),
    });
  });

  it('applies a saved plan exactly, and refuses it once the live state moved', async () => {
    write({
      'config/teams/payments.yaml': team({
        cidr: '192.168.0.0/16',
        autoRotate: false,
        description: 'Saved',
        protectedClient: true,
        extraClient: true,
      }),
    });
    const saved = await runCli(['plan', '-f', 'config', '--out', 'plan.json'], { env, cwd: dir });
    expect(saved.code).toBe(0);
    const stale = await runCli(['plan', '-f', 'config', '--out', 'stale.json'], { env, cwd: dir });
    expect(stale.code).toBe(0);
    const applied = await runCli(['apply', 'plan.json'], { env, cwd: dir });
    expect(applied.code, applied.stdout + applied.stderr).toBe(0);
    expect((await clients('shop-production')).map((c) => c.name)).toContain('hooli');
    const refused = await runCli(['apply', 'stale.json'], { env, cwd: dir });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('stale.json is stale');
    expect(refused.stderr).toContain('client.shop-production/hooli appeared');
  });

  it('exports the live state so that planning the export shows no changes', async () => {
    const exp = await runCli(
      ['export', '--env', 'shop-production', '--env', 'shop-staging', '-o', 'exported/all.yaml'],
      { env, cwd: dir },
    );
    expect(exp.code, exp.stderr).toBe(0);
    const text = readFileSync(path.join(dir, 'exported', 'all.yaml'), 'utf8');
    expect(text).not.toMatch(RAW_KEY_PATTERN);
    const r = await runCli(['plan', '-f', 'exported', '--detailed-exitcode', '--no-secret-check'], { env, cwd: dir });
    expect(r.code, r.stdout).toBe(0);
    // The exported folder has its own (empty) default store: the keys' secrets are not held
    // there, which is reported, but adopting must not rotate keys that are in use (issue 11).
    const checked = await runCli(['plan', '-f', 'exported', '--json', '--detailed-exitcode'], { env, cwd: dir });
    expect(checked.code, checked.stderr).toBe(0);
    expect(JSON.parse(checked.stdout).resource_changes).toEqual([]);
  });

  it('stops part-way with exit 3 on a failure, and a re-run converges with no key lost', async () => {
    write({
      'config/teams/payments.yaml': team({
        cidr: '192.168.0.0/16',
        autoRotate: false,
        description: 'Saved',
        protectedClient: true,
        extraClient: true,
      }).replace(
        '          - name: hooli',
        `          - name: wayne
            template: gold
            keys:
              - { name: main }
          - name: hooli`,
      ),
    });
    // The client create commits, then the connection drops: the raw key never arrives.
    emu.addFault({ method: 'POST', route: '/client', mode: 'drop-after-commit' });
    emu.addFault({ method: 'PUT', route: '/endpoint/{method_path}', mode: 'error', status: 400 });
    write({
      'config/teams/payments.yaml': readFileSync(path.join(dir, 'config/teams/payments.yaml'), 'utf8').replace(
        'description: Saved',
        'description: Changed again',
      ),
    });
    const first = await runCli(['apply', '-f', 'config', '--auto-approve'], { env, cwd: dir });
    expect(first.code, first.stdout + first.stderr).toBe(3);
    expect(first.stdout).toContain('Apply stopped part-way');
    expect(first.stdout + first.stderr).toContain('re-issued');
    const second = await runCli(['apply', '-f', 'config', '--auto-approve'], { env, cwd: dir });
    expect(second.code, second.stdout + second.stderr).toBe(0);
    expect((await runCli(['plan', '-f', 'config', '--detailed-exitcode'], { env, cwd: dir })).code).toBe(0);
    // wayne's key was re-issued once its first raw value was lost: the stored one validates.
    const wayne = (await clients('shop-production')).find((c) => c.name === 'wayne');
    expect(wayne.keys).toHaveLength(1);
    const raw = await store().read('shop-production/wayne/main');
    const v = await api('POST', `/client/${wayne.id}?project_env=shop-production&method_path=GET:/v1/orders`, {
      headers: { 'x-api-key': raw, 'x-forwarded-for': '10.0.0.1' },
    });
    expect(v.success).toBe(true);
  });

  it('rejects bad input with file:line:column, exit 1 and nothing written', async () => {
    const bad = workspace({
      'c/a.yaml':
        'apiVersion: kms-sync/v1\nprojects:\n  - slug: shop\n    name: S\n    environments:\n      - type: production\n        url: https://x.example\n        templates: [{ name: gold, rateLimitDay: 1 }]\n        clients:\n          - { name: a, template: silver, ipWhitelist: [300.1.1.1/8] }\n',
    });
    const before = JSON.stringify(emu.service.toJSON());
    const r = await runCli(['apply', '-f', 'c', '--auto-approve'], { env, cwd: bad });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/c\/a\.yaml:10:\d+: .*template/);
    expect(r.stderr).toMatch(/c\/a\.yaml:10:\d+: .*ipWhitelist/);
    expect(JSON.stringify(emu.service.toJSON())).toBe(before);
    expect(readdirSync(bad)).toEqual(['c']);
  });
});
