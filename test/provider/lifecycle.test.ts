// Terraform core's part played against the built provider and the emulator over HTTP: every
// resource type goes through validate → plan → apply → read → import → delete, keys land in the
// secret store and never in a state, and a refresh of many clients costs a listing, not a GET each.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { appliedDigest, clientRecord } from '../../src/model/ownership.js';
import { SopsFileStore } from '../../src/secrets/index.js';
import { RAW_KEY_PATTERN, repoRoot, workspace } from '../support/cli.js';
import { Core, dyn, errors, isUnknownWire, mp, startProvider, stepsOf, type ProviderProcess } from './harness.js';

const API_KEY = 'sk_test_provider0123456789';
const schema = Object.values(
  JSON.parse(readFileSync(path.join(repoRoot, 'schemas', 'terraform-provider-kms.json'), 'utf8')).provider_schemas,
)[0] as Core['schema'];
const text = (dv: unknown) =>
  dv instanceof Uint8Array
    ? Buffer.from(dv).toString()
    : JSON.stringify(dv, (_k, v) => (v instanceof Uint8Array ? Buffer.from(v).toString() : v));
/** A dynamic attribute's value as the provider sent it: [type, value] → value. */
const value = (v: unknown) => (Array.isArray(v) && v[0] instanceof Uint8Array ? v[1] : v);

let emu: RunningEmulator;
let dir: string;
let p: ProviderProcess;
let core: Core;
/** Every state and answer the provider produced in this file: none may hold a raw key. */
const seen: string[] = [];
const keep = <T>(x: T): T => {
  seen.push(text(x));
  return x;
};

const providerConfig = (stores: unknown[] = []) =>
  mp({ url: null, api_key: null, owner: null, base_dir: null, secret_store: dyn(stores) });

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  dir = workspace();
  p = await startProvider({
    cwd: dir,
    env: { KMS_API_URL: emu.url, KMS_API_KEY: API_KEY, SOPS_AGE_KEY_FILE: path.join(dir, 'age', 'keys.txt') },
  });
  core = new Core(p, schema);
  const configured = await p.call('ConfigureProvider', { terraform_version: '1.11.4', config: providerConfig() });
  expect(errors(configured.diagnostics)).toEqual([]);
});

afterAll(async () => {
  p?.kill();
  await emu?.close();
  for (const s of seen) expect(s).not.toMatch(RAW_KEY_PATTERN);
});

