// GCP Secret Manager backend through the official client (HTTP/1.1 REST transport) against a local
// REST v1 server. Credentials come from Application Default Credentials: a service-account key file
// made here, which the Google auth library turns into a self-signed JWT the fake verifies.
import { generateKeyPairSync } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PartialWriteError } from '../../../src/secrets/backends/cloud-names.js';
import {
  GCP_NAME_RE,
  openGcpSecretManagerStore,
  type GcpSecretManagerStore,
} from '../../../src/secrets/backends/gcp.js';
import { SecretStoreError, targetTag } from '../../../src/secrets/store.js';
import { expectNoSecrets, fakeKey, meta } from '../helpers.js';
import { storeContract } from './contract.js';
import { expectNoSecretInUrlOrHeaders } from './fake-http.js';
import { gerr, startGcpFake, type GcpFake } from './gcp-fake.js';
import { scratchDir } from '../../support/scratch.js';

const PROJECT = 'kms-sync-test';
const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const credDir = scratchDir('kms-sync-gcp-');
const credFile = path.join(credDir, 'sa.json');
fs.writeFileSync(
  credFile,
  JSON.stringify({
    type: 'service_account',
    project_id: PROJECT,
    private_key_id: 'kms-sync-test-key',
    private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }),
    client_email: `kms-sync@${PROJECT}.iam.gserviceaccount.com`,
    client_id: '1',
    token_uri: 'http://127.0.0.1:9/token',
  }),
  { mode: 0o600 },
);
process.env.GOOGLE_APPLICATION_CREDENTIALS = credFile;
delete process.env.GOOGLE_CLOUD_PROJECT;

let fake: GcpFake;
beforeAll(async () => {
  fake = await startGcpFake(PROJECT, publicKey);
});
afterAll(async () => {
  await fake.close();
  fs.rmSync(credDir, { recursive: true, force: true });
});

const open = (prefix = 'kms-sync'): Promise<GcpSecretManagerStore> =>
  openGcpSecretManagerStore(`gcp-sm://projects/${PROJECT}/${prefix}?endpoint=${encodeURIComponent(fake.url)}`);

storeContract('gcp-sm (local REST v1 server)', async () => ({ store: await open(), legal: GCP_NAME_RE }));

