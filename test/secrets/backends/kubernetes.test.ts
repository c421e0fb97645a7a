// Kubernetes Secret backend (@kubernetes/client-node, server-side apply) against a minimal kube API
// server with SSA field ownership, resourceVersion preconditions and RBAC (no kube-apiserver
// package exists in Debian).
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  keyAnnotationName,
  loadKubeConfig,
  openKubernetesStore,
  parseKubernetesUri,
  type KubernetesSecretStore,
} from '../../../src/secrets/backends/kubernetes.js';
import { meta } from '../helpers.js';
import { defineStoreContract, rejectionOf, valueTracker } from './support/contract-suite.js';
import { startFakeKube, type FakeKube, type FakeKubeOptions } from './support/fake-kube.js';
import { assertNoValuesInUrlsOrHeaders } from './support/recording-server.js';
import { scratchDir } from '../../support/scratch.js';

const TOKEN = 'kube-test-token-0123456789';
const NS = 'kms';
const fakes: FakeKube[] = [];
const keys = valueTracker();
let dir: string;

beforeAll(async () => {
  dir = scratchDir('kms-kube-');
});
afterAll(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});
afterEach(async () => {
  for (const f of fakes) expect(f.violations).toEqual([]);
  await Promise.all(fakes.splice(0).map((f) => f.close()));
});

async function kubeconfigFor(f: FakeKube, token = TOKEN): Promise<string> {
  const file = path.join(dir, `kubeconfig-${Math.random().toString(36).slice(2)}`);
  await fs.writeFile(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- name: fake',
      '  cluster:',
      `    server: ${f.url}`,
      `    certificate-authority: ${f.caFile}`,
      'users:',
      '- name: kms-sync',
      '  user:',
      `    token: ${token}`,
      'contexts:',
      '- name: fake',
      '  context:',
      '    cluster: fake',
      '    user: kms-sync',
      'current-context: fake',
      '',
    ].join('\n'),
  );
  return file;
}

async function fake(o: Partial<FakeKubeOptions> = {}): Promise<FakeKube> {
  const f = await startFakeKube({ token: TOKEN, namespace: NS, ...o });
  fakes.push(f);
  return f;
}

async function storeFor(f: FakeKube, spec = `${NS}/app-keys`, token = TOKEN): Promise<KubernetesSecretStore> {
  return openKubernetesStore(`kubernetes://${spec}`, { env: { KUBECONFIG: await kubeconfigFor(f, token), HOME: dir } });
}

const applies = (f: FakeKube): typeof f.requests => f.requests.filter((r) => r.method === 'PATCH');

for (const form of ['one Secret', 'Secret per key'] as const) {
  let contractFake: FakeKube | undefined;
  defineStoreContract({
    label: `kubernetes, ${form} (fake API server)`,
    open: async () => {
      contractFake ??= await startFakeKube({ token: TOKEN, namespace: NS });
      return openKubernetesStore(
        form === 'one Secret' ? `kubernetes://${NS}/app-keys` : `kubernetes://${NS}?prefix=kms-`,
        {
          env: { KUBECONFIG: await kubeconfigFor(contractFake), HOME: dir },
        },
      );
    },
    canRead: true,
    listsMeta: true,
    legalName:
      form === 'one Secret'
        ? /^[-._a-zA-Z0-9]{1,253}$/
        : /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/,
    cleanup: async () => {
      expect(contractFake?.violations).toEqual([]);
      await contractFake?.close();
    },
  });
}