describe('resources through the provider, against the emulator', () => {
  const states: Record<string, any> = {};

  it('creates a project with its first environment, a template, a client, a key and an endpoint', async () => {
    states.project = keep(
      await core.converge('kms_project', null, { slug: 'acme', name: 'Acme', description: 'The Acme API' }),
    );
    // The API has no project without an environment: nothing exists until the first one.
    expect(emu.service.toJSON().projects).toEqual([]);
    states.env = keep(
      await core.converge('kms_environment', null, {
        project: 'acme',
        type: 'production',
        url: 'https://api.acme.example',
      }),
    );
    expect(states.env).toMatchObject({ id: 'acme-production', project_env: 'acme-production' });
    expect(typeof states.env.env_id).toBe('string');
    const live = emu.service.toJSON().projects[0] as any;
    expect([live.slug, live.name, live.description]).toEqual(['acme', 'Acme', 'The Acme API']);

    states.template = keep(
      await core.converge('kms_template', null, {
        project_env: 'acme-production',
        name: 'gold',
        rate_limit_day: 10000,
        max_clients: 50,
      }),
    );
    expect(typeof states.template.template_id).toBe('string');

    states.client = keep(
      await core.converge('kms_client', null, {
        project_env: 'acme-production',
        name: 'globex',
        template: 'gold',
        ip_whitelist: ['10.0.0.1'],
        metadata: dyn({ team: 'payments' }),
      }),
    );
    expect(states.client).toMatchObject({
      id: 'acme-production/globex',
      template: 'gold',
      type: 'company',
      ip_whitelist: ['10.0.0.1'],
    });
    expect(typeof states.client.client_uuid).toBe('string');

    states.key = keep(
      await core.converge('kms_key', null, {
        project_env: 'acme-production',
        client: 'globex',
        name: 'primary',
        ttl: '90d',
        auto_rotate: true,
      }),
    );
    expect(states.key).toMatchObject({
      id: 'acme-production/globex/primary',
      secret_name: 'acme-production/globex/primary',
    });
    expect(states.key.key_prefix).toMatch(/^kmsc_.{7}$/);
    expect(states.key.secret_fingerprint).toMatch(/^sha256:[0-9a-f]{32}$/);
    expect(Date.parse(states.key.expires_at) - Date.now()).toBeGreaterThan(89 * 86_400_000);

    states.endpoint = keep(
      await core.converge('kms_endpoint', null, {
        project_env: 'acme-production',
        method: 'get',
        path: '/v1/orders',
        name: 'List orders',
        request: dyn({ q: 'string' }),
      }),
    );
    expect(states.endpoint).toMatchObject({
      id: 'acme-production/GET:/v1/orders',
      method: 'get',
      method_path: 'GET:/v1/orders',
    });
  });

  it('puts the raw key in the secret store, and only there', async () => {
    const store = new SopsFileStore(path.join(dir, '.kms-sync', 'secrets.sops.yaml'), {
      env: { SOPS_AGE_KEY_FILE: path.join(dir, 'age', 'keys.txt') },
    } as never);
    const raw = await store.read('acme-production/globex/primary');
    expect(raw).toMatch(RAW_KEY_PATTERN);
    expect(raw!.startsWith(states.key.key_prefix)).toBe(true);
    expect(text(states.key)).not.toContain(raw!);
    // The key the store holds is the one the service issued: it validates.
    const client = emu.service.toJSON().projects[0] as any;
    expect(JSON.stringify(client)).not.toContain(raw!);
  });

  it('reads back every resource without a change', async () => {
    for (const [kind, type] of [
      ['project', 'kms_project'],
      ['env', 'kms_environment'],
      ['template', 'kms_template'],
      ['client', 'kms_client'],
      ['key', 'kms_key'],
      ['endpoint', 'kms_endpoint'],
    ] as const) {
      const read = keep(await core.read(type, states[kind]));
      expect(text(read), type).toBe(text(states[kind]));
      const plan = await core.plan(type, read, core.config(type, { ...read }));
      expect(text(plan.planned), `${type} re-plan`).toBe(text(read));
    }
  });

  it('updates in place, and sees a change made behind its back', async () => {
    const config = {
      project_env: 'acme-production',
      name: 'globex',
      template: 'gold',
      ip_whitelist: ['10.0.0.0/8', '192.168.1.1'],
      metadata: dyn({ team: 'payments' }),
    };
    const plan = await core.plan('kms_client', states.client, core.config('kms_client', config));
    expect(plan.replace).toEqual([]);
    states.client = keep(await core.converge('kms_client', states.client, config));
    const live = () => (emu.service.toJSON().projects[0] as any).envs[0].clients[0];
    expect(live().ipWhitelist.sort()).toEqual(['10.0.0.0/8', '192.168.1.1/32']);
    // The reconciler's ownership markers: kms-sync made it, which configuration owns it, and the
    // digest of what it applied, computed as `plan` computes it for the same YAML client (CIDRs canonical).
    const applied = appliedDigest(
      clientRecord({ template: 'gold', ipWhitelist: ['10.0.0.0/8', '192.168.1.1/32'], metadata: { team: 'payments' } }),
    );
    expect(live().metadata).toEqual({
      team: 'payments',
      'managed-by': 'kms-sync',
      'kms-sync/owner': `local:${path.basename(dir)}`,
      'kms-sync/applied': applied,
    });
    // The digest is the provider's own bookkeeping: Terraform's state never shows it.
    expect(value(states.client.metadata)).toEqual({ team: 'payments' });
    // Drift: someone edits the metadata through the API.
    await fetch(`${emu.url}/client/${states.client.client_uuid}?project_env=acme-production`, {
      method: 'PUT',
      headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ metadata: { team: 'billing' } }),
    });
    const fresh = await startProvider({ cwd: dir, env: { KMS_API_URL: emu.url, KMS_API_KEY: API_KEY } });
    try {
      await fresh.call('ConfigureProvider', { terraform_version: '1.11.4', config: providerConfig() });
      const drifted = keep(await new Core(fresh, schema).read('kms_client', states.client));
      expect(value(drifted!.metadata)).toEqual({ team: 'billing' });
    } finally {
      fresh.kill();
    }
  });

  it('plans a replacement when an endpoint request changes', async () => {
    const plan = await core.plan(
      'kms_endpoint',
      states.endpoint,
      core.config('kms_endpoint', {
        project_env: 'acme-production',
        method: 'get',
        path: '/v1/orders',
        name: 'List orders',
        request: dyn({ q: 'number' }),
      }),
    );
    expect(plan.replace).toEqual(['request']);
    expect(isUnknownWire(plan.planned!.created_at)).toBe(true);
  });

  it('imports by natural id', async () => {
    const client = await core.importState('kms_client', 'acme-production/globex');
    expect(errors(client.diagnostics)).toEqual([]);
    expect(client.states[0]).toMatchObject({
      id: 'acme-production/globex',
      template: 'gold',
      client_uuid: states.client.client_uuid,
      type: 'company',
    });
    const key = await core.importState('kms_key', 'acme-production/globex/primary');
    expect(key.states[0]).toMatchObject({ key_id: states.key.key_id, auto_rotate: true, key_prefix: null });
    const endpoint = await core.importState('kms_endpoint', 'acme-production/GET:/v1/orders');
    expect(endpoint.states[0]).toMatchObject({ method: 'GET', path: '/v1/orders', name: 'List orders' });
    expect(value(endpoint.states[0]!.request)).toEqual({ q: 'string' });
    const env = await core.importState('kms_environment', 'acme-production');
    expect(env.states[0]).toMatchObject({ project: 'acme', type: 'production', url: 'https://api.acme.example' });
    const missing = await core.importState('kms_client', 'acme-production/nobody');
    expect(errors(missing.diagnostics)[0]?.summary).toBe('Cannot import non-existent remote object');
    const malformed = await core.importState('kms_key', 'acme-production/globex');
    expect(errors(malformed.diagnostics)[0]?.detail).toMatch(
      /<project_env>\/<client>\/<name>, e\.g\. acme-production\/globex\/primary/,
    );
    keep([client, key, endpoint, env]);
  });

  it('answers data sources without raw keys', async () => {
    const c = keep(await core.readData('kms_client', { project_env: 'acme-production', name: 'globex' }));
    expect(errors(c.diagnostics)).toEqual([]);
    expect((c.state!.keys as any[]).map((k) => k.key_id)).toEqual([states.key.key_id]);
    const none = await core.readData('kms_template', { project_env: 'acme-production', name: 'platinum' });
    expect(errors(none.diagnostics).map((d) => [d.summary, stepsOf(d)])).toEqual([['Not found', ['name']]]);
  });

  it('answers the kms_key data source and the list data sources (ids, names and dates; never a raw key)', async () => {
    const k = keep(
      await core.readData('kms_key', { project_env: 'acme-production', client: 'globex', name: 'primary' }),
    );
    expect(errors(k.diagnostics)).toEqual([]);
    expect(k.state).toMatchObject({
      id: 'acme-production/globex/primary',
      key_id: states.key.key_id,
      auto_rotate: true,
      generations: 1,
    });
    expect(Object.keys(k.state!).sort()).toEqual([
      'auto_rotate',
      'client',
      'created_at',
      'expires_at',
      'generations',
      'id',
      'key_id',
      'name',
      'project_env',
    ]);
    const missing = await core.readData('kms_key', { project_env: 'acme-production', client: 'globex', name: 'nope' });
    expect(errors(missing.diagnostics).map((d) => [d.summary, stepsOf(d)])).toEqual([['Not found', ['name']]]);

    const projects = keep(await core.readData('kms_projects', {}));
    expect(projects.state!.projects).toEqual([{ slug: 'acme', name: 'Acme', environments: ['acme-production'] }]);
    const templates = keep(await core.readData('kms_templates', { project_env: 'acme-production' }));
    expect(templates.state!.templates).toEqual([
      expect.objectContaining({
        name: 'gold',
        template_id: states.template.template_id,
        rate_limit_day: 10000,
        max_clients: 50,
      }),
    ]);
    const clients = keep(await core.readData('kms_clients', { project_env: 'acme-production' }));
    expect(errors(clients.diagnostics)).toEqual([]);
    const globex = (clients.state!.clients as any[]).find((c) => c.name === 'globex');
    expect(globex).toMatchObject({ client_uuid: states.client.client_uuid, template: 'gold', key_names: ['primary'] });
    // The owner as the live metadata says (an earlier test here left globex without markers).
    const liveOwner = (emu.service.toJSON().projects[0] as any).envs[0].clients.find((x: any) => x.name === 'globex')
      .metadata['kms-sync/owner'];
    expect(globex.owner).toBe(liveOwner ?? null);
    expect(Object.keys(globex).sort()).toEqual([
      'client_uuid',
      'ip_whitelist',
      'key_names',
      'name',
      'owner',
      'template',
      'type',
    ]);
    const none = await core.readData('kms_clients', { project_env: 'acme-production', template: 'platinum' });
    expect(none.state!.clients).toEqual([]);
    const endpoints = keep(await core.readData('kms_endpoints', { project_env: 'acme-production' }));
    expect(endpoints.state!.endpoints).toEqual([
      { method: 'GET', path: '/v1/orders', method_path: 'GET:/v1/orders', name: 'List orders', description: '' },
    ]);
  });

  it('refuses to issue a key when its store is not writable, and issues nothing', async () => {
    const q = await startProvider({
      cwd: dir,
      env: { KMS_API_URL: emu.url, KMS_API_KEY: API_KEY, SOPS_AGE_KEY_FILE: path.join(dir, 'age', 'keys.txt') },
    });
    try {
      await q.call('ConfigureProvider', {
        terraform_version: '1.11.4',
        config: providerConfig([
          { name: 'vault', uri: 'vault://127.0.0.1:9/secret/kms', default: null, options: null },
        ]),
      });
      const qcore = new Core(q, schema);
      const config = qcore.config('kms_key', {
        project_env: 'acme-production',
        client: 'globex',
        name: 'backup',
        secret_store: 'vault',
      });
      const plan = await qcore.plan('kms_key', null, config);
      const applied = keep(await qcore.apply('kms_key', null, plan.planned, config));
      expect(applied.state).toBeNull();
      expect(errors(applied.diagnostics)[0]!.detail).toMatch(/vault/i);
      const keys = (emu.service.toJSON().projects[0] as any).envs[0].clients[0].keys.map((k: any) => k.name);
      expect(keys).toEqual(['primary']);
    } finally {
      q.kill();
    }
  });

  it('rotates a key inside its window as a replacement, the old key kept for the overlap', async () => {
    const values = {
      project_env: 'acme-production',
      client: 'globex',
      name: 'rotating',
      ttl: '1h',
      auto_rotate: true,
      rotation_window: '2h',
      rotation_overlap: '10m',
    };
    const first = keep(await core.converge('kms_key', null, values))!;
    const config = core.config('kms_key', values);
    // Expiring within the window: the plan replaces it, with a new expiry to come.
    const plan = await core.plan('kms_key', first, config);
    expect(plan.replace).toEqual(['expires_at']);
    expect(isUnknownWire(plan.planned!.expires_at)).toBe(true);
    // create_before_destroy: the new generation first, then the deposed one.
    const created = await core.plan('kms_key', null, config);
    const second = keep(await core.apply('kms_key', null, created.planned, config));
    expect(errors(second.diagnostics)).toEqual([]);
    expect(second.state!.key_id).not.toBe(first.key_id);
    const gone = await core.apply('kms_key', first, null, null);
    expect(errors(gone.diagnostics)).toEqual([]);
    const keys = (emu.service.toJSON().projects[0] as any).envs[0].clients[0].keys.filter(
      (k: any) => k.name === 'rotating',
    );
    expect(keys.map((k: any) => k.id).sort()).toEqual([first.key_id, second.state!.key_id].sort());
    const old = keys.find((k: any) => k.id === first.key_id);
    // The old key now ends with the overlap (10 minutes), not its own expiry (1 hour).
    expect(Date.parse(old.expiresAt) - Date.now()).toBeLessThan(11 * 60_000);
    expect(Date.parse(old.expiresAt) - Date.now()).toBeGreaterThan(8 * 60_000);
    states.rotating = second.state;
  });

  it('deletes in reverse order and leaves nothing behind', async () => {
    for (const [kind, type] of [
      ['rotating', 'kms_key'],
      ['key', 'kms_key'],
      ['endpoint', 'kms_endpoint'],
      ['client', 'kms_client'],
      ['template', 'kms_template'],
      ['env', 'kms_environment'],
      ['project', 'kms_project'],
    ] as const) {
      expect(await core.converge(type, states[kind], null), type).toBeNull();
    }
    expect(emu.service.toJSON().projects).toEqual([]);
  });
});

