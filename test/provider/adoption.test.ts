// The provider's create of a key, when the key name already has live generations (issue 24),
// driven the way Terraform core does against the built provider and the emulator over HTTP:
// - a key an earlier create issued and stored, whose state Terraform never saved (a killed
//   apply), is adopted — nothing issued — and its unconfirmed record goes once Terraform shows it
//   a state holding the key;
// - a key the store holds that a lost state no longer names is marked by the plan and adopted by
//   the apply's create (another process); the create half of a replacement is never adopted;
// - a stray key of that name (tracked by nothing) on a client this configuration owns is revoked
//   once the new key is stored, with a warning; on a client it does not own the create fails and
//   asks for an import;
// - after a store write failed, no further key is issued (no request at all);
// - in CI a local store file is refused unless KMS_SYNC_ALLOW_LOCAL_STORE=1.
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { RAW_KEY_PATTERN, repoRoot, workspace } from '../support/cli.js';
import { Core, dyn, errors, mp, startProvider, type Diagnostic, type ProviderProcess } from './harness.js';
import { decryptStore } from './terraform-support.js';
import { patient, waitFor } from '../support/patience.js';

const API_KEY = 'sk_test_adoption0123456789';
const ENV = 'acme-production';
const ISSUE_ROUTE = 'PUT /client/{client_uuid}';
const schema = Object.values(
  JSON.parse(readFileSync(path.join(repoRoot, 'schemas', 'terraform-provider-kms.json'), 'utf8')).provider_schemas,
)[0] as Core['schema'];
const text = (x: unknown) => JSON.stringify(x, (_k, v) => (v instanceof Uint8Array ? Buffer.from(v).toString() : v));

let emu: RunningEmulator;
let dir: string;
let storeFile: string;
let journalFile: string;
let ageKeyFile: string;
let env: NodeJS.ProcessEnv;
const seen: string[] = [];
const providers: ProviderProcess[] = [];

async function provider(extraEnv: NodeJS.ProcessEnv = {}): Promise<Core> {
  const p = await startProvider({ cwd: dir, env: { ...env, ...extraEnv } });
  providers.push(p);
  const configured = await p.call('ConfigureProvider', {
    terraform_version: '1.11.4',
    config: mp({ url: null, api_key: null, owner: null, base_dir: null, secret_store: dyn([]) }),
  });
  expect(errors(configured.diagnostics)).toEqual([]);
  return new Core(p, schema);
}

/** Plan and apply one new key as core does. */
async function createKey(core: Core, client: string, name: string) {
  const config = core.config('kms_key', { project_env: ENV, client, name });
  const plan = await core.plan('kms_key', null, config);
  expect(errors(plan.diagnostics)).toEqual([]);
  const applied = await core.apply('kms_key', null, plan.planned, config);
  seen.push(text(applied));
  return applied as { state: Record<string, unknown> | null; diagnostics: Diagnostic[] };
}

const api = (method: string, route: string, body?: unknown) =>
  fetch(`${emu.url}${route}`, {
    method,
    headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });

const clientJson = (name: string): any =>
  (emu.service.toJSON().projects[0] as any).envs[0].clients.find((c: any) => c.name === name);
const liveKeys = (client: string, name: string): { id: string; keyPrefix: string }[] =>
  clientJson(client).keys.filter((k: any) => k.name === name);
const issues = () => emu.counts()[ISSUE_ROUTE] ?? 0;

async function validates(client: string, name: string, raw: string): Promise<boolean> {
  const res = await fetch(
    `${emu.url}/client/${clientJson(client).id}?project_env=${ENV}&method_path=${encodeURIComponent('GET:/v1/orders')}`,
    {
      method: 'POST',
      headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ name, headers: { 'x-api-key': raw } }),
    },
  );
  return ((await res.json()) as { success?: boolean }).success === true;
}