describe('kubernetes: URI and names', () => {
  it('parses both forms and refuses illegal namespaces and Secret names', () => {
    expect(parseKubernetesUri('kubernetes://kms/app-keys', { env: {} })).toMatchObject({
      namespace: 'kms',
      secret: 'app-keys',
      force: false,
    });
    expect(parseKubernetesUri('k8s://kms?prefix=kms-&context=prod&force=true', { env: {} })).toMatchObject({
      namespace: 'kms',
      secret: undefined,
      prefix: 'kms-',
      context: 'prod',
      force: true,
    });
    expect(() => parseKubernetesUri('kubernetes://KMS/x', { env: {} })).toThrow(/namespace name/);
    expect(() => parseKubernetesUri('kubernetes://kms/App_Keys', { env: {} })).toThrow(/DNS-1123 subdomain/);
    expect(() => parseKubernetesUri('kubernetes://kms/a/b', { env: {} })).toThrow(/expected kubernetes/);
    expect(() => parseKubernetesUri('kubernetes://kms/x?prefix=a', { env: {} })).toThrow(
      /one-Secret-per-key form only/,
    );
  });

  it('credentials: in-cluster service account from KUBERNETES_SERVICE_HOST/PORT; KUBECONFIG lists merge; context= switches', async () => {
    const inCluster = await loadKubeConfig(
      { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' },
      undefined,
    );
    expect(inCluster.getCurrentCluster()).toMatchObject({
      server: 'https://10.96.0.1:443',
      caFile: '/var/run/secrets/kubernetes.io/serviceaccount/ca.crt',
      skipTLSVerify: false,
    });
    expect(inCluster.getCurrentUser()?.authProvider).toMatchObject({
      name: 'tokenFile',
      config: { tokenFile: '/var/run/secrets/kubernetes.io/serviceaccount/token' },
    });
    const f = await fake();
    const a = await kubeconfigFor(f);
    const b = path.join(dir, 'second-kubeconfig');
    await fs.writeFile(
      b,
      (await fs.readFile(a, 'utf8'))
        .replaceAll('name: fake', 'name: other')
        .replaceAll('cluster: fake', 'cluster: other')
        .replace('current-context: fake', 'current-context: other'),
    );
    const merged = await loadKubeConfig({ KUBECONFIG: `${a}${path.delimiter}${b}` }, 'other');
    expect(
      merged
        .getContexts()
        .map((c) => c.name)
        .sort(),
    ).toEqual(['fake', 'other']);
    expect(merged.getCurrentContext()).toBe('other');
  });

  it('maps names: data keys in one Secret, DNS-1123 Secret names per key', async () => {
    const f = await fake();
    const one = await storeFor(f);
    expect(one.secretName('acme-prod/web/primary')).toBe('acme-prod.web.primary');
    expect(one.secretName('acme-prod/Web_App/primary')).toBe('acme-prod.Web_App.primary');
    expect(one.secretName('acme.prod/web/primary')).toMatch(/^acme_prod\.web\.primary\.\.[a-z2-7]{8}$/);
    const per = await storeFor(f, `${NS}?prefix=kms-`);
    expect(per.secretName('acme-prod/web/primary')).toBe('kms-acme-prod.web.primary');
    expect(per.secretName('acme-prod/Web_App/primary')).toMatch(/^kms-acme-prod\.web-app\.primary--[a-z2-7]{8}$/);
  });
});

describe('kubernetes: server-side apply on the wire', () => {
  it('the target: annotation kms-sync/target per Secret (dropped by a later apply without one), a field of the JSON annotation in one Secret', async () => {
    const f = await fake();
    const target = 'https://kms.example.com/api/v1#live';
    const per = await storeFor(f, `${NS}?prefix=kms-`);
    const name = per.secretName('acme-prod/web/primary');
    await per.put(name, keys.next(), meta('acme-prod/web/primary', { target }));
    expect(f.secrets.get(name)!.annotations['kms-sync/target']).toBe(target);
    expect((await per.list()).find((l) => l.name === name)?.meta?.target).toBe(target);
    await per.put(name, keys.next(), meta('acme-prod/web/primary'));
    expect(f.secrets.get(name)!.annotations).not.toHaveProperty('kms-sync/target');

    const one = await storeFor(f);
    await one.putMany([
      { name: 'acme-prod.web.primary', value: keys.next(), meta: meta('acme-prod/web/primary', { target }) },
      { name: 'acme-prod.api.primary', value: keys.next(), meta: meta('acme-prod/api/primary') },
    ]);
    const ann = f.secrets.get('app-keys')!.annotations;
    expect(JSON.parse(ann['kms-sync/k.acme-prod.web.primary']!)).toMatchObject({
      name: 'acme-prod.web.primary',
      target,
    });
    expect(JSON.parse(ann['kms-sync/k.acme-prod.api.primary']!)).not.toHaveProperty('target');
    const listed = await one.list();
    expect(listed.find((l) => l.name === 'acme-prod.web.primary')?.meta?.target).toBe(target);
    expect(listed.find((l) => l.name === 'acme-prod.api.primary')?.meta).not.toHaveProperty('target');
  });

  it('one Secret: creates it empty, then applies with the apply content type, field manager, force=false and resourceVersion', async () => {
    const f = await fake();
    const store = await storeFor(f);
    const v = keys.next();
    const m = meta('acme-prod/web/primary', { expiresAt: '2030-01-01T00:00:00.000Z' });
    await store.put('acme-prod.web.primary', v, m);
    expect(f.requests.map((r) => `${r.method} ${r.rawPath}`)).toEqual([
      'GET /api/v1/namespaces/kms/secrets/app-keys',
      'POST /api/v1/namespaces/kms/secrets',
      'GET /api/v1/namespaces/kms/secrets/app-keys',
      'PATCH /api/v1/namespaces/kms/secrets/app-keys',
    ]);
    const patch = applies(f)[0]!;
    expect(patch.headers['content-type']).toBe('application/apply-patch+yaml');
    expect(patch.query.get('fieldManager')).toBe('kms-sync');
    expect(patch.query.get('force')).toBe('false');
    expect(patch.headers.authorization).toBe(`Bearer ${TOKEN}`);
    const body = patch.json as {
      metadata: { resourceVersion: string; labels: Record<string, string>; annotations: Record<string, string> };
      data: Record<string, string>;
    };
    expect(body.metadata.resourceVersion).toMatch(/^\d+$/);
    expect(body.metadata.labels).toEqual({ 'app.kubernetes.io/managed-by': 'kms-sync' });
    expect(JSON.parse(body.metadata.annotations['kms-sync/k.acme-prod.web.primary']!)).toMatchObject({
      name: 'acme-prod.web.primary',
      keyId: m.keyId,
      expiresAt: '2030-01-01T00:00:00.000Z',
    });
    expect(body.data).toEqual({ 'acme-prod.web.primary': Buffer.from(v).toString('base64') });
    expect(f.decoded('app-keys', 'acme-prod.web.primary')).toBe(v);
    assertNoValuesInUrlsOrHeaders(f.requests, [v]);
  });

  it("one Secret: later applies re-state the keys kms-sync owns (SSA would drop them) and leave other managers' keys alone", async () => {
    const f = await fake();
    const store = await storeFor(f);
    const a = keys.next();
    await store.put('a', a, meta('x/y/a'));
    f.updateAs('helm', 'app-keys', { data: { 'helm-owned': 'chart-value' } });
    const b = keys.next();
    const c = keys.next();
    await store.putMany([
      { name: 'b', value: b, meta: meta('x/y/b') },
      { name: 'c', value: c, meta: meta('x/y/c') },
    ]);
    expect(applies(f)).toHaveLength(2);
    expect(Object.keys((applies(f)[1]!.json as { data: object }).data).sort()).toEqual(['a', 'b', 'c']);
    expect(f.decoded('app-keys', 'a')).toBe(a);
    expect(f.decoded('app-keys', 'b')).toBe(b);
    expect(f.decoded('app-keys', 'c')).toBe(c);
    expect(f.decoded('app-keys', 'helm-owned')).toBe('chart-value');
    expect((await store.list()).map((l) => l.name)).toEqual(['a', 'b', 'c', 'helm-owned']);
    expect((await store.list()).find((l) => l.name === 'helm-owned')!.meta).toBeUndefined();
  });

  it('one Secret: two writers at once — the stale apply gets 409, re-reads, and both keys survive', async () => {
    let waiting: (() => void)[] = [];
    let released = false;
    const f = await fake({
      beforeApply: () =>
        new Promise<void>((resolve) => {
          if (released) return resolve();
          waiting.push(resolve);
          if (waiting.length === 2) {
            released = true;
            for (const w of waiting) w();
            waiting = [];
          }
        }),
    });
    // The Secret exists already, so both writers read the same resourceVersion.
    f.updateAs('bootstrap', 'app-keys', { labels: { team: 'web' } });
    const [s1, s2] = [await storeFor(f), await storeFor(f)];
    const v1 = keys.next();
    const v2 = keys.next();
    await Promise.all([s1.put('k1', v1, meta('x/y/k1')), s2.put('k2', v2, meta('x/y/k2'))]);
    const statuses = applies(f).map((r) => r.json as { metadata: { resourceVersion: string } });
    expect(statuses).toHaveLength(3);
    expect(f.decoded('app-keys', 'k1')).toBe(v1);
    expect(f.decoded('app-keys', 'k2')).toBe(v2);
  });

  it('a field another manager owns with another value is a conflict: reported, not taken over (unless force=true)', async () => {
    const f = await fake();
    f.updateAs('kubectl-edit', 'app-keys', { data: { 'acme-prod.web.primary': 'hand-edited' } });
    const v = keys.next();
    const e = await rejectionOf(
      (await storeFor(f)).put('acme-prod.web.primary', v, meta('acme-prod/web/primary')),
      keys.values,
    );
    expect(e.message).toMatch(
      /HTTP 409: Conflict: Apply failed with 1 conflict: conflict with "kubectl-edit".*force=true/s,
    );
    expect(e.message).not.toContain(Buffer.from(v).toString('base64'));
    expect(f.decoded('app-keys', 'acme-prod.web.primary')).toBe('hand-edited');
    await (await storeFor(f, `${NS}/app-keys?force=true`)).put(
      'acme-prod.web.primary',
      v,
      meta('acme-prod/web/primary'),
    );
    expect(applies(f).at(-1)!.query.get('force')).toBe('true');
    expect(f.decoded('app-keys', 'acme-prod.web.primary')).toBe(v);
  });

  it('a Secret per key: one apply each, labels and annotations carry the metadata, list uses the label selector', async () => {
    const f = await fake();
    const store = await storeFor(f, NS);
    const v = keys.next();
    const m = meta('acme-prod/web/primary');
    const name = store.secretName('acme-prod/web/primary');
    await store.put(name, v, m);
    expect(f.requests.map((r) => `${r.method} ${r.rawPath}`)).toEqual([
      'PATCH /api/v1/namespaces/kms/secrets/acme-prod.web.primary',
    ]);
    const body = applies(f)[0]!.json as {
      metadata: { labels: object; annotations: Record<string, string> };
      type: string;
      data: object;
    };
    expect(body.metadata.labels).toEqual({ 'app.kubernetes.io/managed-by': 'kms-sync' });
    expect(body.metadata.annotations).toMatchObject({
      'kms-sync/key-id': m.keyId,
      'kms-sync/project-env': 'acme-prod',
      'kms-sync/client': 'web',
      'kms-sync/key': 'primary',
      'kms-sync/expires-at': '',
    });
    expect(body.type).toBe('Opaque');
    expect(body.data).toEqual({ value: Buffer.from(v).toString('base64') });
    f.updateAs('someone', 'unrelated', { data: { x: 'y' } });
    f.requests.length = 0;
    const listed = await store.list();
    expect(listed.map((l) => l.name)).toEqual(['acme-prod.web.primary']);
    expect(listed[0]!.meta).toEqual({
      projectEnv: 'acme-prod',
      client: 'web',
      key: 'primary',
      keyId: m.keyId,
      issuedAt: m.issuedAt,
      expiresAt: null,
    });
    expect(f.requests[0]!.query.get('labelSelector')).toBe('app.kubernetes.io/managed-by=kms-sync');
  });

  it('keeps long or odd data-key annotations legal', () => {
    expect(keyAnnotationName('acme-prod.web.primary')).toBe('kms-sync/k.acme-prod.web.primary');
    expect(keyAnnotationName('_leading')).toMatch(/^kms-sync\/h\.[a-z2-7]{8}$/);
    expect(keyAnnotationName('x'.repeat(80))).toMatch(/^kms-sync\/h\./);
  });
});

describe('kubernetes: write check, auth and errors', () => {
  it('checkWritable asks SelfSubjectAccessReviews and names the denied verbs', async () => {
    const ok = await fake({ rules: [{ verbs: ['get', 'patch'], resourceNames: ['app-keys'] }, { verbs: ['create'] }] });
    await (await storeFor(ok)).checkWritable();
    const reviews = ok.requests.filter((r) => r.rawPath === '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews');
    expect(
      reviews.map((r) => (r.json as { spec: { resourceAttributes: { verb: string } } }).spec.resourceAttributes.verb),
    ).toEqual(['get', 'patch', 'create']);
    const readOnly = await fake({ rules: [{ verbs: ['get', 'list'] }] });
    const e = await rejectionOf((await storeFor(readOnly)).checkWritable(), keys.values);
    expect(e.code).toBe('NOT_WRITABLE');
    expect(e.message).toContain('may not patch secrets/app-keys, create secrets in namespace kms');
  });

  it('RBAC denial while writing, a wrong token and no credentials: errors without values', async () => {
    const f = await fake({ rules: [{ verbs: ['get'] }] });
    const v = keys.next();
    const e1 = await rejectionOf((await storeFor(f, NS)).put('a.b.c', v, meta('a/b/c')), keys.values);
    expect(e1.message).toMatch(/HTTP 403: Forbidden: .*cannot create resource "secrets".*RBAC/);
    const e2 = await rejectionOf((await storeFor(f, NS, 'wrong-token')).exists('a.b.c'), keys.values);
    expect(e2.message).toMatch(/HTTP 401/);
    const none = await openKubernetesStore(`kubernetes://${NS}`, { env: { HOME: path.join(dir, 'nohome') } });
    const e3 = await rejectionOf(none.checkWritable(), keys.values);
    expect(e3.message).toMatch(/no Kubernetes cluster configured/);
    const e4 = await rejectionOf((await storeFor(f)).put('..bad', keys.next(), meta('a/b/c')), keys.values);
    expect(e4.code).toBe('INVALID_ARGUMENT');
  });
});
