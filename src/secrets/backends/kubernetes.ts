/**
 * Kubernetes Secrets, through the official client (@kubernetes/client-node) and server-side apply.
 *
 *   kubernetes://<namespace>/<secret-name>[?context=ctx&force=false]
 *       one Secret holding many keys: data key per secret name (`acme-prod.web.primary`)
 *   kubernetes://<namespace>[?context=ctx&prefix=kms-&force=false]
 *       one Secret per key (`acme-prod.web.primary`), the raw key under data key `value`
 *   (k8s:// is an alias)
 *
 * Every write is an apply PATCH (`Content-Type: application/apply-patch+yaml`, fieldManager
 * `kms-sync`, force=false unless `force=true`): a field another manager owns with a different value
 * is a conflict, reported, never overwritten. In the one-Secret form an apply states every field
 * kms-sync owns (server-side apply removes owned fields left out), so each write re-reads the
 * Secret, re-states the entries kms-sync owns, adds the new ones and carries the Secret's
 * `resourceVersion` as a precondition: a concurrent change answers 409 and the write is retried
 * once on a fresh read. A missing Secret is first created empty (POST), so two first writers
 * cannot wipe each other's keys.
 *
 * Metadata: label `app.kubernetes.io/managed-by: kms-sync`; per-Secret annotations
 * `kms-sync/key-id`, `kms-sync/project-env`, ..., `kms-sync/target` (the service target, when
 * known) (one Secret per key) or one JSON annotation per data key `kms-sync/k.<data key>` with the
 * same fields (one Secret, many keys).
 *
 * Auth: KUBECONFIG (colon-separated list), in-cluster service account (KUBERNETES_SERVICE_HOST),
 * else ~/.kube/config; `context=` picks a context.
 */
import * as fsSync from 'node:fs';
import * as path from 'node:path';
// The client library takes about a second to import: it is loaded when a store first talks to a
// cluster, never when the CLI starts.
import type * as K8s from '@kubernetes/client-node';
import type { ApiException, AuthorizationV1Api, CoreV1Api, KubeConfig, V1Secret } from '@kubernetes/client-node';
import { SecretStoreError, describeIoError, type SecretStoreErrorCode } from '../errors.js';
import type { SecretEntry, SecretListing, SecretMetadata, SecretStore, StoreBackend } from '../store.js';
import {
  checkKnownParams,
  decodeComponent,
  envOf,
  latestPerName,
  mapLimit,
  optBool,
  optString,
  putAll,
  scrub,
  validateEntry,
  type BackendOpenOptions,
  RemoteStoreBase,
} from './common.js';
import { DNS1123_SUBDOMAIN, dataKeyName, dnsSubdomainName, isLegalDataKey, shortHash } from './names.js';
import { redactUserinfo } from '../../model/redact.js';

export const KUBERNETES_SCHEMES: readonly string[] = ['kubernetes', 'k8s'];
export const KUBERNETES_URI_FORMS: readonly string[] = [
  'kubernetes://<namespace>/<secret-name> (one Secret, one data key per secret)',
  'kubernetes://<namespace>[?prefix=kms-] (one Secret per secret)',
];
const KNOWN_PARAMS = ['context', 'force', 'prefix'] as const;
export const FIELD_MANAGER = 'kms-sync';
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const ANNOTATION_PREFIX = 'kms-sync/';
/** The data key of the raw value in the one-Secret-per-key form. */
export const VALUE_KEY = 'value';
const CONCURRENCY = 8;
const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export interface KubernetesConfig {
  namespace: string;
  /** Set in the one-Secret form. */
  secret: string | undefined;
  prefix: string;
  context: string | undefined;
  force: boolean;
  env: NodeJS.ProcessEnv;
  displayUri: string;
}

