// GitHub Actions secrets backend against a fake REST API that validates every request and answer
// against GitHub's published description (@octokit/openapi); sealed boxes are opened with the
// noble libraries, an implementation independent of the libsodium the backend seals with.
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  openGitHubStore,
  parseGitHubUri,
  sealForGitHub,
  type GitHubSecretsStore,
} from '../../../src/secrets/backends/github.js';
import { meta } from '../helpers.js';
import { defineStoreContract, rejectionOf, valueTracker } from './support/contract-suite.js';
import { startFakeGitHub, type FakeGitHub, type FakeGitHubOptions } from './support/fake-github.js';
import { openSealedBox } from './support/sealed-box.js';
import { assertNoValuesInUrlsOrHeaders } from './support/recording-server.js';

const TOKEN = 'ghp_testtoken0123456789';
const fakes: FakeGitHub[] = [];
const keys = valueTracker();

async function fake(o: Partial<FakeGitHubOptions> = {}): Promise<FakeGitHub> {
  const f = await startFakeGitHub({ token: TOKEN, owner: 'acme', repo: 'infra', environments: ['production'], ...o });
  fakes.push(f);
  return f;
}

function storeFor(
  f: FakeGitHub,
  path = 'acme/infra',
  env: NodeJS.ProcessEnv = { GITHUB_TOKEN: TOKEN },
): Promise<GitHubSecretsStore> {
  return openGitHubStore(`github://${path}`, { env: { GITHUB_API_URL: f.url, ...env } });
}

/** Every sealed box the fake received, opened independently, by secret name (last write wins). */
function openedIndependently(f: FakeGitHub, scope = 'repo'): Map<string, string> {
  const bucket = [...(f.secrets.get(scope)?.values() ?? [])];
  return new Map(bucket.map((s) => [s.name, openSealedBox(f.privateKeys.get(s.key_id)!, s.encrypted_value)]));
}

afterEach(async () => {
  for (const f of fakes) expect(f.violations).toEqual([]);
  await Promise.all(fakes.splice(0).map((f) => f.close()));
});

let contractFake: FakeGitHub | undefined;
defineStoreContract({
  label: 'github (fake REST API)',
  open: async () => {
    contractFake ??= await startFakeGitHub({ token: TOKEN, owner: 'acme', repo: 'infra' });
    return openGitHubStore('github://acme/infra', { env: { GITHUB_API_URL: contractFake.url, GITHUB_TOKEN: TOKEN } });
  },
  canRead: false,
  listsMeta: false,
  legalName: /^[A-Z_][A-Z0-9_]*$/,
  cleanup: async () => {
    expect(contractFake?.violations).toEqual([]);
    await contractFake?.close();
  },
});

describe('github: sealed-box interop with an independent implementation (noble)', () => {
  it('what we PUT is a sealed box that opens to the raw key, and a tampered box does not open', async () => {
    const f = await fake();
    const store = await storeFor(f);
    const a = keys.next();
    const b = keys.next();
    await store.putMany([
      {
        name: store.secretName('acme-production/globex/primary'),
        value: a,
        meta: meta('acme-production/globex/primary'),
      },
      {
        name: store.secretName('acme-production/globex/secondary'),
        value: b,
        meta: meta('acme-production/globex/secondary'),
      },
    ]);
    const opened = openedIndependently(f);
    expect(opened.get('ACME_PRODUCTION__GLOBEX__PRIMARY')).toBe(a);
    expect(opened.get('ACME_PRODUCTION__GLOBEX__SECONDARY')).toBe(b);
    // Sealed boxes are randomised: the same value never encrypts the same way twice.
    const pk = (await import('libsodium-wrappers')).default;
    await pk.ready;
    const kp = pk.crypto_box_keypair();
    const pub = pk.to_base64(kp.publicKey, pk.base64_variants.ORIGINAL);
    const sk = pk.to_base64(kp.privateKey, pk.base64_variants.ORIGINAL);
    const c1 = await sealForGitHub(a, pub);
    const c2 = await sealForGitHub(a, pub);
    expect(c1).not.toBe(c2);
    expect(openSealedBox(sk, c1)).toBe(a);
    const tampered = Buffer.from(c1, 'base64');
    tampered[tampered.length - 1]! ^= 1;
    expect(() => openSealedBox(sk, tampered.toString('base64'))).toThrow();
    // Sealed for another recipient: does not open with this key.
    const other = pk.crypto_box_keypair();
    const forOther = await sealForGitHub(a, pk.to_base64(other.publicKey, pk.base64_variants.ORIGINAL));
    expect(() => openSealedBox(sk, forOther)).toThrow();
  });
});

