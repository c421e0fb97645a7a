// Secret-name mapping of the cloud backends: deterministic, legal for the backend, collision-free
// (proved by decoding where the mapping is reversible, and by fuzzing nasty names otherwise).
import { randomBytes } from 'node:crypto';
import type { TokenCredential } from '@azure/core-auth';
import { describe, expect, it } from 'vitest';
import { AWS_NAME_RE, openAwsSecretsManagerStore } from '../../../src/secrets/backends/aws.js';
import { AZURE_NAME_RE, openAzureKeyVaultStore } from '../../../src/secrets/backends/azure.js';
import { idempotencyToken } from '../../../src/secrets/backends/cloud-names.js';
import { GCP_NAME_RE, openGcpSecretManagerStore } from '../../../src/secrets/backends/gcp.js';
import type { SecretStore } from '../../../src/secrets/store.js';
import { openStore, supportedStoreSchemes } from '../../../src/secrets/registry.js';

const credential: TokenCredential = {
  getToken: () => Promise.resolve({ token: 't', expiresOnTimestamp: Date.now() + 60_000 }),
};
const aws = await openAwsSecretsManagerStore('aws-sm://eu-west-1/kms-sync/prod');
const gcp = await openGcpSecretManagerStore('gcp-sm://projects/my-project-123/kms-sync');
const azure = await openAzureKeyVaultStore('azure-kv://my-vault/kms', {}, { credential });
const awsBare = await openAwsSecretsManagerStore('aws-sm://eu-west-1');
const gcpBare = await openGcpSecretManagerStore('gcp-sm://projects/my-project-123');
const azureBare = await openAzureKeyVaultStore('azure-kv://my-vault', {}, { credential });

/** Inverse of the escape mapping (AWS: ESC '=', separator '/'; GCP: ESC '_', separator '__'). */
function decode(name: string, esc: string, sep: string, prefix: string): string {
  let s = name;
  if (prefix) {
    expect(s.startsWith(prefix + sep)).toBe(true);
    s = s.slice(prefix.length + sep.length);
  }
  const bytes: number[] = [];
  let out = '';
  const flush = (): void => {
    out += Buffer.from(bytes).toString('utf8');
    bytes.length = 0;
  };
  for (let i = 0; i < s.length; ) {
    if (s.startsWith(sep, i) && (sep !== esc + esc || s[i + 1] === esc)) {
      flush();
      out += '/';
      i += sep.length;
    } else if (s[i] === esc) {
      const hex = s.slice(i + 1, i + 3);
      expect(hex).toMatch(/^[0-9A-F]{2}$/);
      bytes.push(parseInt(hex, 16));
      i += 3;
    } else {
      flush();
      out += s[i];
      i += 1;
    }
  }
  flush();
  return out;
}

const NASTY = [
  'a',
  'Z',
  '0',
  '-',
  '_',
  '.',
  '=',
  '+',
  '@',
  ' ',
  '~',
  '%',
  'é',
  '中',
  '😀',
  '--',
  '__',
  '=3D',
  '_5F',
  'x',
];
function randomSegment(): string {
  const n = 1 + (randomBytes(1)[0]! % 6);
  return Array.from({ length: n }, () => NASTY[randomBytes(1)[0]! % NASTY.length]).join('');
}
function randomLogical(): string {
  return `${randomSegment()}/${randomSegment()}/${randomSegment()}`;
}

