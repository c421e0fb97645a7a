// kms_key_secret, the ephemeral resource, and write-only attributes at the protocol level (no
// terraform binary: the harness plays Terraform core against the built provider). The secret is
// opened from the store the key went to and checked before it is handed over: the key asked for,
// live in this service. A secret holding another key, a revoked key or nothing is refused with a
// diagnostic that never carries a raw value. Write-only attributes are null in every state the
// provider answers and are refused when the Terraform does not say it handles them (< 1.11).
// The recipe with the real terraform binary is test/provider/ephemeral-terraform.test.ts.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { createProvider } from '../../src/provider/provider.js';
import { Journal } from '../../src/secrets/journal.js';
import { RAW_KEY_PATTERN, repoRoot, workspace } from '../support/cli.js';
import { Core, dyn, errors, mp, startProvider, unmp, type Diagnostic, type ProviderProcess } from './harness.js';
import { decryptStore } from './terraform-support.js';
import { patient, waitFor } from '../support/patience.js';

const API_KEY = 'sk_test_ephemeral0123456789';
const ENV = 'acme-production';
const SCHEMA_FILE = path.join(repoRoot, 'schemas', 'terraform-provider-kms.json');
const schemaDoc = JSON.parse(readFileSync(SCHEMA_FILE, 'utf8'));
const schema = Object.values(schemaDoc.provider_schemas)[0] as Core['schema'] & {
  ephemeral_resource_schemas: Record<string, any>;
};
const EPHEMERAL_ATTRS = Object.keys(schema.ephemeral_resource_schemas.kms_key_secret.block.attributes);

let emu: RunningEmulator;
let dir: string;
let p: ProviderProcess;
let core: Core;
let keyState: Record<string, unknown>;
/** Every response of the provider, as text: none may hold a raw key, except the opened results. */
const answers: string[] = [];
const text = (x: unknown) =>
  JSON.stringify(x, (_k, v) =>
    v instanceof Uint8Array || (v && v.type === 'Buffer') ? Buffer.from(v.data ?? v).toString('latin1') : v,
  );

async function open(
  values: Record<string, unknown>,
  provider: ProviderProcess = p,
): Promise<{ result: Record<string, unknown> | null; diagnostics: Diagnostic[] }> {
  const config = mp(Object.fromEntries(EPHEMERAL_ATTRS.map((a) => [a, values[a] ?? null])));
  const res = await provider.call('OpenEphemeralResource', {
    type_name: 'kms_key_secret',
    config,
    client_capabilities: { write_only_attributes_allowed: true },
  });
  if (errors(res.diagnostics).length) answers.push(text(res));
  return { result: unmp(res.result), diagnostics: res.diagnostics };
}

async function validate(values: Record<string, unknown>): Promise<Diagnostic[]> {
  const config = mp(Object.fromEntries(EPHEMERAL_ATTRS.map((a) => [a, values[a] ?? null])));
  return (await p.call('ValidateEphemeralResourceConfig', { type_name: 'kms_key_secret', config })).diagnostics;
}

const stored = async (key = 'primary') =>
  (await decryptStore(path.join(dir, '.kms-sync', 'secrets.sops.yaml'), path.join(dir, 'age', 'keys.txt')))[
    `${ENV}/globex/${key}`
  ];

/** The ids of the raw keys the journal holds (decrypted with the folder's age identity). */
const journaledKeys = async () =>
  (
    await new Journal(path.join(dir, '.kms-sync', 'journal'), {
      env: { SOPS_AGE_KEY_FILE: path.join(dir, 'age', 'keys.txt') },
    }).pending()
  ).map((k) => k.meta.keyId);

/** A provider process in the configuration folder, configured as Terraform does (`env` added to its environment). */
async function provider(env: NodeJS.ProcessEnv = {}): Promise<ProviderProcess> {
  const started = await startProvider({
    cwd: dir,
    env: { KMS_API_URL: emu.url, KMS_API_KEY: API_KEY, SOPS_AGE_KEY_FILE: path.join(dir, 'age', 'keys.txt'), ...env },
  });
  const configured = await started.call('ConfigureProvider', {
    terraform_version: '1.11.4',
    config: mp({ url: null, api_key: null, owner: null, base_dir: null, take_ownership: null, secret_store: dyn([]) }),
  });
  expect(errors(configured.diagnostics)).toEqual([]);
  return started;
}

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  dir = workspace();
  p = await provider();
  core = new Core(p, schema);
  await core.converge('kms_project', null, { slug: 'acme', name: 'Acme' });
  await core.converge('kms_environment', null, {
    project: 'acme',
    type: 'production',
    url: 'https://api.acme.example',
  });
  await core.converge('kms_template', null, { project_env: ENV, name: 'gold', rate_limit_day: 1000 });
  await core.converge('kms_client', null, { project_env: ENV, name: 'globex', template: 'gold' });
  keyState = (await core.converge('kms_key', null, {
    project_env: ENV,
    client: 'globex',
    name: 'primary',
    ttl: '30d',
  }))!;
}, patient(60_000));

