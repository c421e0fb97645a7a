/**
 * Azure Key Vault backend: `azure-kv://<vault-name>[/<prefix>]` (→ https://<vault-name>.vault.azure.net)
 * or `azure-kv://<vault host>[:port][/<prefix>]` (sovereign clouds, private endpoints), with
 * `?onDeleted=recover|fail`.
 *
 * Uses the official `@azure/keyvault-secrets` client with `DefaultAzureCredential` from
 * `@azure/identity` (env service principal, workload identity in CI, managed identity, az CLI),
 * both loaded on first use. Each write is one setSecret (a new version) carrying the key's
 * metadata (the service target included, when known) and a write token (from name, key id and
 * value hash) as tags, and a content type; a retried write whose token is already on the latest
 * version is skipped. A soft-deleted secret of the same name blocks the name:
 * by default it is recovered (then the new version is set on top), with onDeleted=fail the write
 * stops with a message saying how to recover or purge it.
 */
import { randomUUID } from 'node:crypto';
import type { TokenCredential } from '@azure/core-auth';
import type { SecretClient, SecretClientOptions, SecretProperties } from '@azure/keyvault-secrets';
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
  hashMapName,
  idempotencyToken,
  metadataFromPairs,
  metadataPairs,
  targetValue,
  parseCloudUri,
  parseOnDeleted,
  putSequentially,
  type OnDeleted,
} from './cloud-names.js';
import { azureKvNamesHost } from '../store-policy.js';

export const AZURE_KV_SCHEMES: readonly string[] = ['azure-kv'];
export const AZURE_KV_URI_FORMS: readonly string[] = [
  'azure-kv://<vault-name>[/<prefix>][?onDeleted=recover|fail]',
  'azure-kv://<vault host>[:port][/<prefix>] (e.g. myvault.vault.azure.cn)',
];

/** Key Vault secret names: 1-127 of [0-9A-Za-z-]. */
export const AZURE_NAME_RE = /^[0-9A-Za-z-]{1,127}$/;
const CLEAN_SEGMENT = /^[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*$/;
const VAULT_NAME_RE = /^[A-Za-z][A-Za-z0-9-]{1,22}[A-Za-z0-9]$/;
const HOST_RE = /^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9a-fA-F:.]+\])(?::\d{1,5})?$/;
export const AZURE_CONTENT_TYPE = 'text/plain; kms-sync=customer-key';
/**
 * Key Vault compares names case-insensitively, so only lower-case words are kept verbatim; upper
 * case is folded and other characters hex-encoded, and such names get the hash suffix.
 */
const AZURE_NAME_RULES = {
  clean: /^[a-z0-9]+(?:-[a-z0-9]+)*$/,
  separator: '--',
  marker: '---',
  sanitize: (ch: string): string =>
    /^[A-Z]$/.test(ch)
      ? ch.toLowerCase()
      : ch === '-'
        ? '-'
        : Array.from(Buffer.from(ch, 'utf8'), (b) => b.toString(16).padStart(2, '0')).join(''),
  maxLength: 127,
};

export interface AzureStoreOverrides {
  /** Instead of DefaultAzureCredential (tests, or callers with their own credential). */
  credential?: TokenCredential;
  /** Extra SecretClient options (tests: tlsOptions, retryOptions). */
  clientOptions?: SecretClientOptions;
  /** Poll interval while a soft-deleted secret is recovered (default 2 s). */
  recoverPollMs?: number;
}

export const azureKeyVaultBackend: StoreBackend = {
  schemes: AZURE_KV_SCHEMES,
  forms: AZURE_KV_URI_FORMS,
  open: (uri, opts) => openAzureKeyVaultStore(uri, opts),
};

