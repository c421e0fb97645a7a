/**
 * HashiCorp Vault / OpenBao KV version 2, over its documented HTTP API.
 *
 *   vault://host[:8200]/<mount>[/<prefix>...][?tls=false&namespace=team&mount=multi/segment/mount]
 *   openbao://...  (same)
 *
 * Secret `<name>` lives at `<mount>/data/<prefix>/<name>`, with data
 *   { value, projectEnv, client, key, keyId, issuedAt, expiresAt[, target] }
 * (the metadata rides in the same atomic version as the value) and the same fields, as strings, in
 * the secret's `custom_metadata` (readable with metadata access only; used by `list`). `target` is
 * the service target, only when known; in custom_metadata a target over 512 characters is its
 * `targetTag` (store.ts).
 *
 * Writes use check-and-set: read the metadata for the current version, POST the data with
 * `options.cas` (0 for a new secret); on a CAS conflict re-read and try once more; a second conflict
 * fails the write (the key stays in the journal). A write that resolved is a stored version.
 *
 * Auth: VAULT_TOKEN, else the token file ~/.vault-token; VAULT_NAMESPACE (or `namespace=`);
 * VAULT_CACERT (PEM bundle) for TLS to a private CA.
 */
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { redactUserinfo, registerSecret } from '../../model/redact.js';
import type { Dispatcher } from 'undici';
import { SecretStoreError, describeIoError, type SecretStoreErrorCode } from '../errors.js';
import type { SecretEntry, SecretListing, SecretMetadata, SecretStore, StoreBackend } from '../store.js';
import { targetValue } from './cloud-names.js';
import {
  HttpClient,
  caDispatcher,
  checkKnownParams,
  decodeComponent,
  envOf,
  latestPerName,
  mapLimit,
  optBool,
  optString,
  putAll,
  serverMessage,
  validateEntry,
  type BackendOpenOptions,
  type HttpResponse,
  RemoteStoreBase,
} from './common.js';
import { vaultPathName } from './names.js';
import { refusePlainHttp } from './plain-http.js';

export const VAULT_SCHEMES: readonly string[] = ['vault', 'openbao'];
export const VAULT_URI_FORMS: readonly string[] = [
  'vault://host:8200/<kv-v2 mount>/<prefix>[?tls=false&namespace=ns&mount=a/b]',
  'openbao://host:8200/<kv-v2 mount>/<prefix> (same options)',
];
const KNOWN_PARAMS = ['tls', 'namespace', 'mount', 'cacert'] as const;
const CAS_MISMATCH = /check-and-set parameter did not match/i;
const CONCURRENCY = 8;

export interface VaultConfig {
  scheme: string;
  baseUrl: URL;
  mount: string;
  /** Path segments under the mount (may be empty). */
  prefix: string[];
  namespace: string | undefined;
  tokenEnv: string | undefined;
  tokenFile: string;
  caFile: string | undefined;
  displayUri: string;
}

