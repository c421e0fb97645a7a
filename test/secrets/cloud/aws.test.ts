// AWS Secrets Manager backend through the official SDK, against a local server that speaks the
// AWS JSON 1.1 protocol (Debian has no moto package; see docs/secret-stores-cloud.md).
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  AWS_NAME_RE,
  decodeTagText,
  encodeTagText,
  openAwsSecretsManagerStore,
  type AwsSecretsManagerStore,
} from '../../../src/secrets/backends/aws.js';
import { PartialWriteError } from '../../../src/secrets/backends/cloud-names.js';
import { SecretStoreError } from '../../../src/secrets/store.js';
import { expectNoSecrets, fakeKey, meta } from '../helpers.js';
import { startAwsFake, type AwsFake } from './aws-fake.js';
import { storeContract } from './contract.js';
import { expectNoSecretInUrlOrHeaders } from './fake-http.js';

// The SDK's default credential chain picks these up (static env credentials; no IMDS probing).
process.env.AWS_ACCESS_KEY_ID = 'AKIDKMSSYNCTEST';
process.env.AWS_SECRET_ACCESS_KEY = 'kms-sync-test-secret-access-key';
process.env.AWS_EC2_METADATA_DISABLED = 'true';
delete process.env.AWS_PROFILE;
delete process.env.AWS_SESSION_TOKEN;

let fake: AwsFake;
beforeAll(async () => {
  fake = await startAwsFake();
});
afterAll(async () => {
  await fake.close();
});

const open = (query = '', prefix = 'kms-sync/test'): Promise<AwsSecretsManagerStore> =>
  openAwsSecretsManagerStore(
    `aws-sm://us-east-1/${prefix}?endpoint=${encodeURIComponent(fake.url)}${query}`,
    {},
    { clientConfig: { maxAttempts: 1 } },
  );

storeContract('aws-sm (local JSON 1.1 server)', async () => ({ store: await open(), legal: AWS_NAME_RE }));