export async function openAzureKeyVaultStore(
  uri: string,
  opts: OpenStoreOptions = {},
  overrides: AzureStoreOverrides = {},
): Promise<AzureKeyVaultStore> {
  const u = parseCloudUri(uri, 'azure-kv', AZURE_KV_URI_FORMS);
  checkQueryKeys(u, uri, ['onDeleted'], AZURE_KV_URI_FORMS);
  const bad = (why: string): SecretStoreError =>
    new SecretStoreError(`invalid store URI '${uri}': ${why}; use ${AZURE_KV_URI_FORMS.join(' or ')}`, {
      code: 'INVALID_URI',
    });
  let vaultUrl: string;
  if (azureKvNamesHost(u.authority)) {
    if (!HOST_RE.test(u.authority)) throw bad(`'${u.authority}' is not a host name`);
    vaultUrl = `https://${u.authority.toLowerCase()}`;
  } else {
    if (!VAULT_NAME_RE.test(u.authority) || u.authority.includes('--'))
      throw bad(`'${u.authority}' is not a Key Vault name (3-24 of [A-Za-z0-9-], starting with a letter)`);
    vaultUrl = `https://${u.authority.toLowerCase()}.vault.azure.net`;
  }
  if (
    u.segments.length > 1 ||
    (u.segments[0] !== undefined && (!CLEAN_SEGMENT.test(u.segments[0]) || u.segments[0].length > 40))
  ) {
    throw bad('the prefix must be one segment of [A-Za-z0-9] words joined by single hyphens (at most 40)');
  }
  const prefix = (u.segments[0] ?? '').toLowerCase();
  const onDeleted = parseOnDeleted(u, uri, AZURE_KV_URI_FORMS);
  const sdk = await import('@azure/keyvault-secrets');
  const credential = overrides.credential ?? new (await import('@azure/identity')).DefaultAzureCredential();
  const client = new sdk.SecretClient(vaultUrl, credential, { ...overrides.clientOptions });
  return new AzureKeyVaultStore({
    client,
    vaultUrl,
    prefix,
    onDeleted,
    recoverPollMs: overrides.recoverPollMs ?? 2000,
    onNotice: opts.onNotice,
  });
}

interface AzureStoreInit {
  client: SecretClient;
  vaultUrl: string;
  prefix: string;
  onDeleted: OnDeleted;
  recoverPollMs: number;
  onNotice: ((message: string) => void) | undefined;
}

function status(err: unknown): number | undefined {
  const s = err && typeof err === 'object' ? (err as { statusCode?: unknown }).statusCode : undefined;
  return typeof s === 'number' ? s : undefined;
}

export function classifyAzureError(err: unknown): SecretStoreErrorCode {
  const s = status(err);
  if (s === 401 || s === 403) return 'NOT_WRITABLE';
  if (s === 400) return 'INVALID_ARGUMENT';
  if (err && typeof err === 'object' && (err as { name?: unknown }).name === 'CredentialUnavailableError')
    return 'NOT_WRITABLE';
  return 'IO';
}

/** Key Vault tag values: at most 256 characters (each version's tags replace the previous ones). */
const TAG_VALUE_MAX = 256;

export class AzureKeyVaultStore implements SecretStore {
  readonly kind = 'azure-kv';
  readonly displayUri: string;
  readonly vaultUrl: string;
  readonly prefix: string;
  readonly client: SecretClient;
  private readonly onDeleted: OnDeleted;
  private readonly recoverPollMs: number;
  private readonly onNotice: ((message: string) => void) | undefined;

  constructor(init: AzureStoreInit) {
    this.client = init.client;
    this.vaultUrl = init.vaultUrl;
    this.prefix = init.prefix;
    this.onDeleted = init.onDeleted;
    this.recoverPollMs = init.recoverPollMs;
    this.onNotice = init.onNotice;
    this.displayUri = `azure-kv://${init.vaultUrl.replace(/^https:\/\//, '')}${init.prefix ? `/${init.prefix}` : ''}`;
  }

