// GitLab CI/CD variables backend against a fake of the documented v4 REST API.
import { afterEach, describe, expect, it } from 'vitest';
import {
  describeMeta,
  GITLAB_MASKABLE,
  openGitLabStore,
  parseGitLabUri,
  parseMetaDescription,
  type GitLabVariablesStore,
} from '../../../src/secrets/backends/gitlab.js';
import { fakeKey, meta } from '../helpers.js';
import { defineStoreContract, rejectionOf, valueTracker } from './support/contract-suite.js';
import { startFakeGitLab, type FakeGitLab, type FakeGitLabOptions } from './support/fake-gitlab.js';
import { assertNoValuesInUrlsOrHeaders } from './support/recording-server.js';

const TOKEN = 'glpat-test0123456789';
const fakes: FakeGitLab[] = [];
const keys = valueTracker();

async function fake(o: Partial<FakeGitLabOptions> = {}): Promise<FakeGitLab> {
  const f = await startFakeGitLab({ token: TOKEN, projectId: 4242, projectPath: 'acme/platform/infra', ...o });
  fakes.push(f);
  return f;
}

function storeFor(
  f: FakeGitLab,
  spec = '4242?environment_scope=production',
  env: NodeJS.ProcessEnv = { GITLAB_TOKEN: TOKEN },
): Promise<GitLabVariablesStore> {
  return openGitLabStore(`gitlab://${spec}`, { env: { CI_API_V4_URL: f.apiUrl, ...env } });
}

afterEach(async () => {
  for (const f of fakes) expect(f.violations).toEqual([]);
  await Promise.all(fakes.splice(0).map((f) => f.close()));
});

let contractFake: FakeGitLab | undefined;
defineStoreContract({
  label: 'gitlab (fake REST API)',
  open: async () => {
    contractFake ??= await startFakeGitLab({ token: TOKEN, projectId: 4242, projectPath: 'acme/platform/infra' });
    return openGitLabStore('gitlab://4242?environment_scope=production', {
      env: { CI_API_V4_URL: contractFake.apiUrl, GITLAB_TOKEN: TOKEN },
    });
  },
  canRead: true,
  listsMeta: true,
  legalName: /^[A-Za-z0-9_]{1,255}$/,
  cleanup: async () => {
    expect(contractFake?.violations).toEqual([]);
    await contractFake?.close();
  },
});

describe('gitlab: URI, names and masking rule', () => {
  it('parses project ids and paths, scope and flags', () => {
    expect(parseGitLabUri('gitlab://4242', { env: {} })).toMatchObject({
      project: '4242',
      environmentScope: '*',
      protected: true,
      hidden: false,
    });
    const c = parseGitLabUri('gitlab://acme%2Fplatform%2Finfra?environment_scope=production&protected=false', {
      env: { CI_API_V4_URL: 'https://git.example/api/v4' },
    });
    expect(c).toMatchObject({ project: 'acme/platform/infra', environmentScope: 'production', protected: false });
    expect(c.apiUrl.href).toBe('https://git.example/api/v4/');
    expect(parseGitLabUri('gitlab://acme/platform/infra', { env: {} }).project).toBe('acme/platform/infra');
    expect(parseGitLabUri('gitlab://1', { env: {} }).apiUrl.href).toBe('https://gitlab.com/api/v4/');
    expect(() => parseGitLabUri('gitlab://', { env: {} })).toThrow(/no project/);
    expect(() => parseGitLabUri('gitlab://1?scope=x', { env: {} })).toThrow(/unknown option 'scope'/);
    expect(() => parseGitLabUri('gitlab://1?protected=maybe', { env: {} })).toThrow(/true or false/);
  });

  it('raw keys qualify for masking; short, spaced or exotic values do not', () => {
    for (let i = 0; i < 50; i++) expect(GITLAB_MASKABLE.test(fakeKey())).toBe(true);
    for (const bad of ['short', 'has space in it', 'semi;colon;value', 'line\nbreak12'])
      expect(GITLAB_MASKABLE.test(bad)).toBe(false);
  });

  it('metadata round-trips through the description (≤ 255 characters)', () => {
    const m = meta('acme-prod/web/primary', { expiresAt: '2030-01-01T00:00:00.000Z' });
    const d = describeMeta(m);
    expect(d.length).toBeLessThanOrEqual(255);
    expect(parseMetaDescription(d)).toEqual(m);
    expect(parseMetaDescription(describeMeta({ ...m, expiresAt: null }))!.expiresAt).toBeNull();
    expect(parseMetaDescription('someone else')).toBeUndefined();
  });

  it('the target goes last in the description, one word, and reads back exactly; without one the description is as before', () => {
    const m = meta('acme-prod/web/primary', {
      keyId: 'key_1',
      target: 'https://kms.example.com/api/v1?name=x/y/z&key=k#live',
    });
    const d = describeMeta(m);
    expect(d).toBe(
      `kms-sync key=key_1 issued=${m.issuedAt} expires=never name=acme-prod/web/primary target=https://kms.example.com/api/v1?name=x/y/z&key=k#live`,
    );
    expect(parseMetaDescription(d)).toEqual(m);
    const spaced = { ...m, target: 'Prod EU 100% – blue' };
    expect(describeMeta(spaced)).toMatch(/ target=Prod%20EU%20100%25%20–%20blue$/);
    expect(parseMetaDescription(describeMeta(spaced))).toEqual(spaced);
    // Too long with the name: the name goes first (the target is what the pipeline compares).
    const longer = { ...m, projectEnv: 'p'.repeat(60), target: `https://kms.example.com/${'a'.repeat(80)}#live` };
    const dl = describeMeta(longer);
    expect(dl.length).toBeLessThanOrEqual(255);
    expect(dl).not.toContain(' name=');
    expect(parseMetaDescription(dl)).toMatchObject({ keyId: 'key_1', target: longer.target });
    expect(parseMetaDescription(dl)).not.toHaveProperty('projectEnv');
    const { target: _t, ...legacy } = m;
    expect(describeMeta(legacy)).toBe(
      `kms-sync key=key_1 issued=${m.issuedAt} expires=never name=acme-prod/web/primary`,
    );
    expect(parseMetaDescription(describeMeta(legacy))).not.toHaveProperty('target');
  });
});