export function parseKubernetesUri(uri: string, opts: BackendOpenOptions = {}): KubernetesConfig {
  const bad = (why: string): SecretStoreError =>
    new SecretStoreError(
      `invalid store URI '${redactUserinfo(uri)}': ${why}; use ${KUBERNETES_URI_FORMS.join(' or ')}`,
      { code: 'INVALID_URI' },
    );
  const m = /^(kubernetes|k8s):\/\/([^?#]*)(\?[^#]*)?$/i.exec(uri);
  if (!m) throw bad('expected kubernetes://<namespace>[/<secret>]');
  const parts = (m[2] ?? '')
    .split('/')
    .filter((p) => p !== '')
    .map((p) => decodeComponent(p, bad));
  if (parts.length < 1 || parts.length > 2) throw bad('expected kubernetes://<namespace>[/<secret>]');
  const query = new URLSearchParams((m[3] ?? '').slice(1));
  checkKnownParams(query, KNOWN_PARAMS, bad);
  const namespace = parts[0]!;
  if (!DNS1123_LABEL.test(namespace) || namespace.length > 63)
    throw bad(`'${namespace}' is not a namespace name (DNS-1123 label)`);
  const secret = parts[1];
  if (secret !== undefined && (!DNS1123_SUBDOMAIN.test(secret) || secret.length > 253)) {
    throw bad(`'${secret}' is not a Secret name (DNS-1123 subdomain: lower-case letters, digits, '-' and '.')`);
  }
  const prefix = optString(query, opts, 'prefix') ?? '';
  if (secret !== undefined && prefix !== '') throw bad("'prefix' applies to the one-Secret-per-key form only");
  if (prefix !== '' && !/^[a-z0-9]([-a-z0-9.]*)?$/.test(prefix))
    throw bad(`prefix '${prefix}' must be lower-case letters, digits, '-' or '.', starting with a letter or digit`);
  const context = optString(query, opts, 'context') || undefined;
  const force = optBool(query, opts, 'force', false, bad);
  const qs = new URLSearchParams();
  if (context) qs.set('context', context);
  if (prefix) qs.set('prefix', prefix);
  if (force) qs.set('force', 'true');
  const shown = qs.toString();
  return {
    namespace,
    secret,
    prefix,
    context,
    force,
    env: envOf(opts),
    displayUri: `kubernetes://${namespace}${secret !== undefined ? `/${secret}` : ''}${shown ? `?${shown}` : ''}`,
  };
}

export async function openKubernetesStore(uri: string, opts: BackendOpenOptions = {}): Promise<KubernetesSecretStore> {
  return new KubernetesSecretStore(parseKubernetesUri(uri, opts));
}

export const kubernetesBackend: StoreBackend = {
  schemes: KUBERNETES_SCHEMES,
  forms: KUBERNETES_URI_FORMS,
  open: (uri, opts) => openKubernetesStore(uri, opts),
};

let k8sModule: typeof K8s | undefined;

async function k8s(): Promise<typeof K8s> {
  k8sModule ??= await import('@kubernetes/client-node');
  return k8sModule;
}

function isApiException(err: unknown): err is ApiException<unknown> {
  return k8sModule !== undefined && err instanceof k8sModule.ApiException;
}

/** Loads credentials the way kubectl does (from the given environment, not process.env). */
export async function loadKubeConfig(env: NodeJS.ProcessEnv, context: string | undefined): Promise<KubeConfig> {
  const { KubeConfig } = await k8s();
  const kc = new KubeConfig();
  const files = (env.KUBECONFIG ?? '').split(path.delimiter).filter((f) => f !== '');
  if (files.length > 0) {
    kc.loadFromFile(files[0]!);
    for (const f of files.slice(1)) {
      if (!fsSync.existsSync(f)) continue;
      const more = new KubeConfig();
      more.loadFromFile(f);
      // kubectl's rule: the first file that defines a name (or current-context) wins.
      for (const c of more.getClusters()) if (!kc.getCluster(c.name)) kc.addCluster(c);
      for (const u of more.getUsers()) if (!kc.getUser(u.name)) kc.addUser(u);
      for (const c of more.getContexts()) if (!kc.getContextObject(c.name)) kc.addContext(c);
      if (!kc.getCurrentContext() && more.getCurrentContext()) kc.setCurrentContext(more.getCurrentContext());
    }
  } else if (env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT) {
    const host = env.KUBERNETES_SERVICE_HOST.includes(':')
      ? `[${env.KUBERNETES_SERVICE_HOST}]`
      : env.KUBERNETES_SERVICE_HOST;
    kc.loadFromOptions({
      clusters: [
        {
          name: 'inCluster',
          server: `https://${host}:${env.KUBERNETES_SERVICE_PORT}`,
          caFile: `${SA_DIR}/ca.crt`,
          skipTLSVerify: false,
        },
      ],
      users: [{ name: 'inClusterUser', authProvider: { name: 'tokenFile', config: { tokenFile: `${SA_DIR}/token` } } }],
      contexts: [{ name: 'inClusterContext', cluster: 'inCluster', user: 'inClusterUser' }],
      currentContext: 'inClusterContext',
    });
  } else {
    const file = path.join(env.HOME ?? process.env.HOME ?? '', '.kube', 'config');
    if (fsSync.existsSync(file)) kc.loadFromFile(file);
  }
  if (context) kc.setCurrentContext(context);
  return kc;
}

interface Clients {
  core: CoreV1Api;
  authz: AuthorizationV1Api;
}

/** Parsed JSON annotation of one data key (one-Secret form). */
interface KeyAnnotation extends Partial<SecretMetadata> {
  name?: string;
  updatedAt?: string;
}

/** `kms-sync/k.<data key>` when that is a legal annotation name, else `kms-sync/h.<hash>`. */
export function keyAnnotationName(dataKey: string): string {
  if (/^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(dataKey) && dataKey.length <= 61)
    return `${ANNOTATION_PREFIX}k.${dataKey}`;
  return `${ANNOTATION_PREFIX}h.${shortHash(dataKey)}`;
}

export class KubernetesSecretStore extends RemoteStoreBase implements SecretStore {
  readonly kind = 'kubernetes';
  readonly displayUri: string;
  readonly config: KubernetesConfig;
  private clients: Clients | undefined;

  constructor(config: KubernetesConfig) {
    super();
    this.config = config;
    this.displayUri = config.displayUri;
  }

  /** One Secret: a data key (`acme-prod.web.primary`); one per key: a Secret name (see names.ts). */
  secretName(logical: string): string {
    return this.config.secret !== undefined ? dataKeyName(logical) : dnsSubdomainName(logical, this.config.prefix);
  }

  async checkWritable(): Promise<void> {
    try {
      const { authz } = await this.api();
      const checks: { verb: string; name?: string }[] =
        this.config.secret !== undefined
          ? [{ verb: 'get', name: this.config.secret }, { verb: 'patch', name: this.config.secret }, { verb: 'create' }]
          : [{ verb: 'get' }, { verb: 'patch' }, { verb: 'create' }];
      const denied: string[] = [];
      for (const c of checks) {
        const review = await authz.createSelfSubjectAccessReview({
          body: {
            apiVersion: 'authorization.k8s.io/v1',
            kind: 'SelfSubjectAccessReview',
            spec: {
              resourceAttributes: {
                namespace: this.config.namespace,
                verb: c.verb,
                resource: 'secrets',
                ...(c.name ? { name: c.name } : {}),
              },
            },
          },
        });
        if (!review.status?.allowed) denied.push(`${c.verb} secrets${c.name ? `/${c.name}` : ''}`);
      }
      if (denied.length) {
        throw this.error(
          `the credentials may not ${denied.join(', ')} in namespace ${this.config.namespace} (see docs/secret-stores.md for the Role)`,
          'NOT_WRITABLE',
        );
      }
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
    const batch = latestPerName(entries);
    const values = batch.map((e) => e.value);
    if (this.config.secret !== undefined) {
      try {
        await this.applyIntoOneSecret(batch);
      } catch (err) {
        throw this.wrap(err, `could not store ${batch.length} secret(s)`, 'IO', values);
      }
      return;
    }
    await putAll(
      batch,
      CONCURRENCY,
      async (e) => {
        try {
          await this.applyOwnSecret(e);
        } catch (err) {
          throw this.wrap(err, `could not store ${e.name}`, 'IO', [e.value]);
        }
      },
      (m, c) => this.error(m, c),
    );
  }

  async existsMany(names: string[]): Promise<Set<string>> {
    return this.guard(async () => {
      const out = new Set<string>();
      if (this.config.secret !== undefined) {
        const s = await this.getSecret(this.config.secret);
        for (const n of names) if (s?.data?.[n] !== undefined) out.add(n);
        return out;
      }
      await mapLimit([...new Set(names)], CONCURRENCY, async (n) => {
        if (!DNS1123_SUBDOMAIN.test(n)) return;
        const s = await this.getSecret(n);
        if (s?.data?.[VALUE_KEY] !== undefined) out.add(n);
      });
      return out;
    }, 'cannot be read');
  }

  async read(name: string): Promise<string | undefined> {
    return this.guard(async () => {
      this.checkName(name);
      const s = await this.getSecret(this.config.secret ?? name);
      const b64 = s?.data?.[this.config.secret !== undefined ? name : VALUE_KEY];
      return b64 === undefined ? undefined : Buffer.from(b64, 'base64').toString('utf8');
    }, 'cannot be read');
  }

  async list(): Promise<SecretListing[]> {
    return this.guard(async () => {
      const out: SecretListing[] = [];
      if (this.config.secret !== undefined) {
        const s = await this.getSecret(this.config.secret);
        if (!s) return [];
        const ann = s.metadata?.annotations ?? {};
        for (const k of Object.keys(s.data ?? {}).sort()) {
          const a = parseKeyAnnotation(ann[keyAnnotationName(k)]);
          const meta = a ? metaOf(a) : undefined;
          out.push({
            name: k,
            updatedAt: a?.updatedAt ?? timestamp(s.metadata?.creationTimestamp),
            ...(meta ? { meta } : {}),
          });
        }
        return out;
      }
      const { core } = await this.api();
      let cont: string | undefined;
      do {
        const page = await core.listNamespacedSecret({
          namespace: this.config.namespace,
          labelSelector: `${MANAGED_BY_LABEL}=${FIELD_MANAGER}`,
          limit: 500,
          ...(cont ? { _continue: cont } : {}),
        });
        for (const s of page.items ?? []) {
          const name = s.metadata?.name;
          if (!name?.startsWith(this.config.prefix) || s.data?.[VALUE_KEY] === undefined) continue;
          const ann = s.metadata?.annotations ?? {};
          const meta = metaOf({
            projectEnv: ann[`${ANNOTATION_PREFIX}project-env`],
            client: ann[`${ANNOTATION_PREFIX}client`],
            key: ann[`${ANNOTATION_PREFIX}key`],
            keyId: ann[`${ANNOTATION_PREFIX}key-id`],
            issuedAt: ann[`${ANNOTATION_PREFIX}issued-at`],
            expiresAt:
              ann[`${ANNOTATION_PREFIX}expires-at`] === undefined
                ? undefined
                : ann[`${ANNOTATION_PREFIX}expires-at`] || null,
            target: ann[`${ANNOTATION_PREFIX}target`],
          });
          out.push({
            name,
            updatedAt: ann[`${ANNOTATION_PREFIX}updated-at`] ?? timestamp(s.metadata?.creationTimestamp),
            ...(meta ? { meta } : {}),
          });
        }
        cont = page.metadata?._continue || undefined;
      } while (cont);
      return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    }, 'cannot be listed');
  }

  // -------------------------------------------------------------------------------------------

  /** One Secret per key: the whole object is ours, one apply states all of it. */
  private async applyOwnSecret(e: SecretEntry): Promise<void> {
    const now = new Date().toISOString();
    const body = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: e.name,
        namespace: this.config.namespace,
        labels: { [MANAGED_BY_LABEL]: FIELD_MANAGER },
        annotations: {
          [`${ANNOTATION_PREFIX}project-env`]: e.meta.projectEnv,
          [`${ANNOTATION_PREFIX}client`]: e.meta.client,
          [`${ANNOTATION_PREFIX}key`]: e.meta.key,
          [`${ANNOTATION_PREFIX}key-id`]: e.meta.keyId,
          [`${ANNOTATION_PREFIX}issued-at`]: e.meta.issuedAt,
          [`${ANNOTATION_PREFIX}expires-at`]: e.meta.expiresAt ?? '',
          // Only when known; an apply without it removes an earlier key's (the field is ours).
          ...(typeof e.meta.target === 'string' ? { [`${ANNOTATION_PREFIX}target`]: e.meta.target } : {}),
          [`${ANNOTATION_PREFIX}updated-at`]: now,
        },
      },
      type: 'Opaque',
      data: { [VALUE_KEY]: Buffer.from(e.value, 'utf8').toString('base64') },
    };
    await this.apply(e.name, body);
  }

  /** One Secret, many keys: re-state what kms-sync owns, add the batch, precondition on resourceVersion. */
  private async applyIntoOneSecret(batch: SecretEntry[]): Promise<void> {
    const name = this.config.secret!;
    for (let attempt = 0; ; attempt++) {
      let cur = await this.getSecret(name);
      if (!cur) {
        await this.createEmpty(name);
        cur = await this.getSecret(name);
        if (!cur) throw this.error(`Secret ${name} vanished right after it was created`, 'IO');
      }
      const owned = ownedFields(cur);
      const curData = cur.data ?? {};
      const curAnn = cur.metadata?.annotations ?? {};
      const data: Record<string, string> = {};
      const annotations: Record<string, string> = {};
      for (const k of owned.data) if (curData[k] !== undefined) data[k] = curData[k];
      for (const a of owned.annotations) if (curAnn[a] !== undefined) annotations[a] = curAnn[a];
      const now = new Date().toISOString();
      for (const e of batch) {
        data[e.name] = Buffer.from(e.value, 'utf8').toString('base64');
        const ann: KeyAnnotation = { name: e.name, ...e.meta, expiresAt: e.meta.expiresAt ?? null, updatedAt: now };
        annotations[keyAnnotationName(e.name)] = JSON.stringify(ann);
      }
      const labels: Record<string, string> = {};
      const curLabel = cur.metadata?.labels?.[MANAGED_BY_LABEL];
      if (curLabel === undefined || curLabel === FIELD_MANAGER) labels[MANAGED_BY_LABEL] = FIELD_MANAGER;
      const body = {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: {
          name,
          namespace: this.config.namespace,
          resourceVersion: cur.metadata?.resourceVersion,
          labels,
          annotations,
        },
        data,
      };
      try {
        await this.apply(name, body);
        return;
      } catch (err) {
        if (attempt === 0 && isApiException(err) && err.code === 409 && !isFieldConflict(err)) continue;
        throw err;
      }
    }
  }

  /** Creates an empty, labelled Secret; "already exists" is fine (someone else was first). */
  private async createEmpty(name: string): Promise<void> {
    const { core } = await this.api();
    try {
      await core.createNamespacedSecret({
        namespace: this.config.namespace,
        fieldManager: FIELD_MANAGER,
        body: {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name, namespace: this.config.namespace, labels: { [MANAGED_BY_LABEL]: FIELD_MANAGER } },
          type: 'Opaque',
        },
      });
    } catch (err) {
      if (isApiException(err) && err.code === 409) return;
      throw err;
    }
  }

  private async apply(name: string, body: unknown): Promise<void> {
    const { core } = await this.api();
    const lib = await k8s();
    await core.patchNamespacedSecret(
      { name, namespace: this.config.namespace, body, fieldManager: FIELD_MANAGER, force: this.config.force },
      lib.setHeaderOptions('Content-Type', lib.PatchStrategy.ServerSideApply),
    );
  }

  private async getSecret(name: string): Promise<V1Secret | undefined> {
    const { core } = await this.api();
    try {
      return await core.readNamespacedSecret({ name, namespace: this.config.namespace });
    } catch (err) {
      if (isApiException(err) && err.code === 404) return undefined;
      throw err;
    }
  }

  private async api(): Promise<Clients> {
    if (!this.clients) {
      const lib = await k8s();
      let kc: KubeConfig;
      try {
        kc = await loadKubeConfig(this.config.env, this.config.context);
      } catch (err) {
        throw this.error(`cannot load Kubernetes credentials: ${describeIoError(err)}`, 'NOT_WRITABLE');
      }
      if (!kc.getCurrentCluster()) {
        throw this.error(
          'no Kubernetes cluster configured: set KUBECONFIG, run in a pod with a service account, or write ~/.kube/config',
          'NOT_WRITABLE',
        );
      }
      this.clients = { core: kc.makeApiClient(lib.CoreV1Api), authz: kc.makeApiClient(lib.AuthorizationV1Api) };
    }
    return this.clients;
  }

  private checkName(name: string): void {
    const ok =
      this.config.secret !== undefined ? isLegalDataKey(name) : DNS1123_SUBDOMAIN.test(name) && name.length <= 253;
    if (!ok) {
      throw this.error(
        `'${name}' is not a legal ${this.config.secret !== undefined ? 'Secret data key ([-._a-zA-Z0-9]+)' : 'Secret name (DNS-1123 subdomain)'}; pass logical names through secretName()`,
        'INVALID_ARGUMENT',
      );
    }
  }

  protected override wrap(
    err: unknown,
    what: string,
    fallback: SecretStoreErrorCode,
    values: string[] = [],
  ): SecretStoreError {
    if (isApiException(err)) {
      const code: SecretStoreErrorCode =
        err.code === 401 || err.code === 403 ? 'NOT_WRITABLE' : err.code === 409 ? 'LOCKED' : fallback;
      let hint = '';
      if (err.code === 409 && isFieldConflict(err))
        hint = ` (another field manager owns these fields with other values; kms-sync does not take them over unless the store URI says force=true)`;
      else if (err.code === 409) hint = ' (the Secret kept changing while kms-sync wrote to it)';
      else if (err.code === 403)
        hint = ` (RBAC: see docs/secret-stores.md for the Role kms-sync needs in namespace ${this.config.namespace})`;
      return this.error(`${what}: HTTP ${err.code}: ${scrub(statusMessage(err), values)}${hint}`, code);
    }
    return super.wrap(err, what, fallback, values);
  }

  protected override describeFailure(err: unknown): string {
    return describeFetchError(err);
  }
}

