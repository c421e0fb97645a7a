// Azure Key Vault backend through the official SDK against a local HTTPS Key Vault (self-signed
// certificate trusted through the SDK's tlsOptions; a credential that returns a fake token).
import type { AccessToken, TokenCredential } from '@azure/core-auth';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  AZURE_CONTENT_TYPE,
  AZURE_NAME_RE,
  openAzureKeyVaultStore,
  type AzureKeyVaultStore,
} from '../../../src/secrets/backends/azure.js';
import { PartialWriteError } from '../../../src/secrets/backends/cloud-names.js';
import { SecretStoreError, type OpenStoreOptions } from '../../../src/secrets/store.js';
import { expectNoSecrets, fakeKey, meta } from '../helpers.js';
import { AZURE_FAKE_TOKEN, startAzureFake, type AzureFake } from './azure-fake.js';
import { storeContract } from './contract.js';
import { expectNoSecretInUrlOrHeaders } from './fake-http.js';

let fake: AzureFake;
const scopes: string[] = [];
const credential: TokenCredential = {
  getToken: (s: string | string[]): Promise<AccessToken> => {
    scopes.push(...(Array.isArray(s) ? s : [s]));
    return Promise.resolve({ token: AZURE_FAKE_TOKEN, expiresOnTimestamp: Date.now() + 3_600_000 });
  },
};

beforeAll(async () => {
  fake = await startAzureFake();
});
afterAll(async () => {
  await fake.close();
});

const open = (query = '', opts: OpenStoreOptions = {}): Promise<AzureKeyVaultStore> =>
  openAzureKeyVaultStore(`azure-kv://127.0.0.1:${fake.port}/kms-sync${query}`, opts, {
    credential,
    recoverPollMs: 10,
    clientOptions: {
      tlsOptions: { ca: fake.cert },
      retryOptions: { maxRetries: 0 },
      // The fake's challenge names vault.azure.net, which 127.0.0.1 is not a subdomain of.
      disableChallengeResourceVerification: true,
    },
  });

storeContract('azure-kv (local HTTPS Key Vault)', async () => ({ store: await open(), legal: AZURE_NAME_RE }));