describe('gitlab: wire protocol', () => {
  it('create: GET (404) then POST masked/raw/protected with scope and description; update: GET then PUT with the scope filter', async () => {
    const f = await fake();
    const store = await storeFor(f);
    const name = store.secretName('acme-prod/web/primary');
    expect(name).toBe('ACME_PROD__WEB__PRIMARY');
    const v1 = keys.next();
    const m1 = meta('acme-prod/web/primary');
    await store.put(name, v1, m1);
    expect(f.requests.map((r) => `${r.method} ${r.url}`)).toEqual([
      'GET /api/v4/projects/4242/variables/ACME_PROD__WEB__PRIMARY?filter%5Benvironment_scope%5D=production',
      'POST /api/v4/projects/4242/variables',
    ]);
    expect(f.requests[1]!.json).toEqual({
      key: name,
      value: v1,
      variable_type: 'env_var',
      protected: true,
      masked: true,
      raw: true,
      environment_scope: 'production',
      description: describeMeta(m1),
    });
    for (const r of f.requests) expect(r.headers['private-token']).toBe(TOKEN);
    const v2 = keys.next();
    f.requests.length = 0;
    await store.put(name, v2, meta('acme-prod/web/primary'));
    expect(f.requests.map((r) => `${r.method} ${r.url}`)).toEqual([
      'GET /api/v4/projects/4242/variables/ACME_PROD__WEB__PRIMARY?filter%5Benvironment_scope%5D=production',
      'PUT /api/v4/projects/4242/variables/ACME_PROD__WEB__PRIMARY?filter%5Benvironment_scope%5D=production',
    ]);
    expect(f.variables).toHaveLength(1);
    expect(f.variables[0]).toMatchObject({
      value: v2,
      masked: true,
      raw: true,
      protected: true,
      environment_scope: 'production',
    });
    assertNoValuesInUrlsOrHeaders(f.requests, [v1, v2]);
  });

  it('a variable created concurrently between GET and POST (400 already taken) is updated instead', async () => {
    let f!: FakeGitLab;
    f = await fake({
      beforeCreate: (key, scope) => {
        f.variables.push({
          variable_type: 'env_var',
          key,
          value: 'someone-elses-value',
          protected: false,
          masked: false,
          hidden: false,
          raw: false,
          environment_scope: scope,
          description: null,
        });
      },
    });
    const store = await storeFor(f);
    const v = keys.next();
    await store.put('A__B__C', v, meta('a/b/c'));
    expect(f.requests.map((r) => r.method)).toEqual(['GET', 'POST', 'PUT']);
    expect(f.variables).toHaveLength(1);
    expect(f.variables[0]).toMatchObject({ value: v, masked: true });
  });

  it('keeps environment scopes apart (same key, two scopes) and URL-encodes project paths', async () => {
    const f = await fake();
    const prod = await storeFor(f, 'acme%2Fplatform%2Finfra?environment_scope=production');
    const stag = await storeFor(f, 'acme%2Fplatform%2Finfra?environment_scope=staging');
    const vp = keys.next();
    const vs = keys.next();
    await prod.put('A__B__C', vp, meta('a/b/c'));
    await stag.put('A__B__C', vs, meta('a/b/c'));
    expect(f.requests[0]!.rawPath).toBe('/api/v4/projects/acme%2Fplatform%2Finfra/variables/A__B__C');
    expect(await prod.read('A__B__C')).toBe(vp);
    expect(await stag.read('A__B__C')).toBe(vs);
    expect((await prod.list()).map((l) => l.name)).toEqual(['A__B__C']);
    expect(f.variables.map((v) => v.environment_scope).sort()).toEqual(['production', 'staging']);
  });

  it('lists across pages (X-Next-Page) and hidden variables cannot be read back', async () => {
    const f = await fake();
    const store = await storeFor(f);
    await store.putMany(
      Array.from({ length: 120 }, (_, i) => ({
        name: `V_${String(i).padStart(3, '0')}`,
        value: keys.next(),
        meta: meta('a/b/c'),
      })),
    );
    f.requests.length = 0;
    const listed = await store.list();
    expect(listed).toHaveLength(120);
    expect(f.requests.map((r) => r.query.get('page'))).toEqual(['1', '2']);
    const present = await store.existsMany(['V_000', 'V_119', 'V_200', 'V_001']);
    expect([...present].sort()).toEqual(['V_000', 'V_001', 'V_119']);

    const hidden = await storeFor(f, '4242?environment_scope=production&hidden=true');
    const hv = keys.next();
    await hidden.put('HIDDEN_ONE', hv, meta('a/b/c'));
    expect(f.requests.at(-1)!.json).toMatchObject({ masked: true, masked_and_hidden: true });
    expect(await hidden.exists('HIDDEN_ONE')).toBe(true);
    expect(await hidden.read('HIDDEN_ONE')).toBeUndefined();
  });
});

