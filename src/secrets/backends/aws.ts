/**
 * AWS Secrets Manager backend: `aws-sm://<region>/<prefix>[?endpoint=<url>][&kmsKeyId=<id>][&onDeleted=recover|fail]`.
 *
 * Uses the official `@aws-sdk/client-secrets-manager` (loaded on first use) with the SDK's default
 * credential chain (env, shared config/SSO profile, web identity in CI, container/IMDS). Every
 * write carries a ClientRequestToken derived from (secret name, key id, value hash), so a retried
 * write never creates a second version: CreateSecret, or on ResourceExistsException PutSecretValue
 * (a repeated token with the same value is a no-op) followed by TagResource for the metadata.
 * The metadata tags: projectEnv, client, key, keyId, issuedAt, expiresAt (when set), managed-by,
 * and target (the service target, escaped to the tag alphabet by `encodeTagText`; `list` decodes it).
 */
import { randomUUID } from 'node:crypto';
import type {
  SecretsManagerClient as SmClient,
  SecretsManagerClientConfig,
  SecretListEntry,
  Tag,
} from '@aws-sdk/client-secrets-manager';
import { SecretStoreError, type SecretStoreErrorCode } from '../errors.js';
import type {
  OpenStoreOptions,
  SecretEntry,
  SecretListing,
  SecretMetadata,
  SecretStore,
  StoreBackend,
} from '../store.js';
import {
  checkQueryKeys,
  describeSdkError,
  escapeMapName,
  idempotencyToken,
  mapLimit,
  metadataFromPairs,
  metadataPairs,
  parseCloudUri,
  parseEndpoint,
  parseOnDeleted,
  putSequentially,
  targetValue,
  type OnDeleted,
} from './cloud-names.js';

export const AWS_SM_SCHEMES: readonly string[] = ['aws-sm'];
export const AWS_SM_URI_FORMS: readonly string[] = [
  'aws-sm://<region>/<prefix>[?kmsKeyId=<key>][&endpoint=<url>][&onDeleted=recover|fail]',
];

const REGION_RE = /^[a-z]{2}(-[a-z]+)+-\d+$/;
const PREFIX_SEGMENT_RE = /^[A-Za-z0-9_+=.@-]+$/;
/** Secrets Manager names: 1-512 of [A-Za-z0-9/_+=.@-]. */
export const AWS_NAME_RE = /^[A-Za-z0-9/_+=.@-]{1,512}$/;
const AWS_NAME_RULES = { literal: /^[A-Za-z0-9_+.@-]$/, escape: '=', separator: '/', maxLength: 512 } as const;
/** Tag values: letters, digits, spaces and + - = . _ : / @ (max 256). */
const TAG_VALUE_BAD = /[^\p{L}\p{N} +\-=._:/@]/gu;
const TAG_VALUE_MAX = 256;
/** Characters a target tag keeps as they are; every other one (`=` included) is `=XX` per UTF-8 byte. */
const TAG_TEXT_SAFE = /^[A-Za-z0-9 +\-._:/@]$/;

/**
 * A target as a legal tag value, reversibly: `https://kms.example.com/api/v1#live` →
 * `https://kms.example.com/api/v1=23live` (the other tags are sanitised one way; the target must
 * compare exactly, so it is escaped instead).
 */
export function encodeTagText(s: string): string {
  let out = '';
  for (const ch of s) {
    out += TAG_TEXT_SAFE.test(ch)
      ? ch
      : Array.from(Buffer.from(ch, 'utf8'), (b) => `=${b.toString(16).toUpperCase().padStart(2, '0')}`).join('');
  }
  return out;
}

export function decodeTagText(s: string): string {
  if (!s.includes('=')) return s;
  const parts: Buffer[] = [];
  for (const m of s.matchAll(/=([0-9A-F]{2})|[^=]+|=/g)) {
    parts.push(m[1] !== undefined ? Buffer.from([parseInt(m[1], 16)]) : Buffer.from(m[0], 'utf8'));
  }
  return Buffer.concat(parts).toString('utf8');
}

