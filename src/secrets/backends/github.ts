/**
 * GitHub Actions secrets (repository or environment), over the REST API.
 *
 *   github://<owner>/<repo>[?prefix=KMS_&probe=false]
 *   github://<owner>/<repo>/environments/<environment>[?...]
 *
 * Routes (GitHub's published description, @octokit/openapi):
 *   GET    /repos/{owner}/{repo}/actions/secrets/public-key          → {key_id, key}
 *   PUT    /repos/{owner}/{repo}/actions/secrets/{secret_name}       {encrypted_value, key_id} → 201 | 204
 *   GET    /repos/{owner}/{repo}/actions/secrets/{secret_name}       → {name, created_at, updated_at} | 404
 *   GET    /repos/{owner}/{repo}/actions/secrets?per_page&page       → {total_count, secrets[]}
 *   DELETE /repos/{owner}/{repo}/actions/secrets/{secret_name}       (write-check probe only)
 *   and the same under /repos/{owner}/{repo}/environments/{environment_name}/secrets.
 *
 * Values are encrypted with a libsodium sealed box for the repository's (environment's) public key.
 * GitHub never returns a secret value, and secrets carry no metadata: there is no `read`, and
 * `list` returns names and dates only. So the key id and the service target (`meta.target`) are not
 * recorded either: every GitHub secret lists without a target, which the pipeline takes as
 * "unknown / written before targets". Two targets writing one repository's secrets cannot be told
 * apart here; give each target its own environment (`/environments/<env>`) or `prefix`.
 * Auth: GITHUB_TOKEN (or GH_TOKEN); GITHUB_API_URL for GHES.
 */
import sodium from 'libsodium-wrappers';
import { randomBytes } from 'node:crypto';
import { SecretStoreError, describeIoError, type SecretStoreErrorCode } from '../errors.js';
import type { SecretEntry, SecretListing, SecretStore, StoreBackend } from '../store.js';
import {
  HttpClient,
  checkKnownParams,
  decodeComponent,
  envOf,
  latestPerName,
  optBool,
  optString,
  putAll,
  serverMessage,
  validateEntry,
  type BackendOpenOptions,
  type HttpResponse,
  RemoteStoreBase,
} from './common.js';
import { envStyleName } from './names.js';
import { refusePlainHttp } from './plain-http.js';
import { redactUserinfo } from '../../model/redact.js';

export const GITHUB_SCHEMES: readonly string[] = ['github'];
export const GITHUB_URI_FORMS: readonly string[] = [
  'github://<owner>/<repo>[?prefix=KMS_] (repository secrets)',
  'github://<owner>/<repo>/environments/<environment> (environment secrets)',
];
const KNOWN_PARAMS = ['prefix', 'probe'] as const;
export const GITHUB_RESERVED_PREFIXES: readonly string[] = ['GITHUB_'];
export const GITHUB_NAME_MAX = 255;
const CONCURRENCY = 4;
const API_VERSION = '2022-11-28';
/** Written and deleted again by checkWritable (unless probe=false). */
export const WRITE_CHECK_NAME = 'KMS_SYNC_WRITE_CHECK';

export interface GitHubConfig {
  apiUrl: URL;
  owner: string;
  repo: string;
  environment: string | undefined;
  prefix: string;
  probe: boolean;
  token: string | undefined;
  displayUri: string;
}

