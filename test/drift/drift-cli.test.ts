// `kms-sync drift` end to end: the CLI as a process against the emulator. The live state is made
// by hand through the service API (as someone working in the dashboard would), so every category
// of drift appears: changed outside, missing, unmanaged, secret missing, expiring.
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { allOutput, RAW_KEY_PATTERN, repoRoot, runCli, workspace } from '../support/cli.js';

const API_KEY = 'sk_test_drift0123456789';
const inDays = (d: number) => new Date(Date.now() + d * 86_400_000).toISOString().replace(/\.\d+Z$/, 'Z');
const FAR = '2031-01-01T00:00:00Z';

const config = `apiVersion: kms-sync/v1
owner: shop-config
projects:
  - slug: shop
    name: Shop
    environments:
      - type: production
        url: https://api.shop.example
        templates:
          - { name: bronze, rateLimitDay: 1000, maxClients: 50 }
        clients:
          - name: globex
            template: bronze
            ipWhitelist: [10.0.0.0/8]
            metadata: { team: payments }
            keys:
              - { name: primary, rotation: { window: 30d } }
              - { name: backup, expiresAt: "${FAR}" }
          - name: initech
            template: bronze
            keys:
              - { name: main }
        endpoints:
          - { method: GET, path: /v1/orders, name: List orders }
      - type: staging
        url: https://staging.shop.example
        templates:
          - { name: bronze, rateLimitDay: 100, maxClients: 10 }
`;

let emu: RunningEmulator;
let dir: string;
let env: NodeJS.ProcessEnv;
const api = async (method: string, p: string, body?: unknown) => {
  const r = await fetch(emu.url + p, {
    method,
    headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return (await r.json()) as any;
};

const addFormats = addFormatsModule as unknown as (a: Ajv) => Ajv;
const validator = (file: string) => {
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats(ajv);
  return ajv.compile(JSON.parse(readFileSync(path.join(repoRoot, 'schemas', file), 'utf8')));
};
const validDrift = validator('kms-sync-drift.schema.json');
const validPlan = validator('kms-sync-plan.schema.json');

type DriftJson = {
  drift: boolean;
  summary: Record<string, any>;
  items: {
    category: string;
    address: string;
    planned_action: string | null;
    fields: { path: string; live: unknown; desired: unknown }[];
    usage?: any;
  }[];
  ignored: { address: string; rule: string }[];
  usage_windows?: any[];
};

const drift = async (...args: string[]) => {
  const r = await runCli(['drift', '-f', 'config', ...args], { env, cwd: dir });
  return r;
};

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  dir = workspace({ 'config/shop.yaml': config });
  env = {
    KMS_API_URL: emu.url,
    KMS_API_KEY: API_KEY,
    SOPS_AGE_KEY_FILE: path.join(dir, 'age', 'keys.txt'),
    KMS_SYNC_ALLOW_LOCAL_STORE: '1',
  };
  // The live state, made by hand.
  await api('POST', '/project', {
    slug: 'shop',
    name: 'Shop',
    description: '',
    envs: [
      {
        type: 'production',
        url: 'https://api.shop.example',
        templates: [{ name: 'bronze', rateLimitDay: 1000, maxClients: 50 }],
      },
      {
        type: 'staging',
        url: 'https://staging.shop.example',
        templates: [{ name: 'bronze', rateLimitDay: 100, maxClients: 10 }],
      },
    ],
  });
  const tpl = (await api('GET', '/client/templates?project_env=shop-production')).data[0];
  // globex: created by kms-sync (marker), then someone opened its IP allow-list; its primary key
  // expires in 3 days, inside its 30-day rotation window; none of its secrets are in the store.
  const [globex] = await api('POST', '/client?project_env=shop-production', [
    {
      name: 'globex',
      templateId: tpl.id,
      ipWhitelist: ['0.0.0.0/0'],
      metadata: { team: 'payments', 'managed-by': 'kms-sync', 'kms-sync/owner': 'shop-config' },
      keys: [{ name: 'primary', expiresAt: inDays(3) }],
    },
  ]);
  await api('PUT', `/client/${globex.id}?project_env=shop-production`, { keys: [{ name: 'backup', expiresAt: FAR }] });
  await api('POST', '/client?project_env=shop-production', { name: 'by-hand', templateId: tpl.id });
  await api('POST', '/endpoint?project_env=shop-production', {
    method: 'GET',
    path: '/v1/orders',
    name: 'List orders',
  });
  await api('POST', '/endpoint?project_env=shop-production', { method: 'GET', path: '/sdk/registered' });
  // Traffic: two calls through globex's primary key on GET /v1/orders, one refused.
  const use = (headers: Record<string, string>) =>
    api(
      'POST',
      `/client/${globex.id}?project_env=shop-production&method_path=${encodeURIComponent('GET:/v1/orders')}`,
      { name: 'primary', headers, payload: {} },
    );
  await use({ 'x-forwarded-for': '10.1.2.3' });
  await use({ 'x-forwarded-for': '10.1.2.4' });
  await use({});
});

