/**
 * GCP Secret Manager backend: `gcp-sm://projects/<project>/<prefix>[?endpoint=<url>]`.
 *
 * Uses the official `@google-cloud/secret-manager` client (loaded on first use) over its HTTP/1.1
 * REST transport (`fallback: true`: no gRPC channel), with Application Default Credentials
 * (GOOGLE_APPLICATION_CREDENTIALS, workload identity federation in CI, gcloud ADC, metadata server).
 *
 * A new secret is created (automatic replication, labels) and gets its first version; an existing
 * one gets a new version per rotation. After the version landed, the secret's annotations are set to
 * the key's metadata and a write token derived from (name, key id, value hash): a retried write whose
 * token is already recorded is skipped, so a retry after success adds no second version.
 * The service target is the annotation `kms-sync.target` (exact, what `list` returns) and the label
 * `target` (its `targetTag`, for filters); a key without a target leaves neither.
 */
import { randomUUID } from 'node:crypto';
import type { SecretManagerServiceClient } from '@google-cloud/secret-manager';
import { SecretStoreError, type SecretStoreErrorCode } from '../errors.js';
import {
  targetTag,
  type OpenStoreOptions,
  type SecretEntry,
  type SecretListing,
  type SecretMetadata,
  type SecretStore,
  type StoreBackend,
} from '../store.js';
import {
  checkQueryKeys,
  crc32c,
  describeSdkError,
  escapeMapName,
  idempotencyToken,
  mapLimit,
  META_KEYS,
  metadataPairs,
  parseCloudUri,
  parseEndpoint,
  putSequentially,
} from './cloud-names.js';

export const GCP_SM_SCHEMES: readonly string[] = ['gcp-sm'];
export const GCP_SM_URI_FORMS: readonly string[] = ['gcp-sm://projects/<project>[/<prefix>][?endpoint=<url>]'];

/** Secret ids: 1-255 of [A-Za-z0-9_-]. */
export const GCP_NAME_RE = /^[A-Za-z0-9_-]{1,255}$/;
const GCP_NAME_RULES = { literal: /^[A-Za-z0-9-]$/, escape: '_', separator: '__', maxLength: 255 } as const;
const PROJECT_RE = /^[a-z][a-z0-9-]{4,28}[a-z0-9]$|^\d{1,20}$|^[a-z][a-z0-9.-]{0,40}:[a-z][a-z0-9-]{4,28}[a-z0-9]$/;
const PREFIX_RE = /^[A-Za-z0-9-]{1,64}$/;

/** Annotation keys (begin/end alphanumeric; dots allowed). */
const ANN = {
  projectEnv: 'kms-sync.projectEnv',
  client: 'kms-sync.client',
  key: 'kms-sync.key',
  keyId: 'kms-sync.keyId',
  issuedAt: 'kms-sync.issuedAt',
  expiresAt: 'kms-sync.expiresAt',
  target: 'kms-sync.target',
  writeToken: 'kms-sync.writeToken',
  updatedAt: 'kms-sync.updatedAt',
} as const;

/** gRPC status codes as the client reports them. */
const NOT_FOUND = 5;
const ALREADY_EXISTS = 6;
const PERMISSION_DENIED = 7;
const FAILED_PRECONDITION = 9;
const UNAUTHENTICATED = 16;

export interface GcpStoreOverrides {
  /** Extra client options (tests: `authClient`, retries); merged over what the URI says. */
  clientOptions?: Record<string, unknown>;
}

export const gcpSecretManagerBackend: StoreBackend = {
  schemes: GCP_SM_SCHEMES,
  forms: GCP_SM_URI_FORMS,
  open: (uri, opts) => openGcpSecretManagerStore(uri, opts),
};

