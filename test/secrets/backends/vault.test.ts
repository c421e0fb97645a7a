// Vault / OpenBao KV v2 backend against a wire-level fake of the documented HTTP API (no Vault or
// OpenBao package exists in Debian); the same contract runs against a real server when VAULT_ADDR
// and VAULT_TOKEN are set (see real-servers.test.ts).
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openVaultStore, parseVaultUri, type VaultKvStore } from '../../../src/secrets/backends/vault.js';
import { openStore } from '../../../src/secrets/registry.js';
import { vaultBackend } from '../../../src/secrets/backends/vault.js';
import { meta } from '../helpers.js';
import { defineStoreContract, rejectionOf, valueTracker } from './support/contract-suite.js';
import { startFakeVault, type FakeVault, type FakeVaultOptions } from './support/fake-vault.js';
import { assertNoValuesInUrlsOrHeaders } from './support/recording-server.js';
import { scratchDir } from '../../support/scratch.js';

const TOKEN = 'hvs.test-token-0123456789';
const fakes: FakeVault[] = [];
const keys = valueTracker();

async function fake(o: Partial<FakeVaultOptions> = {}): Promise<FakeVault> {
  const f = await startFakeVault({ token: TOKEN, ...o });
  fakes.push(f);
  return f;
}

function uriOf(f: FakeVault, extra = ''): string {
  return `vault://127.0.0.1:${f.server.port}/secret/kms?tls=false${extra}`;
}

async function storeFor(
  f: FakeVault,
  env: NodeJS.ProcessEnv = { VAULT_TOKEN: TOKEN, HOME: '/nonexistent' },
  extra = '',
): Promise<VaultKvStore> {
  return openVaultStore(uriOf(f, extra), { env });
}

afterEach(async () => {
  await Promise.all(fakes.splice(0).map((f) => f.close()));
});

// The same contract the real-server run uses, against a fresh fake.
let contractFake: FakeVault | undefined;
defineStoreContract({
  label: 'vault (fake KV v2)',
  open: async () => {
    contractFake ??= await startFakeVault({ token: TOKEN });
    return openVaultStore(`vault://127.0.0.1:${contractFake.server.port}/secret/kms?tls=false`, {
      env: { VAULT_TOKEN: TOKEN, HOME: '/nonexistent' },
    });
  },
  canRead: true,
  listsMeta: true,
  legalName: /^[A-Za-z0-9._%-]+(\/[A-Za-z0-9._%-]+)*$/,
  cleanup: async () => {
    await contractFake?.close();
  },
});

describe('vault: URI and options', () => {
  it('parses host, port, mount, prefix, tls and namespace; refuses credentials and unknown options', () => {
    const c = parseVaultUri('vault://vault.example:8201/kv/team/kms?namespace=ops', { env: {} });
    expect(c.baseUrl.href).toBe('https://vault.example:8201/');
    expect(c.mount).toBe('kv');
    expect(c.prefix).toEqual(['team', 'kms']);
    expect(c.namespace).toBe('ops');
    expect(parseVaultUri('openbao://bao:8200/secret', { env: {} }).prefix).toEqual([]);
    expect(parseVaultUri('vault://127.0.0.1/secret?tls=false', { env: {} }).baseUrl.href).toBe(
      'http://127.0.0.1:8200/',
    );
    expect(() => parseVaultUri('vault://h/secret?tls=false', { env: {} })).toThrow(
      /refusing to send credentials over plain HTTP to h:8200/,
    );
    expect(parseVaultUri('vault://h/a/b/c?mount=a/b', { env: {} })).toMatchObject({ mount: 'a/b', prefix: ['c'] });
    expect(parseVaultUri('vault://h/s', { env: { VAULT_NAMESPACE: 'envns' } }).namespace).toBe('envns');
    expect(() => parseVaultUri('vault://user:hvs.x@h/secret', { env: {} })).toThrow(/credentials do not belong/);
    expect(() => parseVaultUri('vault://h/secret?tsl=false', { env: {} })).toThrow(/unknown option 'tsl'/);
    expect(() => parseVaultUri('vault://h/', { env: {} })).toThrow(/no KV v2 mount/);
    expect(vaultBackend.schemes).toEqual(['vault', 'openbao']);
  });

  it('openStore picks the backend for vault:// and openbao://', async () => {
    const f = await fake();
    for (const scheme of ['vault', 'openbao']) {
      const s = await openStore(`${scheme}://127.0.0.1:${f.server.port}/secret/kms?tls=false`, {
        env: { VAULT_TOKEN: TOKEN },
      });
      expect(s.kind).toBe('vault');
      expect(s.displayUri).toBe(`${scheme}://127.0.0.1:${f.server.port}/secret/kms?tls=false`);
    }
  });
});