afterAll(async () => {
  await emu?.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

describe('kms-sync drift against the emulator', () => {
  let report: DriftJson;

  it('classifies every category, exits 2, and the JSON follows its schema', async () => {
    const r = await drift('--format', 'json');
    expect(r.code, r.stderr).toBe(2);
    report = JSON.parse(r.stdout) as DriftJson;
    expect(validDrift(report), JSON.stringify(validDrift.errors)).toBe(true);
    expect(report.drift).toBe(true);
    const got = report.items.map((i) => [i.category, i.address]);
    expect(got).toEqual([
      ['changed_outside', 'client.shop-production/globex'],
      ['missing', 'client.shop-production/initech'],
      ['unmanaged', 'client.shop-production/by-hand'],
      ['unmanaged', 'endpoint.shop-production/GET:/sdk/registered'],
      ['secret_missing', 'key.shop-production/globex/backup'],
      ['secret_missing', 'key.shop-production/globex/primary'],
      ['expiring', 'key.shop-production/globex/primary'],
    ]);
    const changed = report.items[0]!;
    expect(changed.fields).toEqual([{ path: 'ipWhitelist', live: ['0.0.0.0/0'], desired: ['10.0.0.0/8'] }]);
    expect(report.summary).toMatchObject({
      total: 7,
      changed_outside: 1,
      missing: 1,
      unmanaged: 2,
      secret_missing: 2,
      expiring: 1,
      ignored: 0,
    });
    expect(report.summary.by_environment['shop-production']).toMatchObject({ total: 7 });
    expect(report.summary.by_environment['shop-staging']).toMatchObject({ total: 0 });
  });

  it('adds usage context from endpoint stats and recent logs', () => {
    const byAddr = new Map(report.items.map((i) => [i.address, i]));
    expect(byAddr.get('client.shop-production/globex')!.usage.recent).toMatchObject({ calls: 3, errors: 1 });
    expect(byAddr.get('client.shop-production/by-hand')!.usage.recent).toMatchObject({
      calls: 0,
      errors: 0,
      error_rate: null,
    });
    const primary = report.items.find((i) => i.category === 'expiring')!;
    expect(primary.usage.recent).toMatchObject({ calls: 3, errors: 1, error_rate: 0.333 });
    expect(report.usage_windows).toEqual([
      expect.objectContaining({ project_env: 'shop-production', logs_sampled: 3, complete: true }),
    ]);
  });

  it('renders text and Markdown for the same drift', async () => {
    const text = await drift('--no-usage');
    expect(text.code).toBe(2);
    expect(text.stdout).toContain('Changed outside kms-sync (1):');
    expect(text.stdout).toContain('ipWhitelist  live ["0.0.0.0/0"]  →  desired ["10.0.0.0/8"]');
    expect(text.stdout).toContain(
      'Drift: 7 found: 1 changed outside, 0 pending, 1 missing, 2 unmanaged, 2 secret missing, 1 expiring; 0 ignored.',
    );
    const md = await drift('--format', 'markdown');
    expect(md.code).toBe(2);
    expect(md.stdout).toMatch(/^<!-- kms-sync:[0-9a-f]{16} -->\n/);
    expect(md.stdout).toContain('| **Total** | 1 | 0 | 1 | 2 | 2 | 1 | 7 |');
    // Keys whose secret is not held are reported, not rotated (they may be in use: issue 11), and
    // the expiring key does not auto-rotate: nothing would be deleted, replaced or rotated.
    expect(md.stdout).toContain('Secret missing');
    expect(md.stdout).not.toContain('would delete, replace or rotate');
    expect(md.stdout).toContain('<details><summary><code>~</code> <code>client.shop-production/globex</code>');
    expect(md.stdout).toContain('**Usage:** 3 call(s) in recent logs, 1 error(s) (33.3%)');
  });

  it('--gen-ignore writes rules that make the next run clean (exit 0), counting what it ignores', async () => {
    const gen = await drift('--gen-ignore');
    expect(gen.code, gen.stderr).toBe(0);
    // Written beside the configuration (-f config), not in the folder the command ran from (issue 39).
    expect(existsSync(path.join(dir, '.kmsignore'))).toBe(false);
    const rules = readFileSync(path.join(dir, 'config', '.kmsignore'), 'utf8');
    expect(rules).toContain('client.shop-production/globex:ipWhitelist\n');
    expect(rules).toContain('endpoint.shop-production/GET:/sdk/registered\n');
    const r = await drift('--format', 'json', '--no-usage');
    expect(r.code, r.stdout).toBe(0);
    const clean = JSON.parse(r.stdout) as DriftJson;
    expect(validDrift(clean), JSON.stringify(validDrift.errors)).toBe(true);
    expect(clean.drift).toBe(false);
    expect(clean.summary).toMatchObject({ total: 0, ignored: 7 });
    expect(clean.ignored.find((i) => i.address === 'client.shop-production/globex')!.rule).toBe(
      `${path.join('config', '.kmsignore')}:3: client.shop-production/globex:ipWhitelist`,
    );
  });

  it('reports new drift on a field the ignore file does not cover', async () => {
    const globex = (await api('GET', '/client?project_env=shop-production&name=globex')).data[0];
    await api('PUT', `/client/${globex.id}?project_env=shop-production`, {
      metadata: { team: 'growth', 'managed-by': 'kms-sync', 'kms-sync/owner': 'shop-config' },
    });
    const r = await drift('--format', 'json', '--no-usage');
    expect(r.code).toBe(2);
    const j = JSON.parse(r.stdout) as DriftJson;
    expect(j.items.map((i) => [i.address, i.fields.map((f) => f.path)])).toEqual([
      ['client.shop-production/globex', ['metadata.team']],
    ]);
    expect(j.summary).toMatchObject({ total: 1, ignored: 6, ignored_fields: 1 });
  });

  it('exits 0 for an environment without drift, and 1 on errors (a missing ignore file)', async () => {
    const clean = await drift('--env', 'shop-staging', '--ignore-file', 'none.txt');
    expect(clean.code).toBe(1);
    expect(clean.stderr).toContain('cannot read the ignore file none.txt');
    writeFileSync(path.join(dir, 'empty.kmsignore'), '# nothing ignored\n');
    const ok = await drift('--env', 'shop-staging', '--ignore-file', 'empty.kmsignore');
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);
    expect(ok.stdout).toContain('No drift.');
  });

  it('reads a bounded sample of logs for the usage context, and says so', async () => {
    const tpl = (await api('GET', '/client/templates?project_env=shop-staging')).data[0];
    const busy = await api('POST', '/client?project_env=shop-staging', { name: 'busy', templateId: tpl.id });
    const id = busy.id ?? busy[0]?.id;
    const mp = encodeURIComponent('GET:/v1/ping');
    for (let i = 0; i < 25; i++) {
      await Promise.all(
        Array.from({ length: 10 }, () =>
          api('POST', `/client/${id}?project_env=shop-staging&method_path=${mp}`, { name: 'none', payload: {} }),
        ),
      );
    }
    emu.resetCounts();
    const r = await drift('--env', 'shop-staging', '--format', 'json', '--ignore-file', 'empty.kmsignore');
    expect(r.code, r.stderr).toBe(2);
    const j = JSON.parse(r.stdout) as DriftJson;
    expect(j.items.map((i) => [i.category, i.address])).toEqual([['unmanaged', 'client.shop-staging/busy']]);
    expect(j.items[0]!.usage.recent).toMatchObject({ calls: 200, errors: 200, error_rate: 1 });
    expect(j.usage_windows).toEqual([
      expect.objectContaining({ project_env: 'shop-staging', logs_sampled: 200, complete: false }),
    ]);
    // Two pages of 100 logs (the default --log-pages), no more.
    expect(emu.counts()['GET /project/{project_env}/logs']).toBe(2);
  });

  it('plan --format json follows the plan schema', async () => {
    const r = await runCli(['plan', '-f', 'config', '--format', 'json'], { env, cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    const plan = JSON.parse(r.stdout);
    expect(validPlan(plan), JSON.stringify(validPlan.errors)).toBe(true);
    expect(plan.summary.changes).toBeGreaterThan(0);
    expect(existsSync(path.join(dir, 'config', '.kms-sync', 'journal'))).toBe(false);
  });
});