export function parseVaultUri(uri: string, opts: BackendOpenOptions = {}): VaultConfig {
  const bad = (why: string): SecretStoreError =>
    new SecretStoreError(`invalid store URI '${redactUserinfo(uri)}': ${why}; use ${VAULT_URI_FORMS.join(' or ')}`, {
      code: 'INVALID_URI',
    });
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    throw bad('not a URL');
  }
  const scheme = u.protocol.replace(/:$/, '').toLowerCase();
  if (!VAULT_SCHEMES.includes(scheme)) throw bad(`scheme must be ${VAULT_SCHEMES.join(' or ')}`);
  if (u.username || u.password) throw bad('credentials do not belong in the URI (use VAULT_TOKEN or ~/.vault-token)');
  if (!u.hostname) throw bad('no host');
  if (u.hash) throw bad('fragments are not supported');
  checkKnownParams(u.searchParams, KNOWN_PARAMS, bad);
  const tls = optBool(u.searchParams, opts, 'tls', true, bad);
  const segs = u.pathname
    .split('/')
    .filter((s) => s !== '')
    .map((s) => decodeComponent(s, bad));
  if (segs.some((s) => s === '.' || s === '..')) throw bad("'.' and '..' path segments are not allowed");
  const mountOpt = optString(u.searchParams, opts, 'mount');
  let mount: string;
  let prefix: string[];
  if (mountOpt) {
    // The mount has several segments: the path still starts with it, the option says where it ends.
    const mountSegs = mountOpt.split('/').filter((s) => s !== '');
    if (mountSegs.length === 0) throw bad('empty mount');
    if (!mountSegs.every((s, i) => segs[i] === s))
      throw bad(`the path must start with the mount '${mountSegs.join('/')}'`);
    mount = mountSegs.join('/');
    prefix = segs.slice(mountSegs.length);
  } else {
    if (segs.length === 0) throw bad('no KV v2 mount in the path');
    mount = segs[0]!;
    prefix = segs.slice(1);
  }
  const env = envOf(opts);
  const port = u.port || '8200';
  const baseUrl = new URL(
    `${tls ? 'https' : 'http'}://${u.hostname.includes(':') && !u.hostname.startsWith('[') ? `[${u.hostname}]` : u.hostname}:${port}`,
  );
  refusePlainHttp(baseUrl, 'tls=false', `vault://${baseUrl.host}`);
  const namespace = optString(u.searchParams, opts, 'namespace') || env.VAULT_NAMESPACE || undefined;
  const home = env.HOME ?? process.env.HOME ?? '';
  const shownPath = [mount, ...prefix].map(encodeURIComponent).join('/');
  return {
    scheme,
    baseUrl,
    mount,
    prefix,
    namespace,
    tokenEnv: env.VAULT_TOKEN || undefined,
    tokenFile: path.join(home, '.vault-token'),
    caFile: optString(u.searchParams, opts, 'cacert') || env.VAULT_CACERT || undefined,
    displayUri: `${scheme}://${baseUrl.host}/${shownPath}${tls ? '' : '?tls=false'}${namespace ? `${tls ? '?' : '&'}namespace=${encodeURIComponent(namespace)}` : ''}`,
  };
}

export async function openVaultStore(uri: string, opts: BackendOpenOptions = {}): Promise<VaultKvStore> {
  return new VaultKvStore(parseVaultUri(uri, opts));
}

export const vaultBackend: StoreBackend = {
  schemes: VAULT_SCHEMES,
  forms: VAULT_URI_FORMS,
  open: (uri, opts) => openVaultStore(uri, opts),
};

interface VaultMetadata {
  currentVersion: number;
  /** The current version is soft-deleted or destroyed. */
  currentGone: boolean;
  customMetadata: Record<string, string>;
  updatedTime: string;
}

const META_KEYS = ['projectEnv', 'client', 'key', 'keyId', 'target', 'issuedAt', 'expiresAt'] as const;
/** custom_metadata values are at most 512 characters: a longer target is kept there as its targetTag. */
const CUSTOM_METADATA_VALUE_MAX = 512;

export class VaultKvStore extends RemoteStoreBase implements SecretStore {
  readonly kind = 'vault';
  readonly displayUri: string;
  readonly config: VaultConfig;
  private http: HttpClient | undefined;
  private token: string | undefined;

  constructor(config: VaultConfig) {
    super();
    this.config = config;
    this.displayUri = config.displayUri;
  }

  /** `<project_env>/<client>/<key>` → path segments under the prefix (see names.ts). */
  secretName(logical: string): string {
    return vaultPathName(logical);
  }

  async checkWritable(): Promise<void> {
    try {
      await this.mountIsKv2();
      const probe = this.apiPath('data', ['kms-sync-write-check']);
      const metaProbe = this.apiPath('metadata', ['kms-sync-write-check']);
      const res = await this.call('POST', '/v1/sys/capabilities-self', { paths: [probe, metaProbe] }, true);
      if (res.status !== 200) throw this.httpFailure('cannot check its token capabilities', res);
      const body = res.body as Record<string, unknown>;
      const caps = (p: string): string[] => {
        const c = body[p] ?? (body.data as Record<string, unknown> | undefined)?.[p];
        return Array.isArray(c) ? c.filter((x): x is string => typeof x === 'string') : [];
      };
      const missing: string[] = [];
      const need = (p: string, wanted: string[]): void => {
        const have = caps(p);
        if (have.includes('root')) return;
        for (const w of wanted) if (!have.includes(w)) missing.push(`${w} on ${p}`);
      };
      need(probe, ['create', 'update']);
      need(metaProbe, ['read', 'update']);
      if (missing.length) throw this.error(`the token lacks ${missing.join(', ')}`, 'NOT_WRITABLE');
    } catch (err) {
      throw this.wrap(err, 'is not writable', 'NOT_WRITABLE');
    }
  }