export function parseGitHubUri(uri: string, opts: BackendOpenOptions = {}): GitHubConfig {
  const bad = (why: string): SecretStoreError =>
    new SecretStoreError(`invalid store URI '${redactUserinfo(uri)}': ${why}; use ${GITHUB_URI_FORMS.join(' or ')}`, {
      code: 'INVALID_URI',
    });
  const m = /^github:\/\/([^?#]*)(\?[^#]*)?$/i.exec(uri);
  if (!m) throw bad('expected github://owner/repo');
  const rawPath = m[1] ?? '';
  if (rawPath.includes('@')) throw bad('credentials do not belong in the URI (use GITHUB_TOKEN)');
  const query = new URLSearchParams((m[2] ?? '').slice(1));
  checkKnownParams(query, KNOWN_PARAMS, bad);
  const parts = rawPath
    .split('/')
    .filter((p) => p !== '')
    .map((p) => decodeComponent(p, bad));
  let environment: string | undefined;
  if (parts.length === 4 && parts[2] === 'environments') environment = parts[3];
  else if (parts.length !== 2) throw bad('expected github://owner/repo or github://owner/repo/environments/<name>');
  const owner = parts[0]!;
  const repo = parts[1]!;
  if (!/^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$/.test(owner)) throw bad(`'${owner}' is not a GitHub owner name`);
  if (!/^[A-Za-z0-9._-]{1,100}$/.test(repo)) throw bad(`'${repo}' is not a GitHub repository name`);
  const prefix = (optString(query, opts, 'prefix') ?? '').toUpperCase();
  if (prefix !== '' && (!/^[A-Z_][A-Z0-9_]*$/.test(prefix) || prefix.startsWith('GITHUB_'))) {
    throw bad(`prefix '${prefix}' must be letters, digits and underscores, not start with a digit or GITHUB_`);
  }
  const env = envOf(opts);
  let apiUrl: URL;
  try {
    apiUrl = new URL((env.GITHUB_API_URL || 'https://api.github.com').replace(/\/+$/, '') + '/');
  } catch {
    throw bad(`GITHUB_API_URL is not a URL`);
  }
  refusePlainHttp(apiUrl, 'GITHUB_API_URL', 'github-secrets');
  const qs = new URLSearchParams();
  if (prefix) qs.set('prefix', prefix);
  const shownQs = qs.toString();
  return {
    apiUrl,
    owner,
    repo,
    environment,
    prefix,
    probe: optBool(query, opts, 'probe', true, bad),
    token: env.GITHUB_TOKEN || env.GH_TOKEN || undefined,
    displayUri: `github://${owner}/${repo}${environment !== undefined ? `/environments/${encodeURIComponent(environment)}` : ''}${shownQs ? `?${shownQs}` : ''}`,
  };
}

export async function openGitHubStore(uri: string, opts: BackendOpenOptions = {}): Promise<GitHubSecretsStore> {
  return new GitHubSecretsStore(parseGitHubUri(uri, opts));
}

export const githubBackend: StoreBackend = {
  schemes: GITHUB_SCHEMES,
  forms: GITHUB_URI_FORMS,
  open: (uri, opts) => openGitHubStore(uri, opts),
};

interface PublicKey {
  keyId: string;
  key: Uint8Array;
}

/** Seals `value` for a base64 X25519 public key (libsodium crypto_box_seal), base64 out. */
export async function sealForGitHub(value: string, publicKeyB64: string): Promise<string> {
  await sodium.ready;
  const pk = sodium.from_base64(publicKeyB64, sodium.base64_variants.ORIGINAL);
  if (pk.length !== sodium.crypto_box_PUBLICKEYBYTES)
    throw new Error(`public key is ${pk.length} bytes, expected ${sodium.crypto_box_PUBLICKEYBYTES}`);
  return sodium.to_base64(sodium.crypto_box_seal(sodium.from_string(value), pk), sodium.base64_variants.ORIGINAL);
}

export class GitHubSecretsStore extends RemoteStoreBase implements SecretStore {
  readonly kind = 'github';
  readonly displayUri: string;
  readonly config: GitHubConfig;
  private readonly http = new HttpClient({ service: 'GitHub API' });
  private publicKey: Promise<PublicKey> | undefined;

  constructor(config: GitHubConfig) {
    super();
    this.config = config;
    this.displayUri = config.displayUri;
  }

  /** `acme-production/globex/primary` → `ACME_PRODUCTION__GLOBEX__PRIMARY` (see names.ts). */
  secretName(logical: string): string {
    return envStyleName(logical, {
      reservedPrefixes: GITHUB_RESERVED_PREFIXES,
      prefix: this.config.prefix,
      maxLength: GITHUB_NAME_MAX,
    });
  }

  async checkWritable(): Promise<void> {
    try {
      await this.getPublicKey(true);
      if (!this.config.probe) return;
      const name = `${this.config.prefix}${WRITE_CHECK_NAME}`;
      await this.putEncrypted(name, randomBytes(16).toString('base64url'));
      const res = await this.call('DELETE', this.secretRoute(name), undefined, true);
      if (res.status !== 204 && res.status !== 404)
        throw this.httpFailure(`could not delete the write-check secret ${name}`, res);
    } catch (err) {
      throw this.wrap(err, 'is not writable', 'NOT_WRITABLE');
    }
  }

  async putMany(entries: SecretEntry[]): Promise<void> {
    if (entries.length === 0) return;
    for (const e of entries) {
      validateEntry(e, (m) => this.error(m, 'INVALID_ARGUMENT'));
      this.checkName(e.name);
    }
    await putAll(
      latestPerName(entries),
      CONCURRENCY,
      async (e) => {
        try {
          await this.putEncrypted(e.name, e.value);
        } catch (err) {
          throw this.wrap(err, `could not store ${e.name}`, 'IO');
        }
      },
      (m, c) => this.error(m, c),
    );
  }

  override async exists(name: string): Promise<boolean> {
    return this.guard(async () => {
      const res = await this.call('GET', this.secretRoute(this.checkName(name)), undefined, true);
      if (res.status === 404) return false;
      if (res.status !== 200) throw this.httpFailure(`could not look up ${name}`, res);
      return true;
    }, 'cannot be read');
  }

  /** One listing (paged) instead of one request per name. */
  async existsMany(names: string[]): Promise<Set<string>> {
    const listed = new Set((await this.list()).map((l) => l.name.toUpperCase()));
    return new Set(names.filter((n) => listed.has(n.toUpperCase())));
  }

  /** Names and dates: GitHub keeps no metadata (no key id, no target) and never returns values. */
  async list(): Promise<SecretListing[]> {
    return this.guard(async () => {
      const out: SecretListing[] = [];
      for (let page = 1; page <= 1000; page++) {
        const res = await this.call('GET', `${this.baseRoute()}?per_page=100&page=${page}`, undefined, true);
        if (res.status !== 200) throw this.httpFailure('could not list secrets', res);
        const body = res.body as { total_count?: unknown; secrets?: unknown };
        const secrets = Array.isArray(body.secrets)
          ? (body.secrets as Array<{ name?: unknown; updated_at?: unknown }>)
          : [];
        for (const s of secrets) {
          if (typeof s.name !== 'string') continue;
          if (s.name === `${this.config.prefix}${WRITE_CHECK_NAME}`) continue;
          out.push({ name: s.name, updatedAt: typeof s.updated_at === 'string' ? s.updated_at : '' });
        }
        const total = typeof body.total_count === 'number' ? body.total_count : undefined;
        if (secrets.length < 100 || (total !== undefined && page * 100 >= total)) break;
      }
      return out;
    }, 'cannot be listed');
  }

  // -------------------------------------------------------------------------------------------

  private async putEncrypted(name: string, value: string): Promise<void> {
    for (let attempt = 0; attempt < 2; attempt++) {
      const pk = await this.getPublicKey(attempt > 0);
      let encrypted_value: string;
      try {
        encrypted_value = await sealForGitHub(value, Buffer.from(pk.key).toString('base64'));
      } catch (err) {
        throw this.error(`could not encrypt for ${name}: ${describeIoError(err)}`, 'IO');
      }
      const res = await this.call('PUT', this.secretRoute(name), { encrypted_value, key_id: pk.keyId }, true);
      if (res.status === 201 || res.status === 204) return;
      // A rotated repository key answers 422 (or 400): fetch the key again and re-encrypt once.
      if ((res.status === 422 || res.status === 400) && attempt === 0) continue;
      throw this.httpFailure(`could not store ${name}`, res);
    }
  }

  private getPublicKey(refresh: boolean): Promise<PublicKey> {
    if (refresh || !this.publicKey) {
      const p = (async (): Promise<PublicKey> => {
        const res = await this.call('GET', `${this.baseRoute()}/public-key`, undefined, true);
        if (res.status !== 200) throw this.httpFailure('could not get the public key', res);
        const b = res.body as { key_id?: unknown; key?: unknown };
        if (typeof b?.key_id !== 'string' || typeof b.key !== 'string')
          throw this.error('the public-key answer has no key_id/key', 'IO');
        const key = Buffer.from(b.key, 'base64');
        if (key.length !== 32) throw this.error(`the public key is ${key.length} bytes, expected 32`, 'IO');
        return { keyId: b.key_id, key: new Uint8Array(key) };
      })();
      p.catch(() => {
        if (this.publicKey === p) this.publicKey = undefined;
      });
      this.publicKey = p;
    }
    return this.publicKey;
  }

  private checkName(name: string): string {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || /^GITHUB_/i.test(name) || name.length > GITHUB_NAME_MAX) {
      throw this.error(
        `'${name}' is not a legal GitHub secret name (letters, digits and _, not starting with a digit or GITHUB_); pass logical names through secretName()`,
        'INVALID_ARGUMENT',
      );
    }
    return name;
  }

  private baseRoute(): string {
    const c = this.config;
    const repo = `repos/${encodeURIComponent(c.owner)}/${encodeURIComponent(c.repo)}`;
    return c.environment === undefined
      ? `${repo}/actions/secrets`
      : `${repo}/environments/${encodeURIComponent(c.environment)}/secrets`;
  }

  private secretRoute(name: string): string {
    return `${this.baseRoute()}/${encodeURIComponent(name)}`;
  }

  private async call(method: string, route: string, json: unknown, idempotent: boolean): Promise<HttpResponse> {
    const token = this.config.token;
    if (!token)
      throw this.error(
        'no GitHub token: set GITHUB_TOKEN (see docs/secret-stores.md for the permissions)',
        'NOT_WRITABLE',
      );
    return this.http.send({
      method,
      url: new URL(route, this.config.apiUrl),
      headers: {
        accept: 'application/vnd.github+json',
        authorization: `Bearer ${token}`,
        'x-github-api-version': API_VERSION,
        'user-agent': 'kms-sync',
      },
      ...(json !== undefined ? { json } : {}),
      idempotent,
    });
  }

  private httpFailure(what: string, res: HttpResponse): SecretStoreError {
    const code: SecretStoreErrorCode =
      res.status === 401 || res.status === 403 || res.status === 404 ? 'NOT_WRITABLE' : 'IO';
    let hint = '';
    if (res.status === 401) hint = ' (the token is invalid or expired)';
    else if (res.status === 403 || res.status === 404) {
      hint = ` (the token cannot manage Actions secrets of ${this.config.owner}/${this.config.repo}${this.config.environment !== undefined ? ` environment '${this.config.environment}'` : ''}: a fine-grained token needs "Secrets: read and write"${this.config.environment !== undefined ? ' and "Environments: read"' : ''}, a classic token the repo scope; or the repository/environment does not exist)`;
    }
    return this.error(`${what}: HTTP ${res.status}: ${serverMessage(res)}${hint}`, code);
  }
}