export interface AwsStoreOverrides {
  /** Extra SDK client configuration (tests: retries, credentials); merged over what the URI says. */
  clientConfig?: SecretsManagerClientConfig;
}

export const awsSecretsManagerBackend: StoreBackend = {
  schemes: AWS_SM_SCHEMES,
  forms: AWS_SM_URI_FORMS,
  open: (uri, opts) => openAwsSecretsManagerStore(uri, opts),
};

export async function openAwsSecretsManagerStore(
  uri: string,
  opts: OpenStoreOptions = {},
  overrides: AwsStoreOverrides = {},
): Promise<AwsSecretsManagerStore> {
  const u = parseCloudUri(uri, 'aws-sm', AWS_SM_URI_FORMS);
  checkQueryKeys(u, uri, ['endpoint', 'kmsKeyId', 'onDeleted'], AWS_SM_URI_FORMS);
  const region = u.authority.toLowerCase();
  if (!REGION_RE.test(region)) {
    throw new SecretStoreError(
      `invalid store URI '${uri}': '${u.authority}' is not an AWS region (e.g. eu-west-1); use ${AWS_SM_URI_FORMS[0]}`,
      {
        code: 'INVALID_URI',
      },
    );
  }
  for (const s of u.segments) {
    if (!PREFIX_SEGMENT_RE.test(s)) {
      throw new SecretStoreError(
        `invalid store URI '${uri}': prefix segment '${s}' may only contain [A-Za-z0-9_+=.@-]`,
        { code: 'INVALID_URI' },
      );
    }
  }
  const prefix = u.segments.join('/');
  if (prefix.length > 200)
    throw new SecretStoreError(`invalid store URI '${uri}': the prefix is longer than 200 characters`, {
      code: 'INVALID_URI',
    });
  const endpoint = parseEndpoint(u, uri, AWS_SM_URI_FORMS);
  const kmsKeyId = u.query.get('kmsKeyId') ?? undefined;
  const onDeleted = parseOnDeleted(u, uri, AWS_SM_URI_FORMS);
  const sdk = await import('@aws-sdk/client-secrets-manager');
  const client = new sdk.SecretsManagerClient({
    region,
    ...(endpoint ? { endpoint: endpoint.toString().replace(/\/$/, '') } : {}),
    ...overrides.clientConfig,
  });
  const display = `aws-sm://${region}/${prefix}${endpoint ? ` (endpoint ${endpoint.origin})` : ''}`;
  return new AwsSecretsManagerStore({
    sdk,
    client,
    region,
    prefix,
    kmsKeyId,
    onDeleted,
    display,
    onNotice: opts.onNotice,
  });
}

type Sdk = typeof import('@aws-sdk/client-secrets-manager');

interface AwsStoreInit {
  sdk: Sdk;
  client: SmClient;
  region: string;
  prefix: string;
  kmsKeyId: string | undefined;
  onDeleted: OnDeleted;
  display: string;
  onNotice: ((message: string) => void) | undefined;
}

function errName(err: unknown): string {
  return err && typeof err === 'object' && typeof (err as { name?: unknown }).name === 'string'
    ? (err as { name: string }).name
    : '';
}

const AUTH_ERRORS = new Set([
  'AccessDeniedException',
  'AccessDenied',
  'UnrecognizedClientException',
  'InvalidSignatureException',
  'ExpiredTokenException',
  'IncompleteSignature',
  'CredentialsProviderError',
  'InvalidClientTokenId',
]);

export function classifyAwsError(err: unknown): SecretStoreErrorCode {
  const n = errName(err);
  if (AUTH_ERRORS.has(n)) return 'NOT_WRITABLE';
  if (n === 'ValidationException' || n === 'InvalidParameterException') return 'INVALID_ARGUMENT';
  return 'IO';
}