export async function openGcpSecretManagerStore(
  uri: string,
  _opts: OpenStoreOptions = {},
  overrides: GcpStoreOverrides = {},
): Promise<GcpSecretManagerStore> {
  const u = parseCloudUri(uri, 'gcp-sm', GCP_SM_URI_FORMS);
  checkQueryKeys(u, uri, ['endpoint'], GCP_SM_URI_FORMS);
  const [project, ...rest] = u.segments;
  if (u.authority !== 'projects' || project === undefined || !PROJECT_RE.test(project)) {
    throw new SecretStoreError(
      `invalid store URI '${uri}': expected a project id after 'projects/'; use ${GCP_SM_URI_FORMS[0]}`,
      { code: 'INVALID_URI' },
    );
  }
  if (rest.length > 1 || (rest[0] !== undefined && !PREFIX_RE.test(rest[0]))) {
    throw new SecretStoreError(
      `invalid store URI '${uri}': the prefix must be one segment of [A-Za-z0-9-] (at most 64); use ${GCP_SM_URI_FORMS[0]}`,
      {
        code: 'INVALID_URI',
      },
    );
  }
  const prefix = rest[0] ?? '';
  const endpoint = parseEndpoint(u, uri, GCP_SM_URI_FORMS);
  const sdk = await import('@google-cloud/secret-manager');
  const clientOptions: Record<string, unknown> = { fallback: true };
  if (endpoint) {
    clientOptions.apiEndpoint = endpoint.hostname.replace(/^\[|\]$/g, '');
    clientOptions.port = endpoint.port ? Number(endpoint.port) : endpoint.protocol === 'http:' ? 80 : 443;
    clientOptions.protocol = endpoint.protocol.slice(0, -1);
  }
  const client = new sdk.SecretManagerServiceClient({
    ...clientOptions,
    ...overrides.clientOptions,
  } as ConstructorParameters<typeof sdk.SecretManagerServiceClient>[0]);
  const display = `gcp-sm://projects/${project}/${prefix}${endpoint ? ` (endpoint ${endpoint.origin})` : ''}`;
  return new GcpSecretManagerStore(client, project, prefix, display);
}

interface GcpSecret {
  name?: string | null;
  labels?: Record<string, string> | null;
  annotations?: Record<string, string> | null;
  createTime?: { seconds?: string | number | null; nanos?: number | null } | null;
}

function grpcCode(err: unknown): number | undefined {
  const c = err && typeof err === 'object' ? (err as { code?: unknown }).code : undefined;
  return typeof c === 'number' ? c : undefined;
}

export function classifyGcpError(err: unknown): SecretStoreErrorCode {
  const c = grpcCode(err);
  if (c === PERMISSION_DENIED || c === UNAUTHENTICATED) return 'NOT_WRITABLE';
  if (c === 3 /* INVALID_ARGUMENT */) return 'INVALID_ARGUMENT';
  return 'IO';
}

const TARGET_LABEL = 'target';

function labelValue(v: string): string {
  return v
    .toLowerCase()
    .replace(/[^a-z0-9_-]/g, '_')
    .slice(0, 63);
}

function timestampIso(t: GcpSecret['createTime']): string {
  if (!t || t.seconds === undefined || t.seconds === null) return '';
  return new Date(Number(t.seconds) * 1000 + Math.floor((t.nanos ?? 0) / 1e6)).toISOString();
}

export class GcpSecretManagerStore implements SecretStore {
  readonly kind = 'gcp-sm';
  readonly displayUri: string;
  readonly project: string;
  readonly prefix: string;
  readonly client: SecretManagerServiceClient;

  constructor(client: SecretManagerServiceClient, project: string, prefix: string, display: string) {
    this.client = client;
    this.project = project;
    this.prefix = prefix;
    this.displayUri = display;
  }

  /** `[<prefix>__]<env>__<client>__<key>`; characters outside [A-Za-z0-9-] become `_XX` (UTF-8 hex). */
  secretName(logical: string): string {
    return escapeMapName(logical, this.prefix, GCP_NAME_RULES, this.displayUri);
  }

  async checkWritable(): Promise<void> {
    try {
      await this.client.listSecrets({ parent: this.parent(), pageSize: 1 }, { autoPaginate: false });
    } catch (err) {
      throw this.notWritable(err, 'listSecrets');
    }
    // Write permission without side effects: adding a version to a secret that does not exist must
    // answer NOT_FOUND (allowed) rather than PERMISSION_DENIED.
    try {
      await this.client.addSecretVersion({
        parent: this.path(`kms-sync-write-probe-${randomUUID()}`),
        payload: { data: Buffer.from('probe') },
      });
      throw new SecretStoreError(`secret store ${this.displayUri}: the write probe secret unexpectedly exists`, {
        code: 'NOT_WRITABLE',
        store: this.displayUri,
      });
    } catch (err) {
      if (err instanceof SecretStoreError) throw err;
      if (grpcCode(err) !== NOT_FOUND) throw this.notWritable(err, 'addSecretVersion');
    }
  }