describe('cloud secret names', () => {
  it('readable names stay readable', () => {
    expect(aws.secretName('acme-prod/web/primary')).toBe('kms-sync/prod/acme-prod/web/primary');
    expect(awsBare.secretName('acme-prod/web/primary')).toBe('acme-prod/web/primary');
    expect(aws.secretName('acme_prod/web.app/k@1')).toBe('kms-sync/prod/acme_prod/web.app/k@1');
    expect(gcp.secretName('acme-prod/web/primary')).toBe('kms-sync__acme-prod__web__primary');
    expect(gcpBare.secretName('acme-prod/web/primary')).toBe('acme-prod__web__primary');
    expect(azure.secretName('acme-prod/web/primary')).toBe('kms--acme-prod--web--primary');
    expect(azureBare.secretName('acme-prod/web/primary')).toBe('acme-prod--web--primary');
  });

  it('escapes what the backend does not allow', () => {
    expect(aws.secretName('acme prod/wéb/a=b')).toBe('kms-sync/prod/acme=20prod/w=C3=A9b/a=3Db');
    expect(gcp.secretName('acme_prod/web.app/k')).toBe('kms-sync__acme_5Fprod__web_2Eapp__k');
    // Azure: lossy but readable, with a hash of the logical name after '---'.
    expect(azure.secretName('acme_prod/Web/k')).toMatch(/^kms--acme5fprod--web--k---[0-9a-f]{16}$/);
    expect(azure.secretName('a-/b/c')).toMatch(/---[0-9a-f]{16}$/);
  });

  it('AWS and GCP names decode back to the logical name (so the mapping is injective)', () => {
    for (let i = 0; i < 2000; i++) {
      const l = randomLogical();
      expect(decode(aws.secretName(l), '=', '/', 'kms-sync/prod')).toBe(l);
      expect(decode(gcp.secretName(l), '_', '__', 'kms-sync')).toBe(l);
      expect(decode(gcpBare.secretName(l), '_', '__', '')).toBe(l);
    }
  });

  it('tricky pairs never collide', () => {
    const pairs: [string, string][] = [
      ['a_/b/c', 'a/_b/c'],
      ['a-/b/c', 'a/-b/c'],
      ['a=/b/c', 'a/=b/c'],
      ['a=3D/b/c', 'a=/b/c'],
      ['a_5F/b/c', 'a_/b/c'],
      ['a--b/c/d', 'a/b/c--d'],
      ['Acme/web/k', 'acme/web/k'],
      ['a b/c/d', 'a_b/c/d'],
      ['a.b/c/d', 'a-b/c/d'],
    ];
    for (const s of [aws, gcp, azure, awsBare, gcpBare, azureBare]) {
      for (const [x, y] of pairs) expect(fold(s, s.secretName(x))).not.toBe(fold(s, s.secretName(y)));
    }
  });

  it('fuzz: legal, deterministic and collision-free (Azure compared case-insensitively)', () => {
    const stores: [SecretStore, RegExp][] = [
      [aws, AWS_NAME_RE],
      [gcp, GCP_NAME_RE],
      [azure, AZURE_NAME_RE],
      [azureBare, AZURE_NAME_RE],
    ];
    for (const [store, legal] of stores) {
      const seen = new Map<string, string>();
      for (let i = 0; i < 3000; i++) {
        const l = randomLogical();
        const n = store.secretName(l);
        expect(n).toMatch(legal);
        expect(store.secretName(l)).toBe(n);
        const k = fold(store, n);
        const prev = seen.get(k);
        if (prev !== undefined && prev !== l) throw new Error(`${store.kind}: '${prev}' and '${l}' both map to '${n}'`);
        seen.set(k, l);
      }
    }
  });

  it('long names are cut to the backend limit with a hash, still distinct', () => {
    const long = (c: string): string => `${'e'.repeat(200)}/${'c'.repeat(200)}/${c.repeat(300)}`;
    for (const [store, max] of [
      [aws, 512],
      [gcp, 255],
      [azure, 127],
    ] as const) {
      const a = store.secretName(long('k'));
      const b = store.secretName(long('q'));
      expect(a.length).toBeLessThanOrEqual(max);
      expect(a).not.toBe(b);
    }
    expect(gcp.secretName(long('k'))).toMatch(/_h[0-9a-f]{16}$/);
    expect(azure.secretName(long('k'))).toMatch(/---[0-9a-f]{16}$/);
  });

  it('rejects logical names that are not <env>/<client>/<key>', () => {
    for (const s of [aws, gcp, azure]) {
      for (const bad of ['', 'a/b', 'a/b/c/d', 'a//c', '/b/c'])
        expect(() => s.secretName(bad)).toThrow(/logical secret name/);
    }
  });

  it('idempotency tokens are UUID-shaped and depend on name, key id and value', () => {
    const t = idempotencyToken('n', 'k1', 'v');
    expect(t).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(idempotencyToken('n', 'k1', 'v')).toBe(t);
    expect(
      new Set([t, idempotencyToken('m', 'k1', 'v'), idempotencyToken('n', 'k2', 'v'), idempotencyToken('n', 'k1', 'w')])
        .size,
    ).toBe(4);
  });

  it('openStore dispatches the cloud schemes', async () => {
    expect(supportedStoreSchemes()).toEqual(expect.arrayContaining(['aws-sm:', 'gcp-sm:', 'azure-kv:']));
    expect((await openStore('aws-sm://eu-west-1/kms-sync')).kind).toBe('aws-sm');
    expect((await openStore('gcp-sm://projects/my-project-123/kms-sync')).kind).toBe('gcp-sm');
    await expect(openStore('aws-sm://nowhere')).rejects.toThrow(/aws-sm:\/\/<region>\/<prefix>/);
  });
});

function fold(store: SecretStore, name: string): string {
  return store.kind === 'azure-kv' ? name.toLowerCase() : name;
}