afterAll(async () => {
  await p?.shutdown();
  await emu?.close();
  for (const a of answers) expect(a).not.toMatch(RAW_KEY_PATTERN);
});

describe('kms_key_secret (ephemeral resource, protocol 6)', () => {
  it('is declared in the metadata and the schema, its value sensitive', async () => {
    const meta = await p.call('GetMetadata', {});
    expect(meta.ephemeral_resources.map((r: { type_name: string }) => r.type_name)).toEqual(['kms_key_secret']);
    const s = await p.call('GetProviderSchema', {});
    const attrs = Object.fromEntries(
      s.ephemeral_resource_schemas.kms_key_secret.block.attributes.map((a: any) => [a.name, a]),
    );
    expect(attrs.value).toMatchObject({ computed: true, sensitive: true, optional: false });
    expect(attrs.key_id).toMatchObject({ optional: true, computed: true });
  });

  it('opens the raw key the store holds, by address and key id or by key id alone', async () => {
    const raw = await stored();
    expect(raw).toMatch(RAW_KEY_PATTERN);
    const byAddress = await open({ key_id: keyState.key_id, project_env: ENV, client: 'globex', name: 'primary' });
    expect(errors(byAddress.diagnostics)).toEqual([]);
    expect(byAddress.result).toMatchObject({
      value: raw,
      key_id: keyState.key_id,
      key_prefix: keyState.key_prefix,
      expires_at: keyState.expires_at,
      project_env: ENV,
      client: 'globex',
      name: 'primary',
      secret_name: `${ENV}/globex/primary`,
      secret_store: null,
    });
    const byId = await open({ key_id: keyState.key_id });
    expect(errors(byId.diagnostics)).toEqual([]);
    expect(byId.result).toMatchObject({ value: raw, project_env: ENV, client: 'globex', name: 'primary' });
    const renew = await p.call('RenewEphemeralResource', { type_name: 'kms_key_secret' });
    const close = await p.call('CloseEphemeralResource', { type_name: 'kms_key_secret' });
    expect([renew.diagnostics, close.diagnostics]).toEqual([[], []]);
  });

  it('says what is missing from a configuration that names no key', async () => {
    expect((await validate({})).map((d) => d.summary)).toEqual(['Which key?']);
    expect((await validate({ project_env: ENV, client: 'globex' })).map((d) => d.summary)).toEqual([
      'Incomplete key address',
    ]);
    expect(errors(await validate({ key_id: keyState.key_id }))).toEqual([]);
    expect((await validate({ key_id: 'x', secret_store: 'not a name' })).map((d) => d.summary)).toEqual([
      'Invalid secret_store',
    ]);
  });

  it('refuses a secret that holds another key, an unknown store, and a missing secret', async () => {
    const other = await open({
      key_id: '00000000-0000-4000-8000-000000000000',
      project_env: ENV,
      client: 'globex',
      name: 'primary',
    });
    expect(errors(other.diagnostics).map((d) => d.summary)).toEqual(['Secret holds another key']);
    expect(other.result).toBeNull();
    expect((await open({ key_id: keyState.key_id, secret_store: 'vault' })).diagnostics.map((d) => d.summary)).toEqual([
      'Unknown secret store',
    ]);
    expect(
      (await open({ project_env: ENV, client: 'globex', name: 'secondary' })).diagnostics.map((d) => d.summary),
    ).toEqual(['Key secret not found']);
  });

  it("never delivers a key that is no longer live (revoked behind Terraform's back)", async () => {
    const client = (await core.read('kms_client', {
      ...core.config('kms_client', { project_env: ENV, name: 'globex', template: 'gold' }),
      id: `${ENV}/globex`,
    }))!;
    const res = await fetch(
      `${emu.url}/client/${client.client_uuid as string}?project_env=${ENV}&keyId=${keyState.key_id as string}`,
      {
        method: 'DELETE',
        headers: { 'x-api-key': API_KEY },
      },
    );
    expect(res.status, await res.text()).toBeLessThan(300);
    const revoked = await open({ key_id: keyState.key_id, project_env: ENV, client: 'globex', name: 'primary' });
    expect(errors(revoked.diagnostics).map((d) => d.summary)).toEqual(['Key not live']);
    expect(revoked.result).toBeNull();
  });

  it(
    'opens a key a killed run journaled but never stored, by key id alone: the journal is flushed into the store first',
    async () => {
      // A provider killed between the journal and the store (the crash campaign's after-journal window).
      const trace = path.join(dir, 'trace');
      const doomed = await provider({ KMS_SYNC_TEST_PAUSE: 'after-journal:600000', KMS_SYNC_TEST_TRACE: trace });
      const config = core.config('kms_key', { project_env: ENV, client: 'globex', name: 'crashed', ttl: '30d' });
      const doomedCore = new Core(doomed, schema);
      const plan = await doomedCore.plan('kms_key', null, config);
      expect(errors(plan.diagnostics)).toEqual([]);
      const applying = doomedCore.apply('kms_key', null, plan.planned, config).catch(() => undefined);
      const journaled = () => existsSync(trace) && readFileSync(trace, 'utf8').includes('after-journal');
      expect(await waitFor(journaled, 60_000)).toBe(true);
      doomed.kill();
      await applying;
      const globex = (emu.service.toJSON().projects[0] as any).envs[0].clients.find((c: any) => c.name === 'globex');
      const keyId: string = globex.keys.find((k: any) => k.name === 'crashed').id;
      expect(await stored('crashed')).toBeUndefined();
      expect(await journaledKeys()).toEqual([keyId]);

      // The next run's first read names the key by its id only.
      const next = await provider();
      try {
        const byId = await open({ key_id: keyId }, next);
        expect(errors(byId.diagnostics)).toEqual([]);
        expect(byId.result).toMatchObject({ key_id: keyId, project_env: ENV, client: 'globex', name: 'crashed' });
        expect(byId.result!.value).toMatch(RAW_KEY_PATTERN);
        expect(await stored('crashed')).toBe(byId.result!.value);
        expect(await journaledKeys()).toEqual([]); // its marks of unconfirmed keys stay; no raw key does
      } finally {
        await next.shutdown();
      }
    },
    patient(120_000),
  );
});