export class AwsSecretsManagerStore implements SecretStore {
  readonly kind = 'aws-sm';
  readonly displayUri: string;
  readonly region: string;
  readonly prefix: string;
  /** The SDK client (exposed for tests and clean-up tooling). */
  readonly client: SmClient;
  private readonly sdk: Sdk;
  private readonly kmsKeyId: string | undefined;
  private readonly onDeleted: OnDeleted;
  private readonly onNotice: ((message: string) => void) | undefined;

  constructor(init: AwsStoreInit) {
    this.sdk = init.sdk;
    this.client = init.client;
    this.region = init.region;
    this.prefix = init.prefix;
    this.kmsKeyId = init.kmsKeyId;
    this.onDeleted = init.onDeleted;
    this.displayUri = init.display;
    this.onNotice = init.onNotice;
  }

  /** `<prefix>/<env>/<client>/<key>`; characters outside [A-Za-z0-9_+.@-] become `=XX` (UTF-8 hex). */
  secretName(logical: string): string {
    return escapeMapName(logical, this.prefix, AWS_NAME_RULES, this.displayUri);
  }

  async checkWritable(): Promise<void> {
    const probe = `${this.prefix ? `${this.prefix}/` : ''}kms-sync-write-probe-${randomUUID()}`;
    // 1. Reachability, credentials and read access: DescribeSecret on a name that does not exist.
    try {
      await this.client.send(new this.sdk.DescribeSecretCommand({ SecretId: probe }));
    } catch (err) {
      if (errName(err) !== 'ResourceNotFoundException') throw this.notWritable(err, 'DescribeSecret');
    }
    // 2. Write permission without side effects: PutSecretValue on that missing secret must answer
    //    ResourceNotFoundException (allowed) rather than AccessDeniedException.
    try {
      await this.client.send(
        new this.sdk.PutSecretValueCommand({
          SecretId: probe,
          SecretString: 'kms-sync write probe',
          ClientRequestToken: randomUUID(),
        }),
      );
      throw new SecretStoreError(`secret store ${this.displayUri}: the write probe '${probe}' unexpectedly exists`, {
        code: 'NOT_WRITABLE',
        store: this.displayUri,
      });
    } catch (err) {
      if (err instanceof SecretStoreError) throw err;
      if (errName(err) !== 'ResourceNotFoundException') throw this.notWritable(err, 'PutSecretValue');
    }
  }

  async put(name: string, value: string, meta: SecretMetadata): Promise<void> {
    await this.putMany([{ name, value, meta }]);
  }

  async putMany(entries: SecretEntry[]): Promise<void> {
    await putSequentially(entries, this.displayUri, (e) => this.putOne(e), classifyAwsError);
  }

  async exists(name: string): Promise<boolean> {
    this.checkName(name);
    try {
      const d = await this.client.send(new this.sdk.DescribeSecretCommand({ SecretId: name }));
      return d.DeletedDate === undefined;
    } catch (err) {
      if (errName(err) === 'ResourceNotFoundException') return false;
      throw this.error(`cannot check secret '${name}': ${describeSdkError(err)}`, classifyAwsError(err));
    }
  }

  /**
   * One paged ListSecrets over the longest common name prefix (ListSecrets omits secrets scheduled
   * for deletion), then a DescribeSecret for each name the listing missed: ListSecrets is
   * eventually consistent, DescribeSecret is not.
   */
  async existsMany(names: string[]): Promise<Set<string>> {
    const wanted = [...new Set(names)];
    for (const n of wanted) this.checkName(n);
    const out = new Set<string>();
    if (wanted.length === 0) return out;
    if (wanted.length > 1) {
      for (const s of await this.listRaw(commonPrefix(wanted))) {
        if (s.Name !== undefined && s.DeletedDate === undefined && wanted.includes(s.Name)) out.add(s.Name);
      }
    }
    const rest = wanted.filter((n) => !out.has(n));
    const found = await mapLimit(rest, 4, (n) => this.exists(n));
    rest.forEach((n, i) => {
      if (found[i]) out.add(n);
    });
    return out;
  }