describe('gcp-sm: wire format through the official client', () => {
  let store: GcpSecretManagerStore;
  beforeEach(async () => {
    store = await open();
    fake.requests.length = 0;
    fake.fault = undefined;
    fake.denied = [];
    fake.secrets.clear();
  });
  const calls = (): string[] =>
    fake.requests.map(
      (r) => `${r.method} ${decodeURIComponent(r.path).replace(`/v1/projects/${PROJECT}/secrets`, '…')}`,
    );

  it('the target: exact in an annotation (what list returns), its targetTag in a label; a key without one removes both', async () => {
    const name = store.secretName('acme-prod/web/primary');
    const target = 'https://kms.example.com/api/v1#live';
    await store.put(name, fakeKey(), meta('acme-prod/web/primary', { target }));
    const s = fake.secrets.get(name)!;
    expect(s.annotations['kms-sync.target']).toBe(target);
    expect(s.labels.target).toBe(targetTag(target));
    expect(targetTag(target)).toMatch(/^t-[0-9a-f]{40}$/);
    expect((await store.list())[0]!.meta!.target).toBe(target);
    await store.put(name, fakeKey(), meta('acme-prod/web/primary'));
    const after = fake.secrets.get(name)!;
    expect(after.annotations).not.toHaveProperty('kms-sync.target');
    expect(after.labels).not.toHaveProperty('target');
    expect(after.labels['managed-by']).toBe('kms-sync');
  });

  it('a new secret: get (404), create with automatic replication and labels, addVersion with CRC32C, then annotations', async () => {
    const name = store.secretName('acme-prod/web/primary');
    expect(name).toBe('kms-sync__acme-prod__web__primary');
    const value = fakeKey();
    const m = meta('acme-prod/web/primary');
    await store.put(name, value, m);
    expect(calls()).toEqual([`GET …/${name}`, 'POST …', `POST …/${name}:addVersion`, `PATCH …/${name}`]);
    const [get, create, add, patch] = fake.requests;
    for (const r of fake.requests) {
      expect(r.headers.authorization).toMatch(/^Bearer [\w-]+\.[\w-]+\.[\w-]+$/);
      expect(String(r.headers['x-goog-api-client'])).toMatch(/gapic\/.* rest\//);
    }
    expect(fake.lastClaims).toMatchObject({
      iss: `kms-sync@${PROJECT}.iam.gserviceaccount.com`,
      sub: `kms-sync@${PROJECT}.iam.gserviceaccount.com`,
    });
    expect(get!.method).toBe('GET');
    expect(create!.query.get('secretId')).toBe(name);
    expect(JSON.parse(create!.body)).toMatchObject({
      replication: { automatic: {} },
      labels: { 'managed-by': 'kms-sync', 'project-env': 'acme-prod', client: 'web', key: 'primary' },
    });
    const addBody = JSON.parse(add!.body) as { payload: { data: string; dataCrc32c: string } };
    expect(Buffer.from(addBody.payload.data, 'base64').toString()).toBe(value);
    expect(addBody.payload.dataCrc32c).toMatch(/^\d+$/);
    expect(patch!.query.get('updateMask')).toBe('annotations,labels');
    const patched = JSON.parse(patch!.body) as { annotations: Record<string, string> };
    expect(patched.annotations).toMatchObject({
      'kms-sync.keyId': m.keyId,
      'kms-sync.client': 'web',
      'kms-sync.projectEnv': 'acme-prod',
    });
    expect(patched.annotations['kms-sync.writeToken']).toMatch(/^[0-9a-f-]{36}$/);
    expectNoSecretInUrlOrHeaders(fake.requests, [value]);
    expectNoSecrets(JSON.stringify(patched), [value]);
  });

  it('rotation adds a new version to the existing secret; a retried write of the same key adds none', async () => {
    const name = store.secretName('acme-prod/web/primary');
    const v1 = fakeKey();
    const m1 = meta('acme-prod/web/primary');
    await store.put(name, v1, m1);
    fake.requests.length = 0;
    await store.put(name, v1, m1); // retry after success
    expect(calls()).toEqual([`GET …/${name}`]);
    expect(fake.secrets.get(name)!.versions).toHaveLength(1);
    fake.requests.length = 0;
    const v2 = fakeKey();
    await store.put(name, v2, meta('acme-prod/web/primary'));
    expect(calls()).toEqual([`GET …/${name}`, `POST …/${name}:addVersion`, `PATCH …/${name}`]);
    expect(fake.secrets.get(name)!.versions.map((v) => v.data.toString())).toEqual([v1, v2]);
    fake.requests.length = 0;
    expect(await store.read(name)).toBe(v2);
    expect(calls()).toEqual([`GET …/${name}/versions/latest:access`]);
  });

  it('putMany that fails midway names exactly the entries that were not stored', async () => {
    const entries = ['a', 'b', 'c'].map((c) => ({
      name: store.secretName(`acme-prod/${c}/k`),
      value: fakeKey(),
      meta: meta(`acme-prod/${c}/k`),
    }));
    fake.fault = (r) =>
      r.path.endsWith(`${entries[1]!.name}:addVersion`) ? gerr(400, 'simulated rejection') : undefined;
    const e = (await store.putMany(entries).then(
      () => undefined,
      (x: unknown) => x,
    )) as PartialWriteError;
    expect(e).toBeInstanceOf(PartialWriteError);
    expect(e.stored).toEqual([entries[0]!.name]);
    expect(e.notStored).toEqual([entries[1]!.name, entries[2]!.name]);
    expect(e.message).toContain(`NOT stored: ${entries[1]!.name}, ${entries[2]!.name}`);
    expectNoSecrets(
      e.message,
      entries.map((x) => x.value),
    );
    fake.fault = undefined;
    await store.putMany(entries);
    expect([...fake.secrets.values()].map((s) => s.versions.length)).toEqual([1, 1, 1]);
  });

  it('existsMany: one paged list with a name filter; a secret without versions is not present', async () => {
    fake.listPageSize = 2;
    try {
      const names = ['a', 'b', 'c'].map((c) => store.secretName(`acme-prod/${c}/k`));
      for (const n of names) await store.put(n, fakeKey(), meta('acme-prod/x/k'));
      fake.secrets.set('kms-sync__acme-prod__empty__k', {
        name: 'kms-sync__acme-prod__empty__k',
        labels: {},
        annotations: {},
        replication: {},
        createTime: '2026-01-01T00:00:00Z',
        versions: [],
      });
      fake.requests.length = 0;
      const got = await store.existsMany([...names, 'kms-sync__acme-prod__empty__k', 'kms-sync__nope__x__y']);
      expect([...got].sort()).toEqual(names);
      const lists = fake.requests.filter((r) => r.method === 'GET' && r.path.endsWith('/secrets'));
      expect(lists).toHaveLength(2);
      expect(lists[0]!.query.get('filter')).toBe('name:kms-sync__');
      expect(calls().filter((c) => c.includes('versions/latest'))).toEqual([
        'GET …/kms-sync__acme-prod__empty__k/versions/latest',
      ]);
    } finally {
      fake.listPageSize = 250;
    }
  });

  it('checkWritable lists one secret and probes addVersion on a missing secret; PERMISSION_DENIED is NOT_WRITABLE', async () => {
    await store.checkWritable();
    expect(calls()[0]).toBe('GET …');
    expect(fake.requests[0]!.query.get('pageSize')).toBe('1');
    expect(calls()[1]).toMatch(/^POST …\/kms-sync-write-probe-[0-9a-f-]+:addVersion$/);
    expect(fake.secrets.size).toBe(0);
    fake.denied = [/:addVersion$/];
    const e = (await store.checkWritable().then(
      () => undefined,
      (x: unknown) => x,
    )) as SecretStoreError;
    expect(e).toBeInstanceOf(SecretStoreError);
    expect(e.code).toBe('NOT_WRITABLE');
    expect(e.message).toMatch(/permission denied.*secretmanager\.secrets/);
  });

  it('rejects bad URIs', async () => {
    await expect(openGcpSecretManagerStore('gcp-sm://kms-sync-test/x')).rejects.toThrow(/projects\/<project>/);
    await expect(openGcpSecretManagerStore('gcp-sm://projects/kms-sync-test/a/b')).rejects.toThrow(/prefix/);
    await expect(openGcpSecretManagerStore('gcp-sm://projects/kms-sync-test/a_b')).rejects.toThrow(/prefix/);
  });
});