describe('github: URI and names', () => {
  it('parses repository and environment forms, refuses the rest', () => {
    expect(parseGitHubUri('github://acme/infra', { env: {} })).toMatchObject({
      owner: 'acme',
      repo: 'infra',
      environment: undefined,
      prefix: '',
    });
    expect(parseGitHubUri('github://acme/infra/environments/prod%20eu?prefix=kms_', { env: {} })).toMatchObject({
      environment: 'prod eu',
      prefix: 'KMS_',
    });
    expect(
      parseGitHubUri('github://acme/infra', { env: { GITHUB_API_URL: 'https://ghe.example/api/v3' } }).apiUrl.href,
    ).toBe('https://ghe.example/api/v3/');
    expect(() => parseGitHubUri('github://acme', { env: {} })).toThrow(/expected github:\/\/owner\/repo/);
    expect(() => parseGitHubUri('github://acme/infra/branches/x', { env: {} })).toThrow(/environments/);
    expect(() => parseGitHubUri('github://ghp_x@acme/infra', { env: {} })).toThrow(/credentials do not belong/);
    expect(() => parseGitHubUri('github://acme/infra?prefix=GITHUB_X', { env: {} })).toThrow(/prefix/);
  });

  it('maps names to GitHub rules: upper case, __ between segments, a hash suffix when characters were replaced', async () => {
    const f = await fake();
    const s = await storeFor(f);
    expect(s.secretName('acme-production/globex/primary')).toBe('ACME_PRODUCTION__GLOBEX__PRIMARY');
    const lossy = s.secretName('acme_production/globex/primary');
    expect(lossy).toMatch(/^ACME_PRODUCTION__GLOBEX__PRIMARY___[A-Z2-7]{8}$/);
    expect(s.secretName('github/x/y')).toMatch(/^K_GITHUB__X__Y___[A-Z2-7]{8}$/);
    expect(s.secretName('9lives/x/y')).toMatch(/^K_9LIVES__X__Y___/);
    const pre = await storeFor(f, 'acme/infra?prefix=KMS_');
    expect(pre.secretName('acme-prod/web/primary')).toBe('KMS_ACME_PROD__WEB__PRIMARY');
  });
});