describe('vault: wire protocol', () => {
  it('a first write: metadata read, data POST with cas=0, custom_metadata POST, verification read', async () => {
    const f = await fake({ namespace: 'team-a' });
    const store = await storeFor(f, { VAULT_TOKEN: TOKEN, VAULT_NAMESPACE: 'team-a', HOME: '/nonexistent' });
    const v = keys.next();
    const m = meta('acme-prod/web/primary', { expiresAt: '2030-01-01T00:00:00.000Z' });
    await store.put(store.secretName('acme-prod/web/primary'), v, m);
    const calls = f.requests.map((r) => `${r.method} ${r.rawPath}`);
    expect(calls).toEqual([
      'GET /v1/secret/metadata/kms/acme-prod/web/primary',
      'POST /v1/secret/data/kms/acme-prod/web/primary',
      'POST /v1/secret/metadata/kms/acme-prod/web/primary',
      'GET /v1/secret/metadata/kms/acme-prod/web/primary',
    ]);
    for (const r of f.requests) {
      expect(r.headers['x-vault-token']).toBe(TOKEN);
      expect(r.headers['x-vault-namespace']).toBe('team-a');
      expect(r.headers['x-vault-request']).toBe('true');
    }
    const dataPost = f.requests[1]!;
    expect(dataPost.headers['content-type']).toBe('application/json');
    expect(dataPost.json).toEqual({
      options: { cas: 0 },
      data: {
        value: v,
        projectEnv: 'acme-prod',
        client: 'web',
        key: 'primary',
        keyId: m.keyId,
        issuedAt: m.issuedAt,
        expiresAt: '2030-01-01T00:00:00.000Z',
      },
    });
    const metaPost = f.requests[2]!;
    expect(metaPost.json).toEqual({
      custom_metadata: {
        projectEnv: 'acme-prod',
        client: 'web',
        key: 'primary',
        keyId: m.keyId,
        issuedAt: m.issuedAt,
        expiresAt: '2030-01-01T00:00:00.000Z',
        managedBy: 'kms-sync',
      },
    });
    expect(metaPost.body).not.toContain(v);
    assertNoValuesInUrlsOrHeaders(f.requests, [v]);
    expect(f.currentValue('kms/acme-prod/web/primary')).toBe(v);
    expect(f.entries.get('kms/acme-prod/web/primary')!.custom_metadata!.keyId).toBe(m.keyId);
  });

  it('an update sends cas = the current version', async () => {
    const f = await fake();
    const store = await storeFor(f);
    const name = 'acme-prod/web/primary';
    await store.put(name, keys.next(), meta(name));
    await store.put(name, keys.next(), meta(name));
    const v3 = keys.next();
    f.requests.length = 0;
    await store.put(name, v3, meta(name));
    expect((f.requests[1]!.json as { options: { cas: number } }).options.cas).toBe(2);
    expect(f.entries.get(`kms/${name}`)!.versions).toHaveLength(3);
    expect(f.currentValue(`kms/${name}`)).toBe(v3);
  });

  it('percent-encodes characters outside [A-Za-z0-9._-] in names and once more on the wire', async () => {
    const f = await fake();
    const store = await storeFor(f);
    const name = store.secretName('acme prod/wéb/k?1');
    expect(name).toBe('acme%20prod/w%C3%A9b/k%3F1');
    const v = keys.next();
    await store.put(name, v, meta('acme prod/wéb/k?1'));
    expect(f.requests[1]!.rawPath).toBe('/v1/secret/data/kms/acme%2520prod/w%25C3%25A9b/k%253F1');
    expect(f.currentValue('kms/acme%20prod/w%C3%A9b/k%3F1')).toBe(v);
    expect(await store.read(name)).toBe(v);
    expect((await store.list()).map((l) => l.name)).toEqual([name]);
  });

  it('list walks folders (LIST as GET ?list=true) and returns custom_metadata; deleted versions count as missing', async () => {
    const f = await fake();
    const store = await storeFor(f);
    await store.putMany([
      { name: 'a/web/primary', value: keys.next(), meta: meta('a/web/primary') },
      {
        name: 'b/api/primary',
        value: keys.next(),
        meta: meta('b/api/primary', { expiresAt: '2029-05-05T00:00:00.000Z' }),
      },
    ]);
    const lists = f.requests.filter((r) => r.query.get('list') === 'true');
    expect(lists).toHaveLength(0);
    const listed = await store.list();
    expect(listed.map((l) => l.name)).toEqual(['a/web/primary', 'b/api/primary']);
    expect(listed[1]!.meta).toMatchObject({
      projectEnv: 'b',
      client: 'api',
      key: 'primary',
      expiresAt: '2029-05-05T00:00:00.000Z',
    });
    expect(listed[0]!.meta!.expiresAt).toBeNull();
    expect(
      f.requests.some(
        (r) => r.method === 'GET' && r.rawPath === '/v1/secret/metadata/kms/' && r.query.get('list') === 'true',
      ),
    ).toBe(true);
    // Soft-delete the current version of one: it is gone for exists/read/list.
    f.entries.get('kms/a/web/primary')!.versions.at(-1)!.deletion_time = new Date().toISOString();
    expect(await store.exists('a/web/primary')).toBe(false);
    expect(await store.read('a/web/primary')).toBeUndefined();
    expect((await store.list()).map((l) => l.name)).toEqual(['b/api/primary']);
    expect(await store.list()).toBeDefined();
    const empty = await storeFor(await fake());
    expect(await empty.list()).toEqual([]);
  });
});