  async read(name: string): Promise<string | undefined> {
    this.checkName(name);
    try {
      const r = await this.client.send(new this.sdk.GetSecretValueCommand({ SecretId: name }));
      if (typeof r.SecretString === 'string') return r.SecretString;
      if (r.SecretBinary) return Buffer.from(r.SecretBinary).toString('utf8');
      return undefined;
    } catch (err) {
      const n = errName(err);
      if (n === 'ResourceNotFoundException') return undefined;
      if (n === 'InvalidRequestException' && (await this.isScheduledForDeletion(name))) return undefined;
      throw this.error(`cannot read secret '${name}': ${describeSdkError(err)}`, classifyAwsError(err));
    }
  }

  async list(): Promise<SecretListing[]> {
    const base = this.prefix ? `${this.prefix}/` : '';
    const out: SecretListing[] = [];
    for (const s of await this.listRaw(base)) {
      if (!s.Name || s.DeletedDate !== undefined || !s.Name.startsWith(base)) continue;
      const tags = Object.fromEntries((s.Tags ?? []).map((t) => [t.Key ?? '', t.Value ?? '']));
      const when = s.LastChangedDate ?? s.CreatedDate;
      const meta = metadataFromPairs(tags);
      if (meta.target !== undefined) meta.target = decodeTagText(meta.target);
      out.push({ name: s.Name, updatedAt: when ? when.toISOString() : '', meta });
    }
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  // -------------------------------------------------------------------------------------------

  private async putOne(e: SecretEntry): Promise<void> {
    this.checkName(e.name);
    const token = idempotencyToken(e.name, e.meta.keyId, e.value);
    const tags = this.tags(e.meta, false);
    try {
      await this.client.send(
        new this.sdk.CreateSecretCommand({
          Name: e.name,
          SecretString: e.value,
          ClientRequestToken: token,
          Description: `kms-sync: customer key ${e.meta.projectEnv}/${e.meta.client}/${e.meta.key}`,
          Tags: tags,
          ...(this.kmsKeyId ? { KmsKeyId: this.kmsKeyId } : {}),
        }),
      );
      return;
    } catch (err) {
      const n = errName(err);
      if (n === 'InvalidRequestException' && (await this.isScheduledForDeletion(e.name))) {
        await this.restoreDeleted(e.name);
      } else if (n !== 'ResourceExistsException') {
        throw err;
      }
    }
    // The secret exists: a new version (same token + same value = no-op), then the metadata.
    await this.client.send(
      new this.sdk.PutSecretValueCommand({ SecretId: e.name, SecretString: e.value, ClientRequestToken: token }),
    );
    // TagResource merges: an entry without a target empties the tag an earlier key may have left.
    await this.client.send(new this.sdk.TagResourceCommand({ SecretId: e.name, Tags: this.tags(e.meta, true) }));
  }

  private async restoreDeleted(name: string): Promise<void> {
    if (this.onDeleted === 'fail') {
      throw this.error(
        `secret '${name}' is scheduled for deletion, so its name cannot be reused; restore it (aws secretsmanager restore-secret --secret-id '${name}') ` +
          `or wait for the deletion to complete, or open the store with onDeleted=recover`,
        'NOT_WRITABLE',
      );
    }
    try {
      await this.client.send(new this.sdk.RestoreSecretCommand({ SecretId: name }));
    } catch (err) {
      throw this.error(
        `secret '${name}' is scheduled for deletion and could not be restored (${describeSdkError(err)}); ` +
          `restore it (aws secretsmanager restore-secret --secret-id '${name}') or wait until the deletion completes`,
        classifyAwsError(err),
      );
    }
    this.onNotice?.(
      `restored secret '${name}' in ${this.displayUri}, which was scheduled for deletion, to store a new key in it`,
    );
  }

  private async isScheduledForDeletion(name: string): Promise<boolean> {
    try {
      const d = await this.client.send(new this.sdk.DescribeSecretCommand({ SecretId: name }));
      return d.DeletedDate !== undefined;
    } catch {
      return false;
    }
  }

  private async listRaw(namePrefix: string): Promise<SecretListEntry[]> {
    const out: SecretListEntry[] = [];
    let token: string | undefined;
    try {
      do {
        const r = await this.client.send(
          new this.sdk.ListSecretsCommand({
            MaxResults: 100,
            ...(namePrefix ? { Filters: [{ Key: 'name', Values: [namePrefix] }] } : {}),
            ...(token ? { NextToken: token } : {}),
          }),
        );
        for (const s of r.SecretList ?? []) if (!namePrefix || s.Name?.startsWith(namePrefix)) out.push(s);
        token = r.NextToken || undefined;
      } while (token);
    } catch (err) {
      throw this.error(`cannot list secrets: ${describeSdkError(err)}`, classifyAwsError(err));
    }
    return out;
  }

  /**
   * The metadata as tags. `target` is escaped reversibly (`encodeTagText`), or `targetTag` when
   * even that is over 256 characters; `clear` (a write to an existing secret) sends an empty
   * target (expiresAt) tag when the entry has none, since TagResource keeps tags it is not given:
   * an earlier key's target or expiry must not stay on the new one.
   */
  private tags(meta: SecretMetadata, clear: boolean): Tag[] {
    const tags = Object.entries(metadataPairs(meta)).map(([Key, v]) => ({
      Key,
      Value:
        Key === 'target'
          ? targetValue(v, TAG_VALUE_MAX, encodeTagText)
          : v.replace(TAG_VALUE_BAD, '_').slice(0, TAG_VALUE_MAX),
    }));
    if (clear && meta.target === undefined) tags.push({ Key: 'target', Value: '' });
    if (clear && (meta.expiresAt === null || meta.expiresAt === undefined)) tags.push({ Key: 'expiresAt', Value: '' });
    return tags;
  }

  private checkName(name: string): void {
    if (typeof name !== 'string' || !AWS_NAME_RE.test(name)) {
      throw this.error(
        `'${String(name)}' is not a valid Secrets Manager name (1-512 of [A-Za-z0-9/_+=.@-])`,
        'INVALID_ARGUMENT',
      );
    }
  }

  private notWritable(err: unknown, call: string): SecretStoreError {
    const n = errName(err);
    const hint =
      n === 'AccessDeniedException'
        ? `: access denied; the identity needs secretsmanager:DescribeSecret, CreateSecret, PutSecretValue, TagResource on arn:aws:secretsmanager:${this.region}:<account>:secret:${this.prefix ? `${this.prefix}/` : ''}* (see docs/secret-stores-cloud.md)`
        : AUTH_ERRORS.has(n) || n === 'CredentialsProviderError'
          ? ': no usable AWS credentials (env, profile, web identity, IMDS)'
          : '';
    return this.error(
      `is not writable (${call} failed: ${describeSdkError(err)})${hint}`,
      classifyAwsError(err) === 'IO' ? 'NOT_WRITABLE' : classifyAwsError(err),
      true,
    );
  }

  private error(message: string, code: SecretStoreErrorCode, noColon = false): SecretStoreError {
    return new SecretStoreError(`secret store ${this.displayUri}${noColon ? ' ' : ': '}${message}`, {
      code,
      store: this.displayUri,
    });
  }
}

function commonPrefix(names: string[]): string {
  let p = names[0] ?? '';
  for (const n of names) while (!n.startsWith(p)) p = p.slice(0, -1);
  return p;
}