describe('github: wire protocol', () => {
  it('put: GET public-key once, then PUT {encrypted_value, key_id}; auth headers, no value outside the sealed box', async () => {
    const f = await fake();
    const store = await storeFor(f);
    const v1 = keys.next();
    const v2 = keys.next();
    await store.put('ACME_PROD__WEB__PRIMARY', v1, meta('acme-prod/web/primary'));
    await store.put('ACME_PROD__WEB__SECONDARY', v2, meta('acme-prod/web/secondary'));
    expect(f.requests.map((r) => `${r.method} ${r.rawPath}`)).toEqual([
      'GET /repos/acme/infra/actions/secrets/public-key',
      'PUT /repos/acme/infra/actions/secrets/ACME_PROD__WEB__PRIMARY',
      'PUT /repos/acme/infra/actions/secrets/ACME_PROD__WEB__SECONDARY',
    ]);
    for (const r of f.requests) {
      expect(r.headers.authorization).toBe(`Bearer ${TOKEN}`);
      expect(r.headers['x-github-api-version']).toBe('2022-11-28');
    }
    const put = f.requests[1]!;
    expect(Object.keys(put.json as object).sort()).toEqual(['encrypted_value', 'key_id']);
    expect((put.json as { key_id: string }).key_id).toBe(f.keyId);
    expect(put.body).not.toContain(v1);
    expect(put.body).not.toContain(Buffer.from(v1).toString('base64'));
    assertNoValuesInUrlsOrHeaders(f.requests, [v1, v2]);
    expect([...f.secrets.get('repo')!.keys()].sort()).toEqual(['ACME_PROD__WEB__PRIMARY', 'ACME_PROD__WEB__SECONDARY']);
  });

  it('environment secrets use the environment routes and key', async () => {
    const f = await fake();
    const store = await storeFor(f, 'acme/infra/environments/production');
    const v = keys.next();
    await store.put('ACME_PROD__WEB__PRIMARY', v, meta('acme-prod/web/primary'));
    expect(f.requests.map((r) => `${r.method} ${r.rawPath}`)).toEqual([
      'GET /repos/acme/infra/environments/production/secrets/public-key',
      'PUT /repos/acme/infra/environments/production/secrets/ACME_PROD__WEB__PRIMARY',
    ]);
    expect(await store.exists('ACME_PROD__WEB__PRIMARY')).toBe(true);
    expect(f.secrets.get('repo')?.size ?? 0).toBe(0);
    expect(openedIndependently(f, 'env:production').get('ACME_PROD__WEB__PRIMARY')).toBe(v);
    const missingEnv = await storeFor(f, 'acme/infra/environments/staging');
    const e = await rejectionOf(missingEnv.checkWritable(), keys.values);
    expect(e.message).toMatch(/HTTP 404.*Environments: read/);
  });

  it('a rotated repository key: the 422 answer makes the store fetch the key again and re-encrypt', async () => {
    const f = await fake();
    const store = await storeFor(f);
    await store.put('A__B__C', keys.next(), meta('a/b/c'));
    await f.rotateKey();
    const v = keys.next();
    await store.put('A__B__C', v, meta('a/b/c'));
    expect(f.requests.map((r) => `${r.method} ${r.rawPath.replace('/repos/acme/infra/actions/secrets', '')}`)).toEqual([
      'GET /public-key',
      'PUT /A__B__C',
      'PUT /A__B__C',
      'GET /public-key',
      'PUT /A__B__C',
    ]);
    expect(f.secrets.get('repo')!.get('A__B__C')!.key_id).toBe(f.keyId);
    expect(openedIndependently(f).get('A__B__C')).toBe(v);
  });

  it('existsMany and list use the paged list API (150 secrets: two pages), no per-name lookups', async () => {
    const f = await fake();
    const store = await storeFor(f);
    const names = Array.from({ length: 150 }, (_, i) => `S_${String(i).padStart(3, '0')}`);
    await store.putMany(names.map((n) => ({ name: n, value: keys.next(), meta: meta('a/b/c') })));
    f.requests.length = 0;
    const present = await store.existsMany([...names.slice(0, 3), 'S_149', 'NOT_THERE']);
    expect([...present].sort()).toEqual(['S_000', 'S_001', 'S_002', 'S_149']);
    expect(f.requests.map((r) => `${r.method} ${r.rawPath}?${r.query.toString()}`)).toEqual([
      'GET /repos/acme/infra/actions/secrets?per_page=100&page=1',
      'GET /repos/acme/infra/actions/secrets?per_page=100&page=2',
    ]);
    const listed = await store.list();
    expect(listed).toHaveLength(150);
    expect(listed[0]).toEqual({ name: 'S_000', updatedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
    expect((store as { read?: unknown }).read).toBeUndefined();
  });
});

describe('github: write check and errors', () => {
  it('checkWritable writes and deletes a probe secret, leaving nothing behind', async () => {
    const f = await fake();
    await (await storeFor(f)).checkWritable();
    expect(f.requests.map((r) => `${r.method} ${r.rawPath}`)).toEqual([
      'GET /repos/acme/infra/actions/secrets/public-key',
      'PUT /repos/acme/infra/actions/secrets/KMS_SYNC_WRITE_CHECK',
      'DELETE /repos/acme/infra/actions/secrets/KMS_SYNC_WRITE_CHECK',
    ]);
    expect(f.secrets.get('repo')!.size).toBe(0);
    f.requests.length = 0;
    await (await storeFor(f, 'acme/infra?probe=false')).checkWritable();
    expect(f.requests.map((r) => r.method)).toEqual(['GET']);
  });

  it('a token without secrets write access: NOT_WRITABLE with the permissions it needs', async () => {
    const f = await fake({ readOnly: true });
    const e = await rejectionOf((await storeFor(f)).checkWritable(), keys.values);
    expect(e.code).toBe('NOT_WRITABLE');
    expect(e.message).toMatch(/HTTP 403.*Secrets: read and write/);
    const v = keys.next();
    const e2 = await rejectionOf((await storeFor(f)).put('A__B__C', v, meta('a/b/c')), keys.values);
    expect(e2.message).toContain('could not store A__B__C');
  });

  it('no token, a wrong token, an illegal name: clear errors without values or tokens', async () => {
    const f = await fake();
    const e1 = await rejectionOf((await storeFor(f, 'acme/infra', {})).checkWritable(), keys.values);
    expect(e1.message).toMatch(/no GitHub token: set GITHUB_TOKEN/);
    const e2 = await rejectionOf(
      (await storeFor(f, 'acme/infra', { GITHUB_TOKEN: 'ghp_wrong' })).put('A__B', keys.next(), meta('a/b/c')),
      keys.values,
    );
    expect(e2.message).toMatch(/HTTP 401.*Bad credentials/);
    expect(e2.message).not.toContain('ghp_wrong');
    const e3 = await rejectionOf((await storeFor(f)).put('GITHUB_TOKEN_X', keys.next(), meta('a/b/c')), keys.values);
    expect(e3.code).toBe('INVALID_ARGUMENT');
    expect(f.requests.filter((r) => r.method === 'PUT')).toHaveLength(0);
  });
});

afterAll(() => {
  expect(keys.values.length).toBeGreaterThan(0);
});
