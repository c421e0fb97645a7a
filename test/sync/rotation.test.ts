// Key rotation, secret-missing detection, the CI guard on local stores, and a store that fails
// mid-apply: the raw key must always end up somewhere safe.
import { rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyPlan } from '../../src/apply/execute.js';
import { JournaledKeyCapture } from '../../src/apply/journaled-capture.js';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { planFor, connect } from '../../src/engine/run.js';
import { loadDesiredState } from '../../src/config/index.js';
import { SopsFileStore, type SecretEntry } from '../../src/secrets/index.js';
import { StoreRegistry } from '../../src/secrets/registry.js';
import { DEFAULT_POLICY } from '../../src/model/policy.js';
import { allOutput, RAW_KEY_PATTERN, runCli, workspace, writeFiles } from '../support/cli.js';

const API_KEY = 'sk_test_rotation0123456789';

const config = (keys: string, extraClient = '') => `apiVersion: kms-sync/v1
projects:
  - slug: rot
    name: Rotation
    environments:
      - type: production
        url: https://rot.example
        templates: [{ name: std, rateLimitDay: 1000, maxClients: 20 }]
        clients:
          - name: acme
            template: std
            keys:
${keys}
${extraClient}`;

let emu: RunningEmulator;
let dir: string;
let env: NodeJS.ProcessEnv;
const headers = { 'x-api-key': API_KEY, 'content-type': 'application/json' };
const api = async (method: string, p: string, body?: unknown) =>
  (await (
    await fetch(emu.url + p, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) })
  ).json()) as any;
const acme = async () => (await api('GET', '/client?project_env=rot-production&name=acme')).data[0];
const storeFile = () => path.join(dir, 'config', '.kms-sync', 'secrets.sops.yaml');
const store = () => new SopsFileStore(storeFile(), { env });
const validates = async (clientId: string, raw: string | undefined) =>
  (
    await api('POST', `/client/${clientId}?project_env=rot-production&method_path=GET:/x`, {
      headers: { 'x-api-key': raw },
    })
  ).success as boolean;
const writeConfig = (text: string) => writeFiles(dir, { 'config/main.yaml': text });

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  dir = workspace({ 'config/main.yaml': config('              - { name: main, ttl: 10d, rotation: { window: 3d } }') });
  env = { KMS_API_URL: emu.url, KMS_API_KEY: API_KEY, SOPS_AGE_KEY_FILE: path.join(dir, 'age', 'keys.txt') };
});