/** What kms-sync's apply owns: data keys and annotations (from managedFields), plus our annotations. */
export function ownedFields(s: V1Secret): { data: Set<string>; annotations: Set<string> } {
  const data = new Set<string>();
  const annotations = new Set<string>();
  for (const mf of s.metadata?.managedFields ?? []) {
    if (mf.manager !== FIELD_MANAGER || mf.operation !== 'Apply') continue;
    const f = (mf.fieldsV1 ?? {}) as Record<string, Record<string, unknown> | undefined>;
    for (const k of Object.keys(f['f:data'] ?? {})) if (k.startsWith('f:')) data.add(k.slice(2));
    const md = (f['f:metadata'] ?? {}) as Record<string, Record<string, unknown> | undefined>;
    for (const k of Object.keys(md['f:annotations'] ?? {})) if (k.startsWith('f:')) annotations.add(k.slice(2));
  }
  // Entries carrying our per-key annotation are ours too (e.g. written before managedFields existed).
  const ann = s.metadata?.annotations ?? {};
  for (const k of Object.keys(s.data ?? {})) {
    const a = keyAnnotationName(k);
    if (ann[a] !== undefined && parseKeyAnnotation(ann[a])?.name === k) {
      data.add(k);
      annotations.add(a);
    }
  }
  return { data, annotations };
}