describe('vault: check-and-set with concurrent writers', () => {
  /** Holds data writes until `rounds[i]` writers have arrived, round by round. */
  function barrier(rounds: number[]): FakeVaultOptions['beforeDataWrite'] {
    let waiting: (() => void)[] = [];
    let round = 0;
    return () =>
      new Promise<void>((resolve) => {
        waiting.push(resolve);
        if (round < rounds.length && waiting.length === rounds[round]) {
          const go = waiting;
          waiting = [];
          round++;
          for (const r of go) r();
        } else if (round >= rounds.length) {
          const go = waiting;
          waiting = [];
          for (const r of go) r();
        }
      });
  }

  it('two writers of one path: one wins, the other re-reads and writes on top; both values are stored versions', async () => {
    const f = await fake({ beforeDataWrite: barrier([2]) });
    const a = await storeFor(f);
    const b = await storeFor(f);
    const name = 'acme-prod/web/primary';
    const va = keys.next();
    const vb = keys.next();
    const ma = meta(name);
    const mb = meta(name);
    const results = await Promise.allSettled([a.put(name, va, ma), b.put(name, vb, mb)]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled']);
    const entry = f.entries.get(`kms/${name}`)!;
    const stored = entry.versions.map((v) => v.data.value);
    expect(stored.sort()).toEqual([va, vb].sort());
    // One CAS conflict happened and was retried after a fresh metadata read.
    const posts = f.requests.filter((r) => r.method === 'POST' && r.rawPath.includes('/data/'));
    expect(posts.map((p) => (p.json as { options: { cas: number } }).options.cas).sort()).toEqual([0, 0, 1]);
    // The current version is the last acknowledged write, and custom_metadata describes it.
    const last = entry.versions.at(-1)!.data;
    expect(f.currentValue(`kms/${name}`)).toBe(last.value);
    expect(entry.custom_metadata!.keyId).toBe(last.keyId);
  });

  it('the target rides in the version data and custom_metadata; when another target writes in between, custom_metadata is repaired to the current version', async () => {
    const name = 'acme-prod/web/primary';
    const ma = meta(name, { target: 'https://kms.example.com/api/v1#live' });
    const mb = meta(name, { target: 'https://staging.example.com/api/v1#test' });
    let b: Awaited<ReturnType<typeof storeFor>> | undefined;
    let interleaved = false;
    // Right after A's version 1 is stored, B stores version 2 completely (data and custom_metadata);
    // A then writes its custom_metadata over B's and must notice and repair it.
    const f = await fake({
      afterDataWrite: async (_path, version) => {
        if (version !== 1 || interleaved) return;
        interleaved = true;
        await b!.put(name, keys.next(), mb);
      },
    });
    const a = await storeFor(f);
    b = await storeFor(f);
    await a.put(name, keys.next(), ma);
    expect(interleaved).toBe(true);
    const entry = f.entries.get(`kms/${name}`)!;
    expect(entry.versions.map((v) => v.data.target)).toEqual([ma.target, mb.target]);
    expect(entry.custom_metadata).toMatchObject({ target: mb.target, keyId: mb.keyId });
    expect((await a.list()).find((l) => l.name === name)?.meta).toMatchObject({ target: mb.target, keyId: mb.keyId });
  });

  it('three writers: a write that loses CAS twice is rejected and never reported as stored', async () => {
    const f = await fake({ beforeDataWrite: barrier([3, 2]) });
    const stores = await Promise.all([storeFor(f), storeFor(f), storeFor(f)]);
    const name = 'acme-prod/web/primary';
    const vals = [keys.next(), keys.next(), keys.next()];
    const metas = vals.map(() => meta(name));
    const results = await Promise.allSettled(stores.map((s, i) => s.put(name, vals[i]!, metas[i]!)));
    const ok = results.flatMap((r, i) => (r.status === 'fulfilled' ? [vals[i]!] : []));
    const failed = results.flatMap((r, i) => (r.status === 'rejected' ? [i] : []));
    expect(ok).toHaveLength(2);
    expect(failed).toHaveLength(1);
    const err = (results[failed[0]!] as PromiseRejectedResult).reason as Error;
    expect(err.message).toMatch(/check-and-set conflict/);
    expect((err as { code?: string }).code).toBe('LOCKED');
    expect(err.message).not.toContain(vals[failed[0]!]!);
    const entry = f.entries.get(`kms/${name}`)!;
    const stored = entry.versions.map((v) => v.data.value as string);
    // Exactly the acknowledged writes are stored; the rejected one is nowhere.
    expect(stored.sort()).toEqual(ok.sort());
    expect(stored).not.toContain(vals[failed[0]!]);
    expect(entry.custom_metadata!.keyId).toBe(entry.versions.at(-1)!.data.keyId);
  });
});

describe('vault: write check, auth and errors', () => {
  it('checkWritable asks capabilities-self for the data and metadata paths and reports what is missing', async () => {
    const ok = await fake({
      policy: {
        'secret/data/kms/*': ['create', 'update', 'read'],
        'secret/metadata/kms/*': ['read', 'update', 'list'],
      },
    });
    await (await storeFor(ok)).checkWritable();
    const cap = ok.requests.find((r) => r.rawPath === '/v1/sys/capabilities-self')!;
    expect(cap.method).toBe('POST');
    expect(cap.json).toEqual({
      paths: ['secret/data/kms/kms-sync-write-check', 'secret/metadata/kms/kms-sync-write-check'],
    });

    const readOnly = await fake({
      policy: { 'secret/data/kms/*': ['read'], 'secret/metadata/kms/*': ['read', 'list'] },
    });
    const e = await rejectionOf((await storeFor(readOnly)).checkWritable(), keys.values);
    expect(e.code).toBe('NOT_WRITABLE');
    expect(e.message).toContain('create on secret/data/kms/kms-sync-write-check');
    expect(e.message).toContain('update on secret/metadata/kms/kms-sync-write-check');
  });

  it('a KV version 1 mount is refused clearly', async () => {
    const f = await fake({ kvVersion: 1 });
    const e = await rejectionOf((await storeFor(f)).checkWritable(), keys.values);
    expect(e.message).toMatch(/KV version 1; kms-sync needs KV version 2/);
  });

  it('reads the token from ~/.vault-token when VAULT_TOKEN is unset; no token at all is NOT_WRITABLE', async () => {
    const home = scratchDir('kms-vault-home-');
    try {
      const f = await fake();
      await fs.writeFile(path.join(home, '.vault-token'), `${TOKEN}\n`);
      const store = await storeFor(f, { HOME: home });
      await store.checkWritable();
      expect(f.requests.every((r) => r.headers['x-vault-token'] === TOKEN)).toBe(true);
      const none = await storeFor(f, { HOME: path.join(home, 'nowhere') });
      const e = await rejectionOf(none.checkWritable(), keys.values);
      expect(e.code).toBe('NOT_WRITABLE');
      expect(e.message).toMatch(/no Vault token: set VAULT_TOKEN or write .*\.vault-token/);
    } finally {
      await fs.rm(home, { recursive: true, force: true });
    }
  });

  it('a wrong token: 403 permission denied, reported without the token or the value', async () => {
    const f = await fake();
    const store = await storeFor(f, { VAULT_TOKEN: 'hvs.wrong', HOME: '/nonexistent' });
    const v = keys.next();
    const e = await rejectionOf(store.put('acme/web/primary', v, meta('acme/web/primary')), keys.values);
    expect(e.code).toBe('NOT_WRITABLE');
    expect(e.message).toContain('HTTP 403');
    expect(e.message).not.toContain('hvs.wrong');
  });

  it('a server that echoes the request in its error never gets the value into our message', async () => {
    const v = keys.next();
    const f = await fake({
      beforeDataWrite: () => {
        throw new Error(`bad request body {"data":{"value":"${v}","b64":"${Buffer.from(v).toString('base64')}"}}`);
      },
    });
    const e = await rejectionOf((await storeFor(f)).put('acme/web/primary', v, meta('acme/web/primary')), keys.values);
    expect(e.message).toContain('HTTP 500');
    expect(e.message).not.toContain(Buffer.from(v).toString('base64'));
  });

  it('TLS: a private CA from VAULT_CACERT is trusted; without it the certificate is refused', async () => {
    const f = await fake({ tls: true });
    const uri = `vault://127.0.0.1:${f.server.port}/secret/kms`;
    const trusted = await openVaultStore(uri, { env: { VAULT_TOKEN: TOKEN, VAULT_CACERT: f.caFile } });
    const v = keys.next();
    await trusted.put('acme/web/primary', v, meta('acme/web/primary'));
    expect(await trusted.read('acme/web/primary')).toBe(v);
    const untrusted = await openVaultStore(uri, { env: { VAULT_TOKEN: TOKEN } });
    const e = await rejectionOf(untrusted.exists('acme/web/primary'), keys.values);
    expect(e.message).toMatch(/no answer \(.*(SELF_SIGNED|self.signed|UNABLE_TO_VERIFY|DEPTH_ZERO)/i);
    const missingCa = await openVaultStore(uri, { env: { VAULT_TOKEN: TOKEN, VAULT_CACERT: '/nonexistent/ca.pem' } });
    const e2 = await rejectionOf(missingCa.checkWritable(), keys.values);
    expect(e2.message).toMatch(/cannot read the CA certificate file \/nonexistent\/ca.pem/);
  });

  it('an unreachable server is an error naming the route, not a hang', async () => {
    const f = await fake();
    const port = f.server.port;
    await f.close();
    const store = await openVaultStore(`vault://127.0.0.1:${port}/secret/kms?tls=false`, {
      env: { VAULT_TOKEN: TOKEN },
    });
    const e = await rejectionOf(store.exists('acme/web/primary'), keys.values);
    expect(e.message).toMatch(/no answer \(.*ECONNREFUSED/);
  });
});