  async put(name: string, value: string, meta: SecretMetadata): Promise<void> {
    await this.putMany([{ name, value, meta }]);
  }

  async putMany(entries: SecretEntry[]): Promise<void> {
    await putSequentially(entries, this.displayUri, (e) => this.putOne(e), classifyGcpError);
  }

  async exists(name: string): Promise<boolean> {
    return (await this.existsMany([name])).has(name);
  }

  /**
   * Lists the secrets under the prefix once (paged); a listed secret counts when kms-sync recorded
   * a landed version in its annotations, otherwise when its latest version is enabled.
   */
  async existsMany(names: string[]): Promise<Set<string>> {
    const wanted = [...new Set(names)];
    for (const n of wanted) this.checkName(n);
    const out = new Set<string>();
    if (wanted.length === 0) return out;
    let candidates: GcpSecret[];
    if (wanted.length === 1) {
      const s = await this.getSecret(wanted[0] as string);
      candidates = s ? [s] : [];
    } else {
      candidates = await this.listRaw();
    }
    const byName = new Map(candidates.map((s) => [this.idOf(s), s]));
    const unsure: string[] = [];
    for (const n of wanted) {
      const s = byName.get(n);
      if (!s) continue;
      if (s.annotations?.[ANN.writeToken]) out.add(n);
      else unsure.push(n);
    }
    const enabled = await mapLimit(unsure, 4, (n) => this.latestEnabled(n));
    unsure.forEach((n, i) => {
      if (enabled[i]) out.add(n);
    });
    return out;
  }

  async read(name: string): Promise<string | undefined> {
    this.checkName(name);
    try {
      const [r] = await this.client.accessSecretVersion({ name: `${this.path(name)}/versions/latest` });
      const data = r.payload?.data;
      if (data === undefined || data === null) return undefined;
      return typeof data === 'string'
        ? Buffer.from(data, 'base64').toString('utf8')
        : Buffer.from(data).toString('utf8');
    } catch (err) {
      const c = grpcCode(err);
      if (c === NOT_FOUND || c === FAILED_PRECONDITION) return undefined;
      throw this.error(`cannot read secret '${name}': ${describeSdkError(err)}`, classifyGcpError(err));
    }
  }