afterAll(async () => {
  await emu?.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

describe('key rotation and secret safety', () => {
  it('refuses, in CI, to issue keys into a local store file, unless opted in', async () => {
    const refused = await runCli(['apply', '-f', 'config', '--auto-approve'], {
      env: { ...env, CI: 'true' },
      cwd: dir,
    });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('refusing to issue 1 new key(s) into the local store file');
    expect((await api('GET', '/project')).data).toEqual(expect.any(Array));
    expect(await api('GET', '/client?project_env=rot-production')).toMatchObject({ code: 'NOT_FOUND' });
    const allowed = await runCli(['apply', '-f', 'config', '--auto-approve', '--allow-local-store'], {
      env: { ...env, CI: 'true' },
      cwd: dir,
    });
    expect(allowed.code, allowed.stdout + allowed.stderr).toBe(0);
  });

  it('rotates a ttl key inside its window: new key stored, old key kept until it expires', async () => {
    const before = await acme();
    const oldKey = before.keys[0];
    const oldRaw = await store().read('rot-production/acme/main');
    expect(await validates(before.id, oldRaw)).toBe(true);
    // Two days left, inside the 3-day window.
    await api('PUT', `/client/${before.id}?project_env=rot-production`, {
      keys: [{ id: oldKey.id, expiresAt: new Date(Date.now() + 2 * 86_400_000).toISOString() }],
    });
    const plan = JSON.parse((await runCli(['plan', '-f', 'config', '--json'], { env, cwd: dir })).stdout);
    expect(plan.resource_changes.map((c: any) => [c.address, c.change.action, c.change.action_reason])).toEqual([
      ['key.rot-production/acme/main', 'rotate', 'rotate_expiring'],
    ]);
    expect(plan.key_findings).toEqual([
      expect.objectContaining({ address: 'key.rot-production/acme/main', finding: 'expiring', rotation_planned: true }),
    ]);
    const text = await runCli(['apply', '-f', 'config', '--auto-approve'], { env, cwd: dir });
    expect(text.code, text.stdout + text.stderr).toBe(0);
    const after = await acme();
    expect(after.keys).toHaveLength(2);
    const newRaw = await store().read('rot-production/acme/main');
    expect(newRaw).not.toBe(oldRaw);
    expect(await validates(after.id, newRaw)).toBe(true);
    expect(await validates(after.id, oldRaw)).toBe(true); // overlap: the old key still works
    const fresh = after.keys.find((k: any) => k.id !== oldKey.id);
    expect(Date.parse(fresh.expiresAt) - Date.now()).toBeGreaterThan(9 * 86_400_000);
    // Converged: the old generation waits for its expiry, nothing else to do.
    expect((await runCli(['plan', '-f', 'config', '--detailed-exitcode'], { env, cwd: dir })).code).toBe(0);
  });

  it('kms-sync rotate --revoke-old replaces the key and revokes every older one at once', async () => {
    writeConfig(config('              - { name: main, ttl: 10d, rotation: { window: 3d, overlap: 0s } }'));
    const before = await acme();
    const r = await runCli(['rotate', '-f', 'config', '--key', 'key.rot-*/acme/*', '--revoke-old', '--auto-approve'], {
      env,
      cwd: dir,
    });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const after = await acme();
    expect(after.keys).toHaveLength(1);
    expect(before.keys.map((k: any) => k.id)).not.toContain(after.keys[0].id);
    expect(await validates(after.id, await store().read('rot-production/acme/main'))).toBe(true);
  });

  it('reports a secret it does not hold without rotating it; rotates it when asked', async () => {
    rmSync(storeFile());
    const plan = JSON.parse((await runCli(['plan', '-f', 'config', '--json'], { env, cwd: dir })).stdout);
    // The key may be in use by whoever holds its secret: no change unless asked for.
    expect(plan.resource_changes).toEqual([]);
    expect(JSON.stringify(plan)).toContain('secret not held');
    const asked = JSON.parse(
      (await runCli(['plan', '-f', 'config', '--json', '--rotate-missing-secrets'], { env, cwd: dir })).stdout,
    );
    expect(asked.resource_changes.map((c: any) => [c.address, c.change.action, c.change.action_reason])).toEqual([
      ['key.rot-production/acme/main', 'rotate', 'rotate_secret_missing'],
      ['key.rot-production/acme/main', 'delete', 'delete_rotated_out'],
    ]);
    expect(
      (await runCli(['apply', '-f', 'config', '--auto-approve', '--rotate-missing-secrets'], { env, cwd: dir })).code,
    ).toBe(0);
    const after = await acme();
    expect(after.keys).toHaveLength(1);
    expect(await validates(after.id, await store().read('rot-production/acme/main'))).toBe(true);
  });

  it('never loses a key when the store fails after the service issued it: the journal keeps it until flushed', async () => {
    writeConfig(
      config(
        '              - { name: main, ttl: 10d, rotation: { window: 3d, overlap: 0s } }',
        `          - name: globex
            template: std
            keys: [{ name: main }, { name: spare }]
`,
      ),
    );
    const { state } = await loadDesiredState([path.join(dir, 'config')], { cwd: dir });
    const conn = connect({ parallelism: 4 }, env);
    const registry = new StoreRegistry({
      declarations: [],
      baseDir: path.join(dir, 'config'),
      policy: DEFAULT_POLICY,
      env,
    });
    // The real store, failing its first batch write (the process survives, the write does not land).
    const real = await registry.get(undefined);
    let failures = 1;
    const originalPutMany = real.putMany.bind(real);
    real.putMany = async (entries: SecretEntry[]) => {
      if (failures-- > 0) throw new Error('injected: disk full');
      return originalPutMany(entries);
    };
    try {
      const { plan } = await planFor(conn, state, {
        prune: false,
        baseDir: path.join(dir, 'config'),
        policy: DEFAULT_POLICY,
      });
      const capture = new JournaledKeyCapture(registry);
      const result = await applyPlan({ api: conn.api, plan, keys: capture });
      // The clients exist and their keys are safe in the journal; the run stops issuing keys.
      expect(result.stopReason).toContain('secret-store write failed');
      expect(result.stopReason).toContain('journal');
      expect(result.keysStored).toEqual([]);
      const pending = await capture.journal.pending();
      expect(pending.map((p) => p.name).sort()).toEqual(['rot-production/globex/main', 'rot-production/globex/spare']);
      // The CLI flushes the journal into the store.
      const flushed = await runCli(['secrets', 'flush', '-f', 'config'], { env, cwd: dir });
      expect(flushed.code, flushed.stderr).toBe(0);
      expect(flushed.stdout).toContain('Flushed 2 key(s)');
      const globex = (await api('GET', '/client?project_env=rot-production&name=globex')).data[0];
      for (const name of ['main', 'spare'])
        expect(await validates(globex.id, await store().read(`rot-production/globex/${name}`))).toBe(true);
      expect(await capture.journal.pending()).toEqual([]);
    } finally {
      await conn.api.close();
    }
  });

  it('when neither the journal nor the store can take a raw key, the key is revoked, never left issued and unsaved', async () => {
    writeConfig(
      config(
        '              - { name: main, ttl: 10d, rotation: { window: 3d, overlap: 0s } }',
        `          - name: globex
            template: std
            keys: [{ name: main }, { name: spare }]
          - name: umbrella
            template: std
            keys: [{ name: main }]
          - name: hooli
            template: std
            keys: [{ name: main }]
`,
      ),
    );
    const { state } = await loadDesiredState([path.join(dir, 'config')], { cwd: dir });
    const conn = connect({ parallelism: 4 }, env);
    const registry = new StoreRegistry({
      declarations: [],
      baseDir: path.join(dir, 'config'),
      policy: DEFAULT_POLICY,
      env,
    });
    const store = await registry.get(undefined);
    const capture = new JournaledKeyCapture(registry);
    const journalAppend = capture.journal.appendMany.bind(capture.journal);
    const storePut = store.putMany.bind(store);
    capture.journal.appendMany = async () => {
      throw new Error('injected: journal disk gone');
    };
    store.putMany = async () => {
      throw new Error('injected: store down');
    };
    try {
      const { plan } = await planFor(conn, state, {
        prune: false,
        baseDir: path.join(dir, 'config'),
        policy: DEFAULT_POLICY,
      });
      const result = await applyPlan({ api: conn.api, plan, keys: capture });
      expect(result.failed.map((f) => f.error).join('\n')).toContain('were revoked and will be issued again');
      for (const name of ['umbrella', 'hooli']) {
        const c = (await api('GET', `/client?project_env=rot-production&name=${name}`)).data[0];
        expect(c.keys).toEqual([]); // created, but its unsaved key was revoked
      }
      // With the journal and the store back, the next run issues the keys again and stores them.
      capture.journal.appendMany = journalAppend;
      store.putMany = storePut;
      const again = await planFor(conn, state, {
        prune: false,
        baseDir: path.join(dir, 'config'),
        policy: DEFAULT_POLICY,
      });
      expect(
        again.plan.operations
          .filter((o) => o.kind === 'key' && o.action === 'create')
          .map((o) => o.address)
          .sort(),
      ).toEqual(['key.rot-production/hooli/main', 'key.rot-production/umbrella/main']);
      const second = await applyPlan({ api: conn.api, plan: again.plan, keys: capture });
      expect(second.failed).toEqual([]);
      const umbrella = (await api('GET', '/client?project_env=rot-production&name=umbrella')).data[0];
      expect(await validates(umbrella.id, await store.read!('rot-production/umbrella/main'))).toBe(true);
    } finally {
      await conn.api.close();
    }
  });

  it('lists secrets by name without values', async () => {
    const r = await runCli(['secrets', 'list', '-f', 'config'], { env, cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('rot-production/globex/spare');
    expect(r.stdout).not.toMatch(RAW_KEY_PATTERN);
  });
});