function parseKeyAnnotation(v: string | undefined): KeyAnnotation | undefined {
  if (v === undefined) return undefined;
  try {
    const o = JSON.parse(v) as unknown;
    return o && typeof o === 'object' ? (o as KeyAnnotation) : undefined;
  } catch {
    return undefined;
  }
}

function metaOf(a: Partial<Record<keyof SecretMetadata, unknown>>): Partial<SecretMetadata> | undefined {
  const meta: Partial<SecretMetadata> = {};
  for (const k of ['projectEnv', 'client', 'key', 'keyId', 'issuedAt', 'target'] as const) {
    const v = a[k];
    if (typeof v === 'string') meta[k] = v;
  }
  if (a.expiresAt === null || a.expiresAt === '') meta.expiresAt = null;
  else if (typeof a.expiresAt === 'string') meta.expiresAt = a.expiresAt;
  return Object.keys(meta).length ? meta : undefined;
}

function statusBody(err: ApiException<unknown>): Record<string, unknown> | undefined {
  const b = err.body;
  if (b && typeof b === 'object') return b as Record<string, unknown>;
  if (typeof b === 'string') {
    try {
      const o = JSON.parse(b) as unknown;
      return o && typeof o === 'object' ? (o as Record<string, unknown>) : undefined;
    } catch {
      return { message: b.slice(0, 300) };
    }
  }
  return undefined;
}