  async list(): Promise<SecretListing[]> {
    const out: SecretListing[] = [];
    for (const s of await this.listRaw()) {
      const a = s.annotations ?? {};
      const meta: Partial<SecretMetadata> = {};
      for (const k of META_KEYS) {
        const v = a[ANN[k]];
        if (typeof v === 'string') meta[k] = v;
      }
      if (meta.keyId !== undefined && meta.expiresAt === undefined) meta.expiresAt = null;
      out.push({ name: this.idOf(s), updatedAt: a[ANN.updatedAt] ?? timestampIso(s.createTime), meta });
    }
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  // -------------------------------------------------------------------------------------------

  private async putOne(e: SecretEntry): Promise<void> {
    this.checkName(e.name);
    const token = idempotencyToken(e.name, e.meta.keyId, e.value);
    let secret = await this.getSecret(e.name);
    if (secret?.annotations?.[ANN.writeToken] === token) return; // this exact write already landed
    const labels = this.labels(e.meta);
    if (!secret) {
      try {
        const [created] = await this.client.createSecret({
          parent: this.parent(),
          secretId: e.name,
          secret: { replication: { automatic: {} }, labels },
        });
        secret = created as GcpSecret;
      } catch (err) {
        if (grpcCode(err) !== ALREADY_EXISTS) throw err;
        secret = (await this.getSecret(e.name)) ?? {};
      }
    }
    const data = Buffer.from(e.value, 'utf8');
    await this.client.addSecretVersion({
      parent: this.path(e.name),
      payload: { data, dataCrc32c: String(crc32c(data)) },
    });
    const annotations: Record<string, string> = { ...(secret.annotations ?? {}) };
    for (const k of META_KEYS) delete annotations[ANN[k]];
    const pairs = metadataPairs(e.meta);
    for (const k of META_KEYS) {
      const v = pairs[k];
      if (v !== undefined) annotations[ANN[k]] = v;
    }
    annotations[ANN.writeToken] = token;
    annotations[ANN.updatedAt] = new Date().toISOString();
    const merged: Record<string, string> = { ...(secret.labels ?? {}), ...labels };
    if (labels[TARGET_LABEL] === undefined) delete merged[TARGET_LABEL]; // a key without a target: no earlier key's label
    await this.client.updateSecret({
      secret: { name: this.path(e.name), annotations, labels: merged },
      updateMask: { paths: ['annotations', 'labels'] },
    });
  }

  /**
   * Labels (for filtering in the console and `gcloud --filter`): names lower-cased and cut to the
   * label alphabet, the target as its `targetTag` (a URL is no label value). The exact metadata,
   * the full target included, is in the annotations, which is what `list` reads.
   */
  private labels(meta: SecretMetadata): Record<string, string> {
    return {
      'managed-by': 'kms-sync',
      'project-env': labelValue(meta.projectEnv),
      client: labelValue(meta.client),
      key: labelValue(meta.key),
      ...(typeof meta.target === 'string' ? { [TARGET_LABEL]: targetTag(meta.target) } : {}),
    };
  }

  private async getSecret(name: string): Promise<GcpSecret | undefined> {
    try {
      const [s] = await this.client.getSecret({ name: this.path(name) });
      return s as GcpSecret;
    } catch (err) {
      if (grpcCode(err) === NOT_FOUND) return undefined;
      throw this.error(`cannot look up secret '${name}': ${describeSdkError(err)}`, classifyGcpError(err));
    }
  }

  private async latestEnabled(name: string): Promise<boolean> {
    try {
      const [v] = await this.client.getSecretVersion({ name: `${this.path(name)}/versions/latest` });
      return (v.state as unknown) === 'ENABLED' || (v.state as unknown) === 1;
    } catch (err) {
      const c = grpcCode(err);
      if (c === NOT_FOUND || c === FAILED_PRECONDITION) return false;
      throw this.error(`cannot check secret '${name}': ${describeSdkError(err)}`, classifyGcpError(err));
    }
  }

  private async listRaw(): Promise<GcpSecret[]> {
    const base = this.prefix ? `${this.prefix}__` : '';
    const out: GcpSecret[] = [];
    try {
      const request = { parent: this.parent(), pageSize: 250, ...(base ? { filter: `name:${base}` } : {}) };
      for await (const s of this.client.listSecretsAsync(request, { autoPaginate: false })) {
        const id = this.idOf(s as GcpSecret);
        if (id.startsWith(base)) out.push(s as GcpSecret);
      }
    } catch (err) {
      throw this.error(`cannot list secrets: ${describeSdkError(err)}`, classifyGcpError(err));
    }
    return out;
  }

  private idOf(s: GcpSecret): string {
    const n = s.name ?? '';
    return n.slice(n.lastIndexOf('/') + 1);
  }

  private parent(): string {
    return `projects/${this.project}`;
  }

  private path(name: string): string {
    return `projects/${this.project}/secrets/${name}`;
  }

  private checkName(name: string): void {
    if (typeof name !== 'string' || !GCP_NAME_RE.test(name)) {
      throw this.error(
        `'${String(name)}' is not a valid Secret Manager secret id (1-255 of [A-Za-z0-9_-])`,
        'INVALID_ARGUMENT',
      );
    }
  }

  private notWritable(err: unknown, call: string): SecretStoreError {
    const c = grpcCode(err);
    const hint =
      c === PERMISSION_DENIED
        ? `: permission denied; the identity needs secretmanager.secrets.{create,get,list,update} and secretmanager.versions.{add,get,access} on project ${this.project} (see docs/secret-stores-cloud.md)`
        : c === UNAUTHENTICATED ||
            /default credentials|Could not load the default credentials/i.test(String((err as Error)?.message))
          ? ': no usable Google credentials (GOOGLE_APPLICATION_CREDENTIALS, workload identity, gcloud ADC)'
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