  /**
   * `[<prefix>--]<env>--<client>--<key>` when every segment is lower-case words of [a-z0-9] joined
   * by single hyphens; otherwise the segments lower-cased with other characters hex-encoded, ending in
   * `---<16 hex of sha256(logical)>` (a clean name never contains `---`). At most 127 characters.
   */
  secretName(logical: string): string {
    return hashMapName(logical, this.prefix, AZURE_NAME_RULES, this.displayUri);
  }

  async checkWritable(): Promise<void> {
    try {
      const it = this.client.listPropertiesOfSecrets().byPage({ maxPageSize: 1 });
      await it.next();
    } catch (err) {
      throw this.notWritable(err, 'list secrets');
    }
    // Write permission without side effects: updating a secret that does not exist must answer
    // 404 (allowed) rather than 403.
    try {
      await this.client.updateSecretProperties(`kms-sync-write-probe-${randomUUID()}`, '0'.repeat(32), {
        enabled: true,
      });
      throw new SecretStoreError(`secret store ${this.displayUri}: the write probe secret unexpectedly exists`, {
        code: 'NOT_WRITABLE',
        store: this.displayUri,
      });
    } catch (err) {
      if (err instanceof SecretStoreError) throw err;
      if (status(err) !== 404) throw this.notWritable(err, 'update secret (write probe)');
    }
  }

  async put(name: string, value: string, meta: SecretMetadata): Promise<void> {
    await this.putMany([{ name, value, meta }]);
  }

  async putMany(entries: SecretEntry[]): Promise<void> {
    await putSequentially(entries, this.displayUri, (e) => this.putOne(e), classifyAzureError);
  }

  /** Reads version properties only (never the value): present when some version is enabled. */
  async exists(name: string): Promise<boolean> {
    this.checkName(name);
    try {
      for await (const v of this.client.listPropertiesOfSecretVersions(name)) if (v.enabled !== false) return true;
      return false;
    } catch (err) {
      if (status(err) === 404) return false;
      throw this.error(`cannot check secret '${name}': ${describeSdkError(err)}`, classifyAzureError(err));
    }
  }

  /** One paged listing of the vault's secret properties (values are never listed). */
  async existsMany(names: string[]): Promise<Set<string>> {
    const wanted = [...new Set(names)];
    for (const n of wanted) this.checkName(n);
    if (wanted.length === 0) return new Set();
    if (wanted.length === 1) return (await this.exists(wanted[0] as string)) ? new Set(wanted) : new Set();
    const lower = new Map(wanted.map((n) => [n.toLowerCase(), n]));
    const out = new Set<string>();
    for (const p of await this.listRaw()) {
      const n = lower.get(p.name.toLowerCase()); // Key Vault names are case-insensitive
      if (n !== undefined && p.enabled !== false) out.add(n);
    }
    return out;
  }

  async read(name: string): Promise<string | undefined> {
    this.checkName(name);
    try {
      const s = await this.client.getSecret(name);
      return s.value;
    } catch (err) {
      if (status(err) === 404) return undefined;
      throw this.error(`cannot read secret '${name}': ${describeSdkError(err)}`, classifyAzureError(err));
    }
  }