describe('write-only attributes (the engine, whatever the resource)', () => {
  // No kms_* argument is a secret the user supplies (docs/terraform-provider.md says why), so the
  // engine's handling is shown on a copy of the schema with one write-only argument added.
  const withWriteOnly = () => {
    const doc = structuredClone(schemaDoc);
    Object.values<any>(doc.provider_schemas)[0].resource_schemas.kms_project.block.attributes.note_wo = {
      type: 'string',
      optional: true,
      sensitive: true,
      write_only: true,
      description_kind: 'plain',
    };
    const file = path.join(workspace(), 'schema.json');
    writeFileSync(file, JSON.stringify(doc));
    return createProvider({ env: {}, schemaFile: file });
  };
  const project = {
    id: null,
    slug: 'acme',
    name: 'Acme',
    description: null,
    protected: null,
    note_wo: 'hunter2-write-only',
  };

  it('refuses a write-only value from a Terraform that cannot keep it out of state (< 1.11)', async () => {
    const impl = withWriteOnly();
    const old = (await impl.ValidateResourceConfig!({ type_name: 'kms_project', config: mp(project) })) as {
      diagnostics: Diagnostic[];
    };
    expect(old.diagnostics.map((d) => d.summary)).toEqual(['Write-only attribute needs Terraform >= 1.11']);
    expect(old.diagnostics[0]!.detail).not.toContain('hunter2');
    const current = (await impl.ValidateResourceConfig!({
      type_name: 'kms_project',
      config: mp(project),
      client_capabilities: { write_only_attributes_allowed: true },
    })) as { diagnostics: Diagnostic[] };
    expect(current.diagnostics).toEqual([]);
    const unset = (await impl.ValidateResourceConfig!({
      type_name: 'kms_project',
      config: mp({ ...project, note_wo: null }),
    })) as { diagnostics: Diagnostic[] };
    expect(unset.diagnostics).toEqual([]);
  });

  it('answers null for a write-only attribute in the planned state', async () => {
    const impl = withWriteOnly();
    const res = (await impl.PlanResourceChange!({
      type_name: 'kms_project',
      prior_state: mp(null),
      proposed_new_state: mp(project),
      config: mp(project),
    })) as { planned_state: { msgpack: Buffer }; diagnostics: Diagnostic[] };
    expect(errors(res.diagnostics)).toEqual([]);
    expect(unmp(res.planned_state)).toMatchObject({ slug: 'acme', note_wo: null });
    expect(text(res)).not.toContain('hunter2');
  });
});
