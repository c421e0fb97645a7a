// The remote backends behind openStore / StoreRegistry: scheme selection, opening without I/O, and
// the presence check (missing / stale via listed metadata) against the fake Vault.
import { afterEach, describe, expect, it } from 'vitest';
import { checkSecretPresence } from '../../../src/secrets/presence.js';
import { StoreRegistry } from '../../../src/secrets/registry.js';
import { DEFAULT_POLICY } from '../../../src/model/policy.js';
import { SecretStoreError } from '../../../src/secrets/store.js';
import { openStore, supportedStoreSchemes } from '../../../src/secrets/registry.js';
import { fakeKey, meta } from '../helpers.js';
import { startFakeVault, type FakeVault } from './support/fake-vault.js';

const fakes: FakeVault[] = [];
afterEach(async () => {
  await Promise.all(fakes.splice(0).map((f) => f.close()));
});

describe('remote backends in openStore', () => {
  it('are selected by scheme and open without touching the network', async () => {
    expect(supportedStoreSchemes()).toEqual(
      expect.arrayContaining(['vault:', 'openbao:', 'github:', 'gitlab:', 'kubernetes:', 'k8s:']),
    );
    // Port 9 on 127.0.0.1: nothing listens; opening must not care.
    const cases: [string, string][] = [
      ['vault://127.0.0.1:9/secret/kms', 'vault'],
      ['OpenBao://127.0.0.1:9/secret/kms', 'vault'],
      ['github://acme/infra', 'github'],
      ['gitlab://42?environment_scope=production', 'gitlab'],
      ['kubernetes://kms/app-keys', 'kubernetes'],
      ['k8s://kms', 'kubernetes'],
    ];
    for (const [uri, kind] of cases) {
      const s = await openStore(uri, { env: {} });
      expect(s.kind).toBe(kind);
      expect(s.displayUri).not.toMatch(/token|@/i);
    }
  });

  it('report malformed URIs as INVALID_URI with the accepted forms', async () => {
    for (const uri of ['vault://h/s?bogus=1', 'github://acme', 'gitlab://', 'kubernetes://Bad_NS']) {
      const e = await openStore(uri, { env: {} }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(e).toBeInstanceOf(SecretStoreError);
      expect((e as SecretStoreError).code).toBe('INVALID_URI');
      expect((e as SecretStoreError).message).toMatch(/; use /);
    }
  });
});

describe('presence check through the registry', () => {
  it('present, missing and stale (another key id in custom_metadata) for a Vault store', async () => {
    const f = await startFakeVault({ token: 't0k' });
    fakes.push(f);
    const uri = `vault://127.0.0.1:${f.server.port}/secret/kms?tls=false`;
    const registry = new StoreRegistry({
      declarations: [{ name: 'vault', uri }],
      baseDir: '/nonexistent',
      policy: { ...DEFAULT_POLICY, storeHosts: [`127.0.0.1:${f.server.port}`] },
      env: { VAULT_TOKEN: 't0k', HOME: '/nonexistent' },
    });
    const store = await registry.get('vault');
    const mCur = meta('acme-prod/web/primary');
    const mOld = meta('acme-prod/api/primary');
    await store.put(store.secretName('acme-prod/web/primary'), fakeKey(), mCur);
    await store.put(store.secretName('acme-prod/api/primary'), fakeKey(), mOld);
    const { results, warnings } = await checkSecretPresence(registry, [
      { address: 'key.web', store: 'vault', secretName: 'acme-prod/web/primary', keyId: mCur.keyId },
      { address: 'key.api', store: 'vault', secretName: 'acme-prod/api/primary', keyId: 'key_rotated' },
      { address: 'key.gone', store: 'vault', secretName: 'acme-prod/gone/primary', keyId: 'key_x' },
    ]);
    expect(warnings).toEqual([]);
    expect(results.get('key.web')!.status).toBe('present');
    expect(results.get('key.api')!.status).toBe('stale');
    expect(results.get('key.api')!.detail).toContain(mOld.keyId);
    expect(results.get('key.gone')!.status).toBe('missing');
  });
});