describe('azure-kv: wire format through the official SDK', () => {
  let store: AzureKeyVaultStore;
  beforeEach(async () => {
    store = await open();
    fake.requests.length = 0;
    fake.fault = undefined;
    fake.denied = [];
    fake.secrets.clear();
  });
  const calls = (): string[] =>
    fake.requests.map((r) => `${r.method} ${decodeURIComponent(r.path)}${r.headers.authorization ? '' : ' (no auth)'}`);

  it('answers the bearer challenge, then PUTs the value with tags and content type', async () => {
    const name = store.secretName('acme-prod/web/primary');
    expect(name).toBe('kms-sync--acme-prod--web--primary');
    const value = fakeKey();
    const m = meta('acme-prod/web/primary');
    await store.put(name, value, m);
    // Challenge first (the SDK withholds the request until authenticated), then the retry check, then the write.
    expect(calls()).toEqual([`GET /secrets/${name}/ (no auth)`, `GET /secrets/${name}/`, `PUT /secrets/${name}`]);
    const put = fake.requests[2];
    expect(put!.headers.authorization).toBe(`Bearer ${AZURE_FAKE_TOKEN}`);
    expect(put!.query.get('api-version')).toMatch(/^(7\.\d|\d{4}-\d\d-\d\d)/);
    expect(scopes).toContain('https://vault.azure.net/.default');
    const body = JSON.parse(put!.body) as { value: string; tags: Record<string, string>; contentType: string };
    expect(body.value).toBe(value);
    expect(body.contentType).toBe(AZURE_CONTENT_TYPE);
    expect(body.tags).toMatchObject({
      projectEnv: 'acme-prod',
      client: 'web',
      key: 'primary',
      keyId: m.keyId,
      issuedAt: m.issuedAt,
      'managed-by': 'kms-sync',
    });
    expect(body.tags.writeToken).toMatch(/^[0-9a-f-]{36}$/);
    expectNoSecretInUrlOrHeaders(fake.requests, [value]);
  });

  it('a retried write of the same key adds no version', async () => {
    const name = store.secretName('acme-prod/web/primary');
    const value = fakeKey();
    const m = meta('acme-prod/web/primary');
    await store.put(name, value, m);
    fake.requests.length = 0;
    await store.put(name, value, m);
    expect(calls()).toEqual([`GET /secrets/${name}/`]);
    expect(fake.secrets.get(name)!.versions).toHaveLength(1);
  });

  it('rotation sets a new version; exists reads version properties only; read gets the latest', async () => {
    const name = store.secretName('acme-prod/web/primary');
    const v1 = fakeKey();
    const v2 = fakeKey();
    await store.put(name, v1, meta('acme-prod/web/primary'));
    await store.put(name, v2, meta('acme-prod/web/primary'));
    expect(fake.secrets.get(name)!.versions.map((v) => v.value)).toEqual([v1, v2]);
    fake.requests.length = 0;
    expect(await store.exists(name)).toBe(true);
    expect(calls()).toEqual([`GET /secrets/${name}/versions`]);
    expect(await store.read(name)).toBe(v2);
    expect(await store.exists(store.secretName('acme-prod/web/other'))).toBe(false);
  });

  it('a soft-deleted secret of the same name is recovered (onDeleted=recover) or named as a conflict (onDeleted=fail)', async () => {
    const name = store.secretName('acme-prod/web/primary');
    await store.put(name, fakeKey(), meta('acme-prod/web/primary'));
    fake.softDelete(name);
    expect(await store.exists(name)).toBe(false);

    const strict = await open('?onDeleted=fail');
    const value = fakeKey();
    const e = (await strict.put(name, value, meta('acme-prod/web/primary')).then(
      () => undefined,
      (x: unknown) => x,
    )) as SecretStoreError;
    expect(e).toBeInstanceOf(SecretStoreError);
    expect(e.message).toMatch(
      /name conflict: secret 'kms-sync--acme-prod--web--primary' is soft-deleted.*az keyvault secret recover.*az keyvault secret purge/,
    );
    expectNoSecrets(e.message, [value]);

    const notices: string[] = [];
    const lenient = await open('', { onNotice: (n) => notices.push(n) });
    fake.requests.length = 0;
    await lenient.put(name, value, meta('acme-prod/web/primary'));
    const all = calls().filter((c) => !c.endsWith('(no auth)'));
    expect(all[0]).toBe(`GET /secrets/${name}/`); // the retry check: 404 while deleted
    const seen = all.slice(1);
    expect(seen[0]).toBe(`PUT /secrets/${name}`); // 409: deleted but recoverable
    expect(seen.at(-1)).toBe(`PUT /secrets/${name}`);
    expect(seen).toContain(`POST /deletedsecrets/${name}/recover`);
    // Between them only the recover poller's GETs of the secret (never a purge).
    expect(
      seen
        .slice(1, -1)
        .filter((c) => !c.startsWith('POST /deletedsecrets/'))
        .every((c) => c.replace(/\/$/, '') === `GET /secrets/${name}`),
    ).toBe(true);
    expect(await lenient.read(name)).toBe(value);
    expect(notices.join()).toMatch(/recovered soft-deleted secret/);
  });

  it('putMany that fails midway names exactly the entries that were not stored', async () => {
    const entries = ['a', 'b', 'c'].map((c) => ({
      name: store.secretName(`acme-prod/${c}/k`),
      value: fakeKey(),
      meta: meta(`acme-prod/${c}/k`),
    }));
    fake.fault = (r) =>
      r.method === 'PUT' && r.path.endsWith(entries[1]!.name) && r.headers.authorization
        ? { status: 400, body: { error: { code: 'BadParameter', message: 'simulated' } } }
        : undefined;
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
  });

  it('existsMany pages through the secret listing (no values) and ignores disabled secrets', async () => {
    fake.listPageSize = 2;
    try {
      const names = ['a', 'b', 'c'].map((c) => store.secretName(`acme-prod/${c}/k`));
      for (const n of names) await store.put(n, fakeKey(), meta('acme-prod/x/k'));
      fake.secrets.get(names[2]!)!.versions[0]!.enabled = false;
      fake.requests.length = 0;
      expect([...(await store.existsMany([...names, store.secretName('acme-prod/zz/k')]))].sort()).toEqual(
        names.slice(0, 2),
      );
      expect(calls()).toEqual(['GET /secrets', 'GET /secrets']);
      expect((await store.list()).map((l) => l.name)).toEqual(names.slice(0, 2));
    } finally {
      fake.listPageSize = 25;
    }
  });

  it('checkWritable lists and probes with a PATCH on a missing secret; 403 is NOT_WRITABLE with the role to grant', async () => {
    await store.checkWritable();
    expect(calls().filter((c) => !c.endsWith('(no auth)'))).toEqual([
      'GET /secrets',
      expect.stringMatching(/^PATCH \/secrets\/kms-sync-write-probe-[0-9a-f-]+\/0{32}$/),
    ]);
    expect(fake.secrets.size).toBe(0);
    fake.denied = [/^PATCH /];
    const e = (await store.checkWritable().then(
      () => undefined,
      (x: unknown) => x,
    )) as SecretStoreError;
    expect(e).toBeInstanceOf(SecretStoreError);
    expect(e.code).toBe('NOT_WRITABLE');
    expect(e.message).toMatch(/Key Vault Secrets Officer/);
  });

  it('rejects bad URIs', async () => {
    await expect(openAzureKeyVaultStore('azure-kv://a/x', {}, { credential })).rejects.toThrow(/not a Key Vault name/);
    await expect(openAzureKeyVaultStore('azure-kv://myvault/bad_prefix', {}, { credential })).rejects.toThrow(/prefix/);
    const s = await openAzureKeyVaultStore('azure-kv://MyVault', {}, { credential });
    expect(s.vaultUrl).toBe('https://myvault.vault.azure.net');
    const h = await openAzureKeyVaultStore('azure-kv://myvault.vault.azure.cn/p', {}, { credential });
    expect(h.vaultUrl).toBe('https://myvault.vault.azure.cn');
    expect(h.displayUri).toBe('azure-kv://myvault.vault.azure.cn/p');
  });
});