describe('refresh at list speed', () => {
  it('answers many ReadResource calls from one paged listing per environment', async () => {
    const N = 250;
    emu.service.seed({ project: 'bulk', type: 'production', clients: N, templates: 2 });
    const q = await startProvider({ cwd: dir, env: { KMS_API_URL: emu.url, KMS_API_KEY: API_KEY } });
    try {
      await q.call('ConfigureProvider', { terraform_version: '1.11.4', config: providerConfig() });
      const qcore = new Core(q, schema);
      const states = Array.from({ length: N }, (_, i) =>
        qcore.config('kms_client', {
          id: `bulk-production/client-${String(i).padStart(5, '0')}`,
          project_env: 'bulk-production',
          name: `client-${String(i).padStart(5, '0')}`,
          template: 'tpl-000',
        }),
      );
      emu.resetCounts();
      // Terraform refreshes with 10 resources in flight.
      const out: (Record<string, unknown> | null)[] = [];
      for (let i = 0; i < N; i += 10)
        out.push(...(await Promise.all(states.slice(i, i + 10).map((s) => qcore.read('kms_client', s)))));
      expect(out.every((s) => s && typeof s.client_uuid === 'string')).toBe(true);
      const counts = emu.counts();
      expect(counts['GET /client']).toBe(Math.ceil(N / 100));
      expect(counts['GET /client/{client_uuid}'] ?? 0).toBe(0);
      expect(counts['GET /client/templates']).toBe(1);
    } finally {
      q.kill();
    }
  });
});