  async list(): Promise<SecretListing[]> {
    const base = this.prefix ? `${this.prefix}--`.toLowerCase() : '';
    const out: SecretListing[] = [];
    for (const p of await this.listRaw()) {
      if (p.enabled === false || !p.name.toLowerCase().startsWith(base)) continue;
      out.push({
        name: p.name,
        updatedAt: (p.updatedOn ?? p.createdOn)?.toISOString() ?? '',
        meta: metadataFromPairs(p.tags),
      });
    }
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  // -------------------------------------------------------------------------------------------

  private async putOne(e: SecretEntry): Promise<void> {
    this.checkName(e.name);
    const token = idempotencyToken(e.name, e.meta.keyId, e.value);
    if (await this.alreadyWritten(e.name, token)) return;
    const tags: Record<string, string> = { ...metadataPairs(e.meta), writeToken: token };
    // Tag values are at most 256 characters: a longer target is stored as its targetTag.
    if (tags.target !== undefined) tags.target = targetValue(tags.target, TAG_VALUE_MAX);
    const set = (): Promise<unknown> =>
      this.client.setSecret(e.name, e.value, { tags, contentType: AZURE_CONTENT_TYPE });
    try {
      await set();
    } catch (err) {
      if (status(err) !== 409 || !(await this.isSoftDeleted(e.name, err))) throw err;
      await this.recover(e.name);
      await set();
    }
  }

  /**
   * setSecret always makes a new version, so a retried write (the journal re-flushing a batch that
   * partly landed) first looks at the latest version: when it carries this write's token, done.
   * Any failure to look (404, no get permission) just means "write it".
   */
  private async alreadyWritten(name: string, token: string): Promise<boolean> {
    try {
      const s = await this.client.getSecret(name);
      return s.properties.enabled !== false && s.properties.tags?.writeToken === token;
    } catch {
      return false;
    }
  }

  private async isSoftDeleted(name: string, err: unknown): Promise<boolean> {
    if (/deleted but recoverable|ObjectIsDeletedButRecoverable/i.test(String((err as Error)?.message ?? '')))
      return true;
    try {
      await this.client.getDeletedSecret(name);
      return true;
    } catch {
      return false;
    }
  }

  private async recover(name: string): Promise<void> {
    const how =
      `recover it (az keyvault secret recover --vault-name <vault> --name ${name}) to keep its history, ` +
      `or purge it (az keyvault secret purge --vault-name <vault> --name ${name}) if it must go; the next run stores the key`;
    if (this.onDeleted === 'fail') {
      throw this.error(
        `name conflict: secret '${name}' is soft-deleted and its name cannot be reused until it is recovered or purged; ${how}`,
        'NOT_WRITABLE',
      );
    }
    try {
      const poller = await this.client.beginRecoverDeletedSecret(name, { intervalInMs: this.recoverPollMs });
      await poller.pollUntilDone();
    } catch (err) {
      throw this.error(
        `name conflict: secret '${name}' is soft-deleted and could not be recovered (${describeSdkError(err)}); ${how}`,
        classifyAzureError(err),
      );
    }
    this.onNotice?.(`recovered soft-deleted secret '${name}' in ${this.displayUri} to store a new key version in it`);
  }

  private async listRaw(): Promise<SecretProperties[]> {
    const out: SecretProperties[] = [];
    try {
      for await (const p of this.client.listPropertiesOfSecrets()) out.push(p);
    } catch (err) {
      throw this.error(`cannot list secrets: ${describeSdkError(err)}`, classifyAzureError(err));
    }
    return out;
  }

  private checkName(name: string): void {
    if (typeof name !== 'string' || !AZURE_NAME_RE.test(name)) {
      throw this.error(
        `'${String(name)}' is not a valid Key Vault secret name (1-127 of [0-9A-Za-z-])`,
        'INVALID_ARGUMENT',
      );
    }
  }

  private notWritable(err: unknown, call: string): SecretStoreError {
    const s = status(err);
    const hint =
      s === 403
        ? ': forbidden; the identity needs the "Key Vault Secrets Officer" role on the vault (or an access policy with secret get, list, set, recover; see docs/secret-stores-cloud.md)'
        : s === 401 || classifyAzureError(err) === 'NOT_WRITABLE'
          ? ': no usable Azure credential (env service principal, workload identity, managed identity, az login)'
          : '';
    return new SecretStoreError(
      `secret store ${this.displayUri} is not writable (${call} failed: ${describeSdkError(err)})${hint}`,
      {
        code: 'NOT_WRITABLE',
        store: this.displayUri,
      },
    );
  }

  private error(message: string, code: SecretStoreErrorCode): SecretStoreError {
    return new SecretStoreError(`secret store ${this.displayUri}: ${message}`, { code, store: this.displayUri });
  }
}