/** Adds a key behind the provider's back (as another tool, or an older provider, would). */
async function strayKey(client: string, name: string): Promise<string> {
  const res = await api('PUT', `/client/${clientJson(client).id}?project_env=${ENV}`, { keys: [{ name }] });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { keys: { id: string; name: string; key?: string }[] };
  return body.keys.find((k) => k.name === name && k.key)!.id; // the raw value is dropped here: nobody holds it
}

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  dir = workspace();
  storeFile = path.join(dir, '.kms-sync', 'secrets.sops.yaml');
  journalFile = path.join(dir, '.kms-sync', 'journal');
  ageKeyFile = path.join(dir, 'age', 'keys.txt');
  env = { KMS_API_URL: emu.url, KMS_API_KEY: API_KEY, SOPS_AGE_KEY_FILE: ageKeyFile };
  const core = await provider();
  await core.converge('kms_project', null, { slug: 'acme', name: 'Acme' });
  await core.converge('kms_environment', null, {
    project: 'acme',
    type: 'production',
    url: 'https://api.acme.example',
  });
  const template = await core.converge('kms_template', null, {
    project_env: ENV,
    name: 'gold',
    rate_limit_day: 100000,
    max_clients: 50,
  });
  await core.converge('kms_client', null, { project_env: ENV, name: 'globex', template: 'gold' });
  // A client this configuration does not own: made through the API, without kms-sync's markers.
  const made = await api('POST', `/client?project_env=${ENV}`, {
    name: 'initech',
    type: 'server',
    templateId: template!.template_id,
    keys: [],
  });
  expect(made.status, await made.clone().text()).toBe(201);
}, patient(60_000));