  async putMany(entries: SecretEntry[]): Promise<void> {
    if (entries.length === 0) return;
    for (const e of entries) {
      validateEntry(e, (m) => this.error(m, 'INVALID_ARGUMENT'));
      if (e.name.split('/').some((s) => !/^[A-Za-z0-9._%-]+$/.test(s) || /^\.+$/.test(s))) {
        throw this.error(
          `'${e.name}' is not a path kms-sync writes (segments of [A-Za-z0-9._%-]); pass logical names through secretName()`,
          'INVALID_ARGUMENT',
        );
      }
    }
    await putAll(
      latestPerName(entries),
      CONCURRENCY,
      (e) => this.putOne(e),
      (m, c) => this.error(m, c),
    );
  }

  async existsMany(names: string[]): Promise<Set<string>> {
    const out = new Set<string>();
    await this.guard(async () => {
      await mapLimit([...new Set(names)], CONCURRENCY, async (n) => {
        const md = await this.readMetadata(this.segmentsOf(n));
        if (md && !md.currentGone) out.add(n);
      });
    }, 'cannot be read');
    return out;
  }

  async read(name: string): Promise<string | undefined> {
    return this.guard(async () => {
      const res = await this.call('GET', `/v1/${this.apiPath('data', this.segmentsOf(name))}`, undefined, true);
      if (res.status === 404) return undefined;
      if (res.status !== 200) throw this.httpFailure(`could not read ${name}`, res);
      const v = (res.body as { data?: { data?: Record<string, unknown> } }).data?.data?.value;
      return typeof v === 'string' ? v : undefined;
    }, 'cannot be read');
  }

  /** Every secret under the prefix (recursive LIST), with its custom_metadata. */
  async list(): Promise<SecretListing[]> {
    return this.guard(async () => {
      const names: string[] = [];
      const walk = async (rel: string[]): Promise<void> => {
        // The LIST operation, sent as `GET ...?list=true` (Vault's documented equivalent; proxies and
        // HTTP stacks that know only standard methods pass it).
        const res = await this.call('GET', `/v1/${this.apiPath('metadata', rel)}/?list=true`, undefined, true);
        if (res.status === 404) return;
        if (res.status !== 200) throw this.httpFailure('could not list secrets', res);
        const keys = (res.body as { data?: { keys?: unknown } }).data?.keys;
        if (!Array.isArray(keys)) return;
        for (const k of keys) {
          if (typeof k !== 'string' || k === '') continue;
          if (k.endsWith('/')) await walk([...rel, k.slice(0, -1)]);
          else names.push([...rel, k].join('/'));
        }
      };
      await walk([]);
      const listed = await mapLimit(names, CONCURRENCY, async (n): Promise<SecretListing | undefined> => {
        const md = await this.readMetadata(n.split('/'));
        if (!md || md.currentGone) return undefined;
        const meta: Partial<SecretMetadata> = {};
        for (const k of META_KEYS) {
          const v = md.customMetadata[k];
          if (typeof v !== 'string') continue;
          if (k === 'expiresAt') meta.expiresAt = v === '' ? null : v;
          else meta[k] = v;
        }
        return { name: n, updatedAt: md.updatedTime, meta };
      });
      return listed
        .filter((x): x is SecretListing => x !== undefined)
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    }, 'cannot be listed');
  }

  // -------------------------------------------------------------------------------------------