describe('gitlab: write check and errors', () => {
  it('checkWritable: token scopes, role and the variables API', async () => {
    const ok = await fake();
    await (await storeFor(ok)).checkWritable();
    expect(ok.requests.map((r) => `${r.method} ${r.rawPath}`)).toEqual([
      'GET /api/v4/personal_access_tokens/self',
      'GET /api/v4/projects/4242',
      'GET /api/v4/projects/4242/variables',
    ]);
    const readApi = await fake({ scopes: ['read_api'] });
    const e1 = await rejectionOf((await storeFor(readApi)).checkWritable(), keys.values);
    expect(e1.message).toMatch(/scopes \[read_api\]; managing CI\/CD variables needs the 'api' scope/);
    const dev = await fake({ accessLevel: 30 });
    const e2 = await rejectionOf((await storeFor(dev)).checkWritable(), keys.values);
    expect(e2.message).toMatch(/below Maintainer \(access level 30 < 40\)/);
    expect(e2.code).toBe('NOT_WRITABLE');
  });

  it('CI_JOB_TOKEN alone is refused with an explanation; no token at all too', async () => {
    const f = await fake();
    const e1 = await rejectionOf(
      (await storeFor(f, '4242', { CI_JOB_TOKEN: 'job-token-123' })).checkWritable(),
      keys.values,
    );
    expect(e1.message).toMatch(/CI_JOB_TOKEN.*cannot read or write CI\/CD variables: set GITLAB_TOKEN/);
    expect(e1.message).not.toContain('job-token-123');
    const e2 = await rejectionOf((await storeFor(f, '4242', {})).checkWritable(), keys.values);
    expect(e2.message).toMatch(/no GitLab token/);
    expect(f.requests).toHaveLength(0);
  });

  it('values GitLab cannot mask are refused before any request, without quoting them', async () => {
    const f = await fake();
    const store = await storeFor(f);
    const e1 = await rejectionOf(store.put('A__B__C', 'kmsc_ab!', meta('a/b/c')), [...keys.values, 'kmsc_ab!']);
    expect(e1.message).toMatch(/cannot be masked by GitLab \(it contains characters outside/);
    const e2 = await rejectionOf(store.put('A__B__C', 'pass word 123', meta('a/b/c')), ['pass word 123']);
    expect(e2.message).toMatch(/whitespace/);
    const e3 = await rejectionOf(store.put('A__B__C', 'abc', meta('a/b/c')), ['abc']);
    expect(e3.message).toMatch(/shorter than 8/);
    expect(e3.code).toBe('INVALID_ARGUMENT');
    expect(f.requests).toHaveLength(0);
  });

  it('a project that does not exist, or a wrong token: errors name the cause, never the value or token', async () => {
    const f = await fake();
    const v = keys.next();
    const e1 = await rejectionOf((await storeFor(f, '999')).put('A__B', v, meta('a/b/c')), keys.values);
    expect(e1.message).toMatch(/HTTP 404.*project 999 not found/);
    const e2 = await rejectionOf(
      (await storeFor(f, '4242', { GITLAB_TOKEN: 'glpat-wrong' })).put('A__B', v, meta('a/b/c')),
      keys.values,
    );
    expect(e2.message).toMatch(/HTTP 401/);
    expect(e2.message).not.toContain('glpat-wrong');
  });
});