function statusMessage(err: ApiException<unknown>): string {
  const b = statusBody(err);
  const m = b?.message;
  const reason = typeof b?.reason === 'string' ? `${b.reason}: ` : '';
  return `${reason}${typeof m === 'string' ? m.slice(0, 500) : err.code === 401 ? 'Unauthorized' : 'no message'}`;
}

/** A server-side apply field-ownership conflict (as opposed to a resourceVersion precondition). */
function isFieldConflict(err: ApiException<unknown>): boolean {
  const b = statusBody(err);
  const causes = ((b?.details as { causes?: Array<{ reason?: unknown }> } | undefined)?.causes ?? []) as Array<{
    reason?: unknown;
  }>;
  if (causes.some((c) => c.reason === 'FieldManagerConflict')) return true;
  return typeof b?.message === 'string' && /conflict.*with "/i.test(b.message);
}

/** The client deserialises timestamps to Date; listings carry RFC 3339 strings. */
function timestamp(t: Date | string | undefined): string {
  if (t instanceof Date) return Number.isNaN(t.getTime()) ? '' : t.toISOString();
  return t ?? '';
}

function describeFetchError(err: unknown): string {
  if (err && typeof err === 'object') {
    const e = err as { cause?: unknown; message?: unknown };
    if (e.cause) return `${typeof e.message === 'string' ? `${e.message}: ` : ''}${describeIoError(e.cause)}`;
  }
  return describeIoError(err);
}