  private async putOne(e: SecretEntry): Promise<void> {
    const segs = this.segmentsOf(e.name);
    const data = {
      value: e.value,
      projectEnv: e.meta.projectEnv,
      client: e.meta.client,
      key: e.meta.key,
      keyId: e.meta.keyId,
      issuedAt: e.meta.issuedAt,
      expiresAt: e.meta.expiresAt ?? null,
      ...(typeof e.meta.target === 'string' ? { target: e.meta.target } : {}),
    };
    const url = `/v1/${this.apiPath('data', segs)}`;
    let version: number | undefined;
    try {
      for (let attempt = 0; attempt < 2 && version === undefined; attempt++) {
        const md = await this.readMetadata(segs);
        const cas = md?.currentVersion ?? 0;
        const res = await this.call('POST', url, { options: { cas }, data }, false);
        if (res.status === 200 || res.status === 204) {
          const v = (res.body as { data?: { version?: unknown } } | undefined)?.data?.version;
          version = typeof v === 'number' ? v : cas + 1;
          break;
        }
        if (res.status === 400 && CAS_MISMATCH.test(serverMessage(res, [e.value]))) {
          if (attempt === 0) continue;
          throw this.error(
            `secret ${e.name}: another writer changed it twice while this write was retried (check-and-set conflict); not stored`,
            'LOCKED',
          );
        }
        throw this.httpFailure(`could not store ${e.name}`, res, [e.value]);
      }
    } catch (err) {
      throw this.wrap(err, `could not store ${e.name}`, 'IO');
    }
    // The value is stored (version `version`). Mirror the metadata into custom_metadata.
    try {
      await this.writeCustomMetadata(segs, e.meta);
      const after = await this.readMetadata(segs);
      if (after && after.currentVersion !== version) await this.repairCustomMetadata(segs);
    } catch (err) {
      throw this.wrap(err, `stored ${e.name} (version ${version}) but could not write its custom_metadata`, 'IO');
    }
  }

  private async writeCustomMetadata(segs: string[], meta: SecretMetadata): Promise<void> {
    const custom_metadata: Record<string, string> = {
      projectEnv: meta.projectEnv,
      client: meta.client,
      key: meta.key,
      keyId: meta.keyId,
      issuedAt: meta.issuedAt,
      expiresAt: meta.expiresAt ?? '',
      ...(typeof meta.target === 'string' ? { target: targetValue(meta.target, CUSTOM_METADATA_VALUE_MAX) } : {}),
      managedBy: 'kms-sync',
    };
    // The POST replaces the whole map: a key without a target leaves no earlier key's target.
    const res = await this.call('POST', `/v1/${this.apiPath('metadata', segs)}`, { custom_metadata }, true);
    if (res.status !== 200 && res.status !== 204) throw this.httpFailure('could not write custom_metadata', res);
  }

  /**
   * A concurrent writer stored a newer version after ours; its custom_metadata write may have run
   * before ours. Re-derive custom_metadata from the current version's data so the two agree.
   */
  private async repairCustomMetadata(segs: string[]): Promise<void> {
    const res = await this.call('GET', `/v1/${this.apiPath('data', segs)}`, undefined, true);
    if (res.status !== 200) return;
    const d = (res.body as { data?: { data?: Record<string, unknown> } }).data?.data ?? {};
    if (
      typeof d.keyId !== 'string' ||
      typeof d.projectEnv !== 'string' ||
      typeof d.client !== 'string' ||
      typeof d.key !== 'string' ||
      typeof d.issuedAt !== 'string'
    )
      return;
    await this.writeCustomMetadata(segs, {
      projectEnv: d.projectEnv,
      client: d.client,
      key: d.key,
      keyId: d.keyId,
      issuedAt: d.issuedAt,
      expiresAt: typeof d.expiresAt === 'string' ? d.expiresAt : null,
      ...(typeof d.target === 'string' ? { target: d.target } : {}),
    });
  }

  private async readMetadata(segs: string[]): Promise<VaultMetadata | undefined> {
    const res = await this.call('GET', `/v1/${this.apiPath('metadata', segs)}`, undefined, true);
    if (res.status === 404) return undefined;
    if (res.status !== 200) throw this.httpFailure(`could not read the metadata of ${segs.join('/')}`, res);
    const d = (res.body as { data?: Record<string, unknown> }).data ?? {};
    const currentVersion = typeof d.current_version === 'number' ? d.current_version : 0;
    const versions = (d.versions ?? {}) as Record<string, { deletion_time?: unknown; destroyed?: unknown }>;
    const cur = versions[String(currentVersion)];
    const currentGone =
      currentVersion === 0 ||
      !cur ||
      cur.destroyed === true ||
      (typeof cur.deletion_time === 'string' && cur.deletion_time !== '');
    const cm = (d.custom_metadata ?? {}) as Record<string, unknown>;
    const customMetadata: Record<string, string> = {};
    for (const [k, v] of Object.entries(cm ?? {})) if (typeof v === 'string') customMetadata[k] = v;
    return {
      currentVersion,
      currentGone,
      customMetadata,
      updatedTime: typeof d.updated_time === 'string' ? d.updated_time : '',
    };
  }