describe('aws-sm: wire format through the official SDK', () => {
  let store: AwsSecretsManagerStore;
  beforeEach(async () => {
    fake.requests.length = 0;
    fake.fault = undefined;
    fake.denied.clear();
    fake.secrets.clear();
    store = await open('&kmsKeyId=alias%2Fkms-sync');
  });

  it('creates a secret with a deterministic ClientRequestToken, tags and the KMS key; a retry sends the same token and adds no version', async () => {
    const name = store.secretName('acme-prod/web/primary');
    expect(name).toBe('kms-sync/test/acme-prod/web/primary');
    const value = fakeKey();
    const m = meta('acme-prod/web/primary');
    await store.put(name, value, m);
    const [create] = fake.bodies('CreateSecret');
    const req = fake.requests[0]!;
    expect(req.method).toBe('POST');
    expect(req.path).toBe('/');
    expect(req.headers['x-amz-target']).toBe('secretsmanager.CreateSecret');
    expect(req.headers['content-type']).toMatch(/^application\/x-amz-json-1\.1/);
    expect(req.headers.authorization).toMatch(
      /^AWS4-HMAC-SHA256 Credential=AKIDKMSSYNCTEST\/\d{8}\/us-east-1\/secretsmanager\/aws4_request/,
    );
    expect(create).toMatchObject({ Name: name, SecretString: value, KmsKeyId: 'alias/kms-sync' });
    expect(create!.ClientRequestToken).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const tags = Object.fromEntries((create!.Tags as { Key: string; Value: string }[]).map((t) => [t.Key, t.Value]));
    expect(tags).toEqual({
      projectEnv: 'acme-prod',
      client: 'web',
      key: 'primary',
      keyId: m.keyId,
      issuedAt: m.issuedAt,
      'managed-by': 'kms-sync',
    });

    // The journal retries the same entry (e.g. the response was lost): same token, no new version.
    await store.put(name, value, m);
    const tokens = [...fake.bodies('CreateSecret'), ...fake.bodies('PutSecretValue')].map((b) => b.ClientRequestToken);
    expect(new Set(tokens).size).toBe(1);
    expect(fake.secrets.get(name)!.versions).toHaveLength(1);
    expectNoSecretInUrlOrHeaders(fake.requests, [value]);
  });

  it('an existing secret gets PutSecretValue (new token per key) then TagResource with the new metadata', async () => {
    const name = store.secretName('acme-prod/web/primary');
    await store.put(name, fakeKey(), meta('acme-prod/web/primary'));
    fake.requests.length = 0;
    const v2 = fakeKey();
    const m2 = meta('acme-prod/web/primary');
    await store.put(name, v2, m2);
    expect(fake.ops()).toEqual(['CreateSecret', 'PutSecretValue', 'TagResource']);
    const [put] = fake.bodies('PutSecretValue');
    expect(put).toMatchObject({ SecretId: name, SecretString: v2 });
    expect(put!.ClientRequestToken).not.toBe(fake.secrets.get(name)!.versions[0]!.token);
    const [tag] = fake.bodies('TagResource');
    expect(tag!.Tags).toContainEqual({ Key: 'keyId', Value: m2.keyId });
    expect(fake.secrets.get(name)!.versions.map((v) => v.stages)).toEqual([['AWSPREVIOUS'], ['AWSCURRENT']]);
    expectNoSecretInUrlOrHeaders(fake.requests, [v2]);
  });

  it('the target goes into a tag escaped to the tag alphabet (=XX), and list decodes it; a rewrite without one empties the tag', async () => {
    const name = store.secretName('acme-prod/web/primary');
    const target = 'https://kms.example.com/api/v1#live';
    await store.put(name, fakeKey(), meta('acme-prod/web/primary', { target }));
    const [create] = fake.bodies('CreateSecret');
    expect(create!.Tags).toContainEqual({ Key: 'target', Value: 'https://kms.example.com/api/v1=23live' });
    expect(fake.secrets.get(name)!.tags.get('target')).toBe('https://kms.example.com/api/v1=23live');
    expect((await store.list())[0]!.meta!.target).toBe(target);
    for (const t of ['a=b', '=23', 'ü € 😀 #%', 'plain text 1.2/3:4@x+y-z_'])
      expect(decodeTagText(encodeTagText(t))).toBe(t);
    expect(encodeTagText('a=b')).toBe('a=3Db');

    await store.put(name, fakeKey(), meta('acme-prod/web/primary'));
    expect(fake.bodies('TagResource')[0]!.Tags).toContainEqual({ Key: 'target', Value: '' });
    expect((await store.list())[0]!.meta).not.toHaveProperty('target');
  });

  it('a rotation to a key that never expires empties the expiresAt tag of the earlier key (TagResource merges)', async () => {
    const name = store.secretName('acme-prod/web/primary');
    await store.put(name, fakeKey(), meta('acme-prod/web/primary', { expiresAt: '2030-01-01T00:00:00.000Z' }));
    expect((await store.list())[0]!.meta!.expiresAt).toBe('2030-01-01T00:00:00.000Z');
    await store.put(name, fakeKey(), meta('acme-prod/web/primary', { expiresAt: null }));
    expect(fake.secrets.get(name)!.tags.get('expiresAt')).toBe('');
    expect((await store.list())[0]!.meta!.expiresAt).toBeNull();
  });

  it('putMany that fails midway names exactly the entries that were not stored, never a value', async () => {
    const entries = ['a', 'b', 'c', 'd'].map((c) => ({
      name: store.secretName(`acme-prod/${c}/k`),
      value: fakeKey(),
      meta: meta(`acme-prod/${c}/k`),
    }));
    fake.fault = (target, body) =>
      target === 'secretsmanager.CreateSecret' && body.Name === entries[2]!.name
        ? {
            status: 500,
            headers: { 'x-amzn-errortype': 'InternalServiceError' },
            body: { __type: 'InternalServiceError', message: 'boom' },
          }
        : undefined;
    const err = await store.putMany(entries).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(PartialWriteError);
    const e = err as PartialWriteError;
    expect(e.stored).toEqual([entries[0]!.name, entries[1]!.name]);
    expect(e.notStored).toEqual([entries[2]!.name, entries[3]!.name]);
    expect(e.message).toContain(`NOT stored: ${entries[2]!.name}, ${entries[3]!.name}`);
    expect(e.message).toContain('InternalServiceError');
    expectNoSecrets(
      e.message,
      entries.map((x) => x.value),
    );
    expect([...fake.secrets.keys()].sort()).toEqual([entries[0]!.name, entries[1]!.name]);
    // The journal re-flushes the whole batch: the two that landed are not duplicated.
    fake.fault = undefined;
    await store.putMany(entries);
    expect([...fake.secrets.values()].map((s) => s.versions.length)).toEqual([1, 1, 1, 1]);
  });

  it('checkWritable: DescribeSecret + a side-effect-free PutSecretValue probe; AccessDenied is a clear NOT_WRITABLE', async () => {
    await store.checkWritable();
    expect(fake.ops()).toEqual(['DescribeSecret', 'PutSecretValue']);
    expect(fake.secrets.size).toBe(0);
    expect(fake.bodies('PutSecretValue')[0]!.SecretId).toMatch(/^kms-sync\/test\/kms-sync-write-probe-/);
    fake.denied.add('secretsmanager.PutSecretValue');
    const e = await store.checkWritable().then(
      () => undefined,
      (x: unknown) => x as SecretStoreError,
    );
    expect(e).toBeInstanceOf(SecretStoreError);
    expect(e!.code).toBe('NOT_WRITABLE');
    expect(e!.message).toMatch(
      /AccessDeniedException.*secretsmanager:DescribeSecret, CreateSecret, PutSecretValue, TagResource/,
    );
  });

  it('exists treats a secret scheduled for deletion as missing; put restores it (onDeleted=recover) or explains (onDeleted=fail)', async () => {
    const name = store.secretName('acme-prod/web/primary');
    await store.put(name, fakeKey(), meta('acme-prod/web/primary'));
    fake.secrets.get(name)!.deletedDate = 1;
    expect(await store.exists(name)).toBe(false);
    expect(await store.existsMany([name, store.secretName('acme-prod/x/y')])).toEqual(new Set());
    expect(await store.read(name)).toBeUndefined();

    const strict = await open('&onDeleted=fail');
    const e = await strict.put(name, fakeKey(), meta('acme-prod/web/primary')).then(
      () => undefined,
      (x: unknown) => x as Error,
    );
    expect(e?.message).toMatch(/scheduled for deletion.*restore-secret/);

    const notices: string[] = [];
    const lenient = await openAwsSecretsManagerStore(
      `aws-sm://us-east-1/kms-sync/test?endpoint=${encodeURIComponent(fake.url)}`,
      { onNotice: (n) => notices.push(n) },
    );
    const v = fakeKey();
    await lenient.put(name, v, meta('acme-prod/web/primary'));
    expect(await lenient.read(name)).toBe(v);
    expect(notices.join()).toMatch(/restored secret/);
    expect(fake.ops()).toContain('RestoreSecret');
  });

  it('existsMany uses one paged ListSecrets with a name-prefix filter (then confirms misses with DescribeSecret)', async () => {
    fake.listPageSize = 2;
    try {
      const names = ['a', 'b', 'c', 'd', 'e'].map((c) => store.secretName(`acme-prod/${c}/k`));
      for (const n of names) await store.put(n, fakeKey(), meta('acme-prod/x/k'));
      fake.requests.length = 0;
      const missing = store.secretName('acme-prod/zz/k');
      const got = await store.existsMany([...names, missing]);
      expect([...got].sort()).toEqual(names);
      const lists = fake.bodies('ListSecrets');
      expect(lists).toHaveLength(3); // 5 secrets, pages of 2
      expect(lists[0]!.Filters).toEqual([{ Key: 'name', Values: ['kms-sync/test/acme-prod/'] }]);
      expect(lists[1]!.NextToken).toBe('2');
      expect(fake.bodies('DescribeSecret').map((b) => b.SecretId)).toEqual([missing]);
    } finally {
      fake.listPageSize = 100;
    }
  });

  it('rejects bad URIs with the accepted forms', async () => {
    await expect(openAwsSecretsManagerStore('aws-sm://not_a_region/p')).rejects.toThrow(
      /not an AWS region.*aws-sm:\/\/<region>\/<prefix>/,
    );
    await expect(openAwsSecretsManagerStore('aws-sm://eu-west-1/p?endpont=x')).rejects.toThrow(
      /unknown option 'endpont'/,
    );
    await expect(openAwsSecretsManagerStore('aws-sm://eu-west-1/bad%20prefix')).rejects.toThrow(/prefix segment/);
    await expect(openAwsSecretsManagerStore('aws-sm://eu-west-1/p?endpoint=ftp://x')).rejects.toThrow(/http\(s\) URL/);
  });
});