afterAll(async () => {
  for (const p of providers) p.kill();
  await emu?.close();
  for (const s of seen) expect(s).not.toMatch(RAW_KEY_PATTERN);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('a create whose key name already has live generations', () => {
  it(
    'adopts a key an earlier create stored but Terraform never recorded, then forgets its record once Terraform shows it',
    async () => {
      // The first apply issues and stores the key; its state never reaches Terraform (killed).
      const first = await createKey(await provider(), 'globex', 'adopted');
      expect(errors(first.diagnostics)).toEqual([]);
      const keyId = first.state!.key_id as string;
      expect(readFileSync(journalFile).includes(Buffer.from(keyId))).toBe(true); // the unconfirmed record
      providers.at(-1)!.kill();

      // The re-apply plans the key again and creates it: the stored key is adopted, nothing issued.
      const before = issues();
      const core = await provider();
      const again = await createKey(core, 'globex', 'adopted');
      expect(errors(again.diagnostics)).toEqual([]);
      expect(issues()).toBe(before);
      expect(again.state).toMatchObject({
        key_id: keyId,
        key_prefix: first.state!.key_prefix,
        secret_fingerprint: first.state!.secret_fingerprint,
      });
      expect(liveKeys('globex', 'adopted').map((k) => k.id)).toEqual([keyId]);
      const raw = (await decryptStore(storeFile, ageKeyFile))[`${ENV}/globex/adopted`]!;
      expect(await validates('globex', 'adopted', raw)).toBe(true);

      // Terraform refreshes the saved state: the key is known, its record (and the journal) go.
      expect(existsSync(journalFile)).toBe(true);
      await core.read('kms_key', again.state!);
      expect(existsSync(journalFile)).toBe(false);
    },
    patient(60_000),
  );

  it(
    'a refresh completes a replacement cut short: the old key is revoked and reported gone, and the create Terraform then plans adopts the stored new key',
    async () => {
      const core = await provider();
      const config = core.config('kms_key', { project_env: ENV, client: 'globex', name: 'cut' });
      const old = (await core.apply('kms_key', null, (await core.plan('kms_key', null, config)).planned, config))
        .state!;
      await core.read('kms_key', old); // Terraform saved it: confirmed
      // -replace with create_before_destroy: the new key is created and stored, then Terraform is
      // killed before it records it (and before it destroys the old one).
      expect(errors((await core.plan('kms_key', old, config)).diagnostics)).toEqual([]);
      const created = await core.apply('kms_key', null, (await core.plan('kms_key', null, config)).planned, config);
      expect(errors(created.diagnostics)).toEqual([]);
      providers.at(-1)!.kill();
      expect(liveKeys('globex', 'cut')).toHaveLength(2);

      // The next plan refreshes the saved state, which still names the old key: the store holds
      // the new one, so the old key is revoked and the object reported gone.
      const refreshed = await (await provider()).read('kms_key', old);
      expect(refreshed).toBeNull();
      expect(liveKeys('globex', 'cut').map((k) => k.id)).toEqual([created.state!.key_id]);
      // Terraform plans a create: it adopts the stored key, issuing nothing.
      const before = issues();
      const again = await createKey(await provider(), 'globex', 'cut');
      expect(errors(again.diagnostics)).toEqual([]);
      expect(issues()).toBe(before);
      expect(again.state).toMatchObject({ key_id: created.state!.key_id, key_prefix: created.state!.key_prefix });
      expect(liveKeys('globex', 'cut').map((k) => k.id)).toEqual([created.state!.key_id]);
      const raw = (await decryptStore(storeFile, ageKeyFile))[`${ENV}/globex/cut`]!;
      expect(await validates('globex', 'cut', raw)).toBe(true);
    },
    patient(60_000),
  );

  it(
    'a replacement killed with its new key journaled but not stored: the refresh flushes the journal first, then completes it',
    async () => {
      const core = await provider();
      const config = core.config('kms_key', { project_env: ENV, client: 'globex', name: 'journaled' });
      const old = (await core.apply('kms_key', null, (await core.plan('kms_key', null, config)).planned, config))
        .state!;
      await core.read('kms_key', old);
      // -replace with create_before_destroy: the provider is killed once the new key is journaled,
      // before its store write. Terraform keeps the old object as the resource's current one.
      const trace = path.join(dir, 'trace-journaled');
      const slow = await provider({ KMS_SYNC_TEST_PAUSE: 'after-journal:10000', KMS_SYNC_TEST_TRACE: trace });
      const planned = (await slow.plan('kms_key', null, config)).planned;
      void slow.apply('kms_key', null, planned, config).catch(() => undefined);
      await waitFor(() => existsSync(trace) && readFileSync(trace, 'utf8').includes('after-journal'), 20_000);
      providers.at(-1)!.kill();
      rmSync(trace, { force: true });
      const gens = liveKeys('globex', 'journaled');
      expect(gens).toHaveLength(2);
      const fresh = gens.find((k) => k.id !== old.key_id)!;
      const held = async () => (await decryptStore(storeFile, ageKeyFile))[`${ENV}/globex/journaled`]!;
      expect((await held()).startsWith(fresh.keyPrefix)).toBe(false); // only in the journal

      // The refresh flushes the journal: the store holds the new key, the old one is revoked and
      // its object reported gone; the create Terraform plans adopts the new key.
      expect(await (await provider()).read('kms_key', old)).toBeNull();
      expect((await held()).startsWith(fresh.keyPrefix)).toBe(true);
      const before = issues();
      const again = await createKey(await provider(), 'globex', 'journaled');
      expect(errors(again.diagnostics)).toEqual([]);
      expect(issues()).toBe(before);
      expect(again.state).toMatchObject({ key_id: fresh.id });
      expect(liveKeys('globex', 'journaled').map((k) => k.id)).toEqual([fresh.id]);
      expect(await validates('globex', 'journaled', await held())).toBe(true);
    },
    patient(60_000),
  );

  for (const order of ['deposed first', 'current first'] as const) {
    it(
      `a replacement whose old key's revoke was cut short (${order}): the refresh and the destroy of the deposed object never revoke the key the state tracks`,
      async () => {
        const name = `dep${order === 'deposed first' ? 1 : 2}`;
        const core = await provider();
        const config = core.config('kms_key', { project_env: ENV, client: 'globex', name });
        const old = (await core.apply('kms_key', null, (await core.plan('kms_key', null, config)).planned, config))
          .state!;
        await core.read('kms_key', old);
        // create_before_destroy: the new key is created, stored and saved by Terraform (current),
        // the old object deposed; the provider is killed before the old key's revoke lands.
        const created = (await core.apply('kms_key', null, (await core.plan('kms_key', null, config)).planned, config))
          .state!;
        providers.at(-1)!.kill();
        // The re-apply refreshes both objects of the resource, in either order, then destroys the
        // deposed one if it is still there.
        const plan = await provider();
        let deposed: Record<string, unknown> | null;
        let current: Record<string, unknown> | null;
        if (order === 'deposed first') {
          deposed = await plan.read('kms_key', old);
          current = await plan.read('kms_key', created);
        } else {
          current = await plan.read('kms_key', created);
          deposed = await plan.read('kms_key', old);
        }
        expect(current).toMatchObject({ key_id: created.key_id });
        if (deposed) {
          expect(deposed).toMatchObject({ key_id: old.key_id });
          const apply = await provider();
          const gone = await apply.apply('kms_key', deposed, null, null);
          expect(errors(gone.diagnostics)).toEqual([]);
        }
        expect(liveKeys('globex', name).map((k) => k.id)).toEqual([created.key_id]);
        const raw = (await decryptStore(storeFile, ageKeyFile))[`${ENV}/globex/${name}`]!;
        expect(await validates('globex', name, raw)).toBe(true);
      },
      patient(60_000),
    );
  }

  it(
    'a key the store holds whose state Terraform lost: the plan marks it, the apply (another process) adopts it; the create half of a replacement in the marking process does not',
    async () => {
      // Applied and saved by Terraform (a refresh showed it the key), then the state is lost.
      const core = await provider();
      const config = core.config('kms_key', { project_env: ENV, client: 'globex', name: 'lost' });
      const kept = (await core.apply('kms_key', null, (await core.plan('kms_key', null, config)).planned, config))
        .state!;
      await core.read('kms_key', kept);
      providers.at(-1)!.kill();
      // terraform plan (one process), then terraform apply's own walk (another): the key is adopted.
      expect(errors((await (await provider()).plan('kms_key', null, config)).diagnostics)).toEqual([]);
      const before = issues();
      const adopted = await createKey(await provider(), 'globex', 'lost');
      expect(errors(adopted.diagnostics)).toEqual([]);
      expect(issues()).toBe(before);
      expect(adopted.state).toMatchObject({ key_id: kept.key_id, key_prefix: kept.key_prefix });
      expect(liveKeys('globex', 'lost').map((k) => k.id)).toEqual([kept.key_id]);

      // The apply walk of a create_before_destroy replacement plans its create with no prior state
      // too: in that process the key is marked by the process itself, so a new key is issued and
      // stored, and the old one ends.
      const apply = await provider();
      await apply.read('kms_key', adopted.state!);
      providers.at(-1)!.kill();
      const walk = await provider();
      const planned = (await walk.plan('kms_key', null, config)).planned;
      const created = await walk.apply('kms_key', null, planned, config);
      expect(errors(created.diagnostics)).toEqual([]);
      expect(created.state!.key_id).not.toBe(kept.key_id);
      expect(liveKeys('globex', 'lost').map((k) => k.id)).toEqual([created.state!.key_id]);
      const raw = (await decryptStore(storeFile, ageKeyFile))[`${ENV}/globex/lost`]!;
      expect(await validates('globex', 'lost', raw)).toBe(true);
    },
    patient(60_000),
  );

  it(
    'revokes a stray key of the same name on a client it owns, once the new key is stored, and says so',
    async () => {
      const stray = await strayKey('globex', 'stray');
      const applied = await createKey(await provider(), 'globex', 'stray');
      expect(errors(applied.diagnostics)).toEqual([]);
      const warning = applied.diagnostics.find((d) => d.severity === 'WARNING')!;
      expect(warning.summary).toBe('Untracked keys revoked');
      expect(warning.detail).toContain(stray);
      expect(liveKeys('globex', 'stray').map((k) => k.id)).toEqual([applied.state!.key_id]);
    },
    patient(60_000),
  );

  it(
    'refuses, asking for an import, on a client it does not own; issues nothing',
    async () => {
      const stray = await strayKey('initech', 'theirs');
      const before = issues();
      const applied = await createKey(await provider(), 'initech', 'theirs');
      const [error] = errors(applied.diagnostics);
      expect(error!.summary).toBe('Untracked key of the same name');
      expect(error!.detail).toMatch(/terraform import/);
      expect(issues()).toBe(before);
      expect(liveKeys('initech', 'theirs').map((k) => k.id)).toEqual([stray]);
    },
    patient(60_000),
  );
});

describe('generations of a rotated key (create_before_destroy with rotation_overlap)', () => {
  /** The overlap is real time: scaled to the machine's load, so that three rotations fit inside it. */
  const OVERLAP_S = Math.ceil(patient(4_000) / 1000);
  /**
   * One rotation as core runs create_before_destroy: the plan (with the prior state: Terraform
   * knows the old key), the new key created, then the old one destroyed.
   */
  async function rotate(core: Core, prior: Record<string, unknown>) {
    const config = core.config('kms_key', {
      project_env: ENV,
      client: 'globex',
      name: 'rot',
      rotation_overlap: `${OVERLAP_S}s`,
    });
    expect(errors((await core.plan('kms_key', prior, config)).diagnostics)).toEqual([]);
    const plan = await core.plan('kms_key', null, config);
    const created = await core.apply('kms_key', null, plan.planned, config);
    expect(errors(created.diagnostics)).toEqual([]);
    seen.push(text(created));
    const destroyed = await core.apply('kms_key', prior, null, null);
    expect(errors(destroyed.diagnostics)).toEqual([]);
    return created.state!;
  }

  it(
    'keeps overlap generations while they last, and revokes them on the next write of the key (create, update) once expired',
    async () => {
      const core = await provider();
      const config = core.config('kms_key', {
        project_env: ENV,
        client: 'globex',
        name: 'rot',
        rotation_overlap: `${OVERLAP_S}s`,
      });
      const first = (await core.apply('kms_key', null, (await core.plan('kms_key', null, config)).planned, config))
        .state!;
      const second = await rotate(core, first);
      const third = await rotate(core, second);
      // Within the overlap: the two older generations stay valid beside the current one.
      expect(
        liveKeys('globex', 'rot')
          .map((k) => k.id)
          .sort(),
      ).toEqual([first.key_id, second.key_id, third.key_id].sort());
      await sleep(OVERLAP_S * 1000 + 500);
      // Expired since: the next write of the key revokes them (the service would keep listing them).
      const fourth = await rotate(core, third);
      expect(
        liveKeys('globex', 'rot')
          .map((k) => k.id)
          .sort(),
      ).toEqual([third.key_id, fourth.key_id].sort());
      // An update of the key (another write) revokes the overlap generation once it has expired too.
      await sleep(OVERLAP_S * 1000 + 500);
      const config2 = core.config('kms_key', {
        project_env: ENV,
        client: 'globex',
        name: 'rot',
        rotation_overlap: `${OVERLAP_S}s`,
        auto_rotate: true,
      });
      const plan = await core.plan('kms_key', fourth, config2);
      const updated = await core.apply('kms_key', fourth, plan.planned, config2);
      expect(errors(updated.diagnostics)).toEqual([]);
      expect(liveKeys('globex', 'rot').map((k) => k.id)).toEqual([fourth.key_id]);
      // destroy: every generation the resource owns goes.
      const gone = await core.apply('kms_key', updated.state!, null, null);
      expect(errors(gone.diagnostics)).toEqual([]);
      expect(liveKeys('globex', 'rot')).toEqual([]);
    },
    patient(60_000),
  );
});

describe('no key issued', () => {
  it(
    'after a store write failed in the same process: no request at all',
    async () => {
      const core = await provider();
      // The store breaks while a key is on its way (the service holds the response a little).
      emu.addFault({
        method: 'PUT',
        route: '/client/{client_uuid}',
        mode: 'delay-after-commit',
        delayMs: 300,
        times: 1,
      });
      const sent = issues();
      const first = createKey(core, 'globex', 'broken-1');
      await waitFor(() => issues() !== sent, 10_000);
      await sleep(50);
      renameSync(storeFile, `${storeFile}.aside`);
      mkdirSync(storeFile);
      try {
        const firstErr = errors((await first).diagnostics)[0]!;
        expect(firstErr.summary, firstErr.detail).toBe('Key issued, secret store write failed');
        const before = issues();
        const second = await createKey(core, 'globex', 'broken-2');
        const [error] = errors(second.diagnostics);
        expect(error!.summary).toBe('No key issued: the secret store failed earlier in this apply');
        expect(error!.detail).toMatch(/safe in the journal/);
        expect(error!.detail).toMatch(/kms-sync secrets flush/);
        expect(issues()).toBe(before);
      } finally {
        emu.clearFaults();
        rmSync(storeFile, { recursive: true, force: true });
        renameSync(`${storeFile}.aside`, storeFile);
      }
    },
    patient(60_000),
  );

  it(
    'in CI into a local store file, unless KMS_SYNC_ALLOW_LOCAL_STORE=1',
    async () => {
      const before = issues();
      const refused = await createKey(await provider({ CI: 'true' }), 'globex', 'ci');
      const [error] = errors(refused.diagnostics);
      expect(error!.summary).toBe('Refusing to issue keys into a local store file in CI');
      expect(error!.detail).toMatch(/secret_store/);
      expect(error!.detail).toMatch(/commits and pushes/);
      expect(issues()).toBe(before);
      const allowed = await createKey(await provider({ CI: 'true', KMS_SYNC_ALLOW_LOCAL_STORE: '1' }), 'globex', 'ci');
      expect(errors(allowed.diagnostics)).toEqual([]);
      expect(liveKeys('globex', 'ci')).toHaveLength(1);
    },
    patient(60_000),
  );
});