  /** KV v1 has no CAS and no metadata: refuse it clearly (best effort: needs no extra policy). */
  private async mountIsKv2(): Promise<void> {
    const res = await this.call(
      'GET',
      `/v1/sys/internal/ui/mounts/${this.config.mount.split('/').map(encodeURIComponent).join('/')}`,
      undefined,
      true,
    );
    if (res.status !== 200) return;
    const d = (res.body as { data?: { type?: unknown; options?: { version?: unknown } | null } }).data;
    if (!d) return;
    if (d.type === 'kv' && String(d.options?.version ?? '1') !== '2') {
      throw this.error(
        `mount '${this.config.mount}' is KV version 1; kms-sync needs KV version 2 (check-and-set and metadata)`,
        'UNSUPPORTED',
      );
    }
    if (typeof d.type === 'string' && d.type !== 'kv' && d.type !== 'generic') {
      throw this.error(`mount '${this.config.mount}' is a '${d.type}' secrets engine, not KV version 2`, 'UNSUPPORTED');
    }
  }

  /** `<mount>/<kind>/<prefix...>/<segs...>`, every segment URI-encoded (names keep their `%XX` literally). */
  private apiPath(kind: 'data' | 'metadata', segs: string[]): string {
    return [...this.config.mount.split('/'), kind, ...this.config.prefix, ...segs].map(encodeURIComponent).join('/');
  }

  private segmentsOf(name: string): string[] {
    const segs = name.split('/');
    if (name === '' || segs.some((s) => s === '' || s === '.' || s === '..')) {
      throw this.error(`invalid secret name '${name}' (empty, '.' or '..' segment)`, 'INVALID_ARGUMENT');
    }
    return segs;
  }

  private async client(): Promise<{ http: HttpClient; token: string }> {
    if (!this.token) {
      let token = this.config.tokenEnv;
      if (!token) {
        try {
          token = (await fs.readFile(this.config.tokenFile, 'utf8')).trim();
        } catch (err) {
          throw this.error(
            `no Vault token: set VAULT_TOKEN or write ${this.config.tokenFile} (${describeIoError(err)})`,
            'NOT_WRITABLE',
          );
        }
        if (!token)
          throw this.error(
            `no Vault token: ${this.config.tokenFile} is empty and VAULT_TOKEN is not set`,
            'NOT_WRITABLE',
          );
        registerSecret(token, 'Vault token'); // read from a file: redacted by value like VAULT_TOKEN (model/redact.ts)
      }
      this.token = token;
    }
    if (!this.http) {
      const dispatcher: Dispatcher | undefined = await caDispatcher(
        this.config.caFile,
        `secret store ${this.displayUri}`,
      );
      this.http = new HttpClient({
        service: this.config.scheme === 'openbao' ? 'OpenBao' : 'Vault',
        ...(dispatcher ? { dispatcher } : {}),
      });
    }
    return { http: this.http, token: this.token };
  }

  private async call(method: string, route: string, json: unknown, idempotent: boolean): Promise<HttpResponse> {
    const { http, token } = await this.client();
    const headers: Record<string, string> = { 'x-vault-token': token, 'x-vault-request': 'true' };
    if (this.config.namespace) headers['x-vault-namespace'] = this.config.namespace;
    return http.send({
      method,
      url: new URL(route, this.config.baseUrl),
      headers,
      ...(json !== undefined ? { json } : {}),
      idempotent,
    });
  }

  private httpFailure(what: string, res: HttpResponse, values: string[] = []): SecretStoreError {
    const code: SecretStoreErrorCode = res.status === 401 || res.status === 403 ? 'NOT_WRITABLE' : 'IO';
    const hint = res.status === 403 ? ' (permission denied: check the token policy, see docs/secret-stores.md)' : '';
    return this.error(`${what}: HTTP ${res.status}: ${serverMessage(res, values)}${hint}`, code);
  }
}
