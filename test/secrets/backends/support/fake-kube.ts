// A minimal kube-apiserver for core/v1 Secrets with server-side apply semantics:
//  - PATCH must be `application/apply-patch+yaml` with a fieldManager (415 / 422 otherwise);
//  - managedFields per (manager, operation); fields a manager applied before and leaves out of
//    its next apply are removed unless another manager owns them;
//  - a field another manager owns with a different value is a 409 FieldManagerConflict unless
//    force=true (which takes the field over);
//  - metadata.resourceVersion in an apply is a precondition (409 Conflict when stale);
//  - RBAC: a Role's rules (verbs, resourceNames) decide every call and SelfSubjectAccessReviews;
//  - Bearer token auth, Status objects for errors, validation of names, keys and base64 data.
import { parse as parseYaml } from 'yaml';
import {
  selfSignedTls,
  startRecordingServer,
  type Recorded,
  type RecordingServer,
  type Reply,
} from './recording-server.js';

export interface RoleRule {
  verbs: string[];
  resourceNames?: string[];
}

interface StoredSecret {
  name: string;
  namespace: string;
  uid: string;
  resourceVersion: number;
  creationTimestamp: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  data: Record<string, string>;
  type: string;
  /** `manager|operation` → field paths (`data/k`, `annotations/a`, `labels/l`, `type`). */
  owners: Map<string, Set<string>>;
}

export interface FakeKubeOptions {
  token: string;
  namespace: string;
  rules?: RoleRule[];
  /** Runs before an apply is decided (after the body was read): lets tests interleave writers. */
  beforeApply?: (name: string) => Promise<void> | void;
}

export interface FakeKube {
  /** PEM file of the server's CA (certificate-authority in a kubeconfig). */
  caFile: string;
  server: RecordingServer;
  url: string;
  requests: Recorded[];
  secrets: Map<string, StoredSecret>;
  violations: string[];
  /** Another client (e.g. kubectl or Helm) writes fields with an Update operation. */
  updateAs(
    manager: string,
    name: string,
    change: { data?: Record<string, string>; labels?: Record<string, string> },
  ): void;
  decoded(name: string, key: string): string | undefined;
  close(): Promise<void>;
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DATA_KEY = /^[-._a-zA-Z0-9]+$/;
const QUALIFIED =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function status(code: number, reason: string, message: string, details?: Record<string, unknown>): Reply {
  return {
    status: code,
    body: {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message,
      reason,
      ...(details ? { details } : {}),
      code,
    },
  };
}

function fieldValue(s: StoredSecret, p: string): string | undefined {
  const i = p.indexOf('/');
  const kind = i < 0 ? p : p.slice(0, i);
  const key = p.slice(i + 1);
  if (kind === 'type') return s.type;
  if (kind === 'data') return s.data[key];
  if (kind === 'annotations') return s.annotations[key];
  if (kind === 'labels') return s.labels[key];
  return undefined;
}

function setField(s: StoredSecret, p: string, v: string | undefined): void {
  const i = p.indexOf('/');
  const kind = i < 0 ? p : p.slice(0, i);
  const key = i < 0 ? '' : p.slice(i + 1);
  if (kind === 'type') {
    if (v !== undefined) s.type = v;
    return;
  }
  const bag = kind === 'data' ? s.data : kind === 'annotations' ? s.annotations : s.labels;
  if (v === undefined) delete bag[key];
  else bag[key] = v;
}

function fieldsV1(paths: Set<string>): Record<string, unknown> {
  const out: Record<string, Record<string, unknown>> = {};
  const meta: Record<string, Record<string, unknown>> = {};
  for (const p of paths) {
    const i = p.indexOf('/');
    const kind = i < 0 ? p : p.slice(0, i);
    const key = p.slice(i + 1);
    if (kind === 'type') out['f:type'] = {};
    else if (kind === 'data') (out['f:data'] ??= {})[`f:${key}`] = {};
    else (meta[`f:${kind}`] ??= {})[`f:${key}`] = {};
  }
  if (Object.keys(meta).length) out['f:metadata'] = meta;
  return out;
}

export async function startFakeKube(o: FakeKubeOptions): Promise<FakeKube> {
  const secrets = new Map<string, StoredSecret>();
  const violations: string[] = [];
  let rv = 1000;
  let uid = 0;
  const rules = o.rules ?? [{ verbs: ['get', 'list', 'create', 'patch', 'update', 'delete'] }];
  const can = (verb: string, name?: string): boolean =>
    rules.some(
      (r) =>
        (r.verbs.includes(verb) || r.verbs.includes('*')) &&
        (!r.resourceNames || (name !== undefined && r.resourceNames.includes(name))),
    );

  const render = (s: StoredSecret): Record<string, unknown> => ({
    kind: 'Secret',
    apiVersion: 'v1',
    metadata: {
      name: s.name,
      namespace: s.namespace,
      uid: s.uid,
      resourceVersion: String(s.resourceVersion),
      creationTimestamp: s.creationTimestamp,
      ...(Object.keys(s.labels).length ? { labels: { ...s.labels } } : {}),
      ...(Object.keys(s.annotations).length ? { annotations: { ...s.annotations } } : {}),
      managedFields: [...s.owners].map(([k, paths]) => {
        const [manager, operation] = k.split('|') as [string, string];
        return {
          manager,
          operation,
          apiVersion: 'v1',
          time: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
          fieldsType: 'FieldsV1',
          fieldsV1: fieldsV1(paths),
        };
      }),
    },
    ...(Object.keys(s.data).length ? { data: { ...s.data } } : {}),
    type: s.type,
  });

  /** Field paths and values of an object body; a Status reply when it is invalid. */
  const flatten = (b: Record<string, unknown>): Map<string, string> | Reply => {
    const out = new Map<string, string>();
    const md = (b.metadata ?? {}) as Record<string, unknown>;
    for (const [kind, bag] of [
      ['labels', md.labels],
      ['annotations', md.annotations],
      ['data', b.data],
    ] as const) {
      if (bag === undefined || bag === null) continue;
      if (typeof bag !== 'object') return status(400, 'BadRequest', `${kind} must be a map`);
      for (const [k, v] of Object.entries(bag as Record<string, unknown>)) {
        if (typeof v !== 'string') return status(400, 'BadRequest', `${kind}.${k} must be a string`);
        if (kind === 'data') {
          if (!DATA_KEY.test(k) || k === '.' || k === '..' || k.startsWith('..') || k.length > 253)
            return status(
              422,
              'Invalid',
              `Secret "${String(md.name)}" is invalid: data[${k}]: Invalid value: "${k}": a valid config key must consist of alphanumeric characters, '-', '_' or '.'`,
            );
          if (!BASE64.test(v))
            return status(
              400,
              'BadRequest',
              `Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 0`,
            );
        } else if (!QUALIFIED.test(k) || (k.split('/').pop() ?? '').length > 63) {
          return status(
            422,
            'Invalid',
            `metadata.${kind}: Invalid value: "${k}": name part must consist of alphanumeric characters, '-', '_' or '.'`,
          );
        }
        out.set(`${kind}/${k}`, v);
      }
    }
    if (typeof b.type === 'string') out.set('type', b.type);
    return out;
  };

  const handler = async (r: Recorded): Promise<Reply> => {
    if (r.headers.authorization !== `Bearer ${o.token}`) return status(401, 'Unauthorized', 'Unauthorized');
    if (r.method === 'POST' && r.rawPath === '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews') {
      const b = r.json as {
        kind?: string;
        spec?: { resourceAttributes?: { namespace?: string; verb?: string; resource?: string; name?: string } };
      };
      if (b?.kind !== 'SelfSubjectAccessReview') violations.push('SSAR kind');
      const ra = b?.spec?.resourceAttributes ?? {};
      const allowed = ra.resource === 'secrets' && ra.namespace === o.namespace && can(String(ra.verb), ra.name);
      return {
        status: 201,
        body: {
          kind: 'SelfSubjectAccessReview',
          apiVersion: 'authorization.k8s.io/v1',
          metadata: {},
          spec: b.spec,
          status: { allowed },
        },
      };
    }
    const m = /^\/api\/v1\/namespaces\/([^/]+)\/secrets(?:\/([^/]+))?$/.exec(r.rawPath);
    if (!m) return status(404, 'NotFound', 'the server could not find the requested resource');
    const ns = decodeURIComponent(m[1]!);
    const name = m[2] === undefined ? undefined : decodeURIComponent(m[2]);
    const forbidden = (verb: string): Reply =>
      status(
        403,
        'Forbidden',
        `secrets${name ? ` "${name}"` : ''} is forbidden: User "system:serviceaccount:ci:kms-sync" cannot ${verb} resource "secrets" in API group "" in the namespace "${ns}"`,
      );
    if (ns !== o.namespace)
      return name
        ? status(404, 'NotFound', `secrets "${name}" not found`)
        : {
            status: 200,
            body: { kind: 'SecretList', apiVersion: 'v1', metadata: { resourceVersion: String(rv) }, items: [] },
          };
    if (r.method === 'GET' && name === undefined) {
      if (!can('list')) return forbidden('list');
      const sel = r.query.get('labelSelector');
      let items = [...secrets.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
      if (sel) {
        const [k, v] = sel.split('=') as [string, string];
        items = items.filter((s) => s.labels[k] === v);
      }
      const limit = Number(r.query.get('limit') ?? 0);
      const start = Number(r.query.get('continue') ?? 0);
      const page = limit > 0 ? items.slice(start, start + limit) : items.slice(start);
      const next = limit > 0 && start + limit < items.length ? String(start + limit) : undefined;
      return {
        status: 200,
        body: {
          kind: 'SecretList',
          apiVersion: 'v1',
          metadata: { resourceVersion: String(rv), ...(next ? { continue: next } : {}) },
          items: page.map(render),
        },
      };
    }
    if (r.method === 'GET') {
      if (!can('get', name)) return forbidden('get');
      const s = secrets.get(name!);
      return s ? { status: 200, body: render(s) } : status(404, 'NotFound', `secrets "${name}" not found`);
    }
    if (r.method === 'POST' && name === undefined) {
      const b = r.json as Record<string, unknown>;
      const nm = String((b?.metadata as { name?: unknown } | undefined)?.name ?? '');
      if (!can('create')) return forbidden('create');
      if (!DNS_SUBDOMAIN.test(nm))
        return status(422, 'Invalid', `Secret "${nm}" is invalid: metadata.name: Invalid value`);
      if (secrets.has(nm))
        return status(409, 'AlreadyExists', `secrets "${nm}" already exists`, { name: nm, kind: 'secrets' });
      const fields = flatten(b);
      if (!(fields instanceof Map)) return fields;
      const manager = r.query.get('fieldManager') ?? 'unknown';
      const s: StoredSecret = {
        name: nm,
        namespace: ns,
        uid: `uid-${++uid}`,
        resourceVersion: ++rv,
        creationTimestamp: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
        labels: {},
        annotations: {},
        data: {},
        type: 'Opaque',
        owners: new Map(),
      };
      for (const [p, v] of fields) setField(s, p, v);
      s.owners.set(`${manager}|Update`, new Set(fields.keys()));
      secrets.set(nm, s);
      return { status: 201, body: render(s) };
    }
    if (r.method === 'PATCH' && name !== undefined) {
      const ct = String(r.headers['content-type'] ?? '');
      if (ct !== 'application/apply-patch+yaml')
        return status(
          415,
          'UnsupportedMediaType',
          `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`,
        );
      const manager = r.query.get('fieldManager');
      if (!manager)
        return status(
          422,
          'Invalid',
          'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
        );
      const force = r.query.get('force') === 'true';
      let b: Record<string, unknown>;
      try {
        b = parseYaml(r.body) as Record<string, unknown>;
      } catch {
        return status(400, 'BadRequest', 'error decoding YAML');
      }
      if (b?.apiVersion !== 'v1' || b.kind !== 'Secret')
        return status(400, 'BadRequest', 'apiVersion/kind must be v1/Secret');
      const md = (b.metadata ?? {}) as Record<string, unknown>;
      if (md.name !== name)
        return status(
          400,
          'BadRequest',
          `the name of the object (${String(md.name)}) does not match the name on the URL (${name})`,
        );
      if (md.namespace !== undefined && md.namespace !== ns)
        return status(
          400,
          'BadRequest',
          'the namespace of the provided object does not match the namespace sent on the request',
        );
      if (!DNS_SUBDOMAIN.test(name))
        return status(422, 'Invalid', `Secret "${name}" is invalid: metadata.name: Invalid value`);
      await o.beforeApply?.(name);
      let s = secrets.get(name);
      if (!s && !can('create')) return forbidden('create');
      if (s && !can('patch', name)) return forbidden('patch');
      const wantRv = md.resourceVersion;
      if (wantRv !== undefined && wantRv !== null && (!s || String(wantRv) !== String(s.resourceVersion))) {
        return status(
          409,
          'Conflict',
          `Operation cannot be fulfilled on secrets "${name}": the object has been modified; please apply your changes to the latest version and try again`,
          { name, kind: 'secrets' },
        );
      }
      const fields = flatten(b);
      if (!(fields instanceof Map)) return fields;
      const me = `${manager}|Apply`;
      const created = !s;
      s ??= {
        name,
        namespace: ns,
        uid: `uid-${++uid}`,
        resourceVersion: 0,
        creationTimestamp: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
        labels: {},
        annotations: {},
        data: {},
        type: 'Opaque',
        owners: new Map(),
      };
      const conflicts: { manager: string; field: string }[] = [];
      for (const [p, v] of fields) {
        for (const [owner, paths] of s.owners) {
          if (owner === me || !paths.has(p)) continue;
          if (fieldValue(s, p) !== v) conflicts.push({ manager: owner.split('|')[0]!, field: p });
        }
      }
      if (conflicts.length && !force) {
        const fmt = (c: { manager: string; field: string }): string =>
          `conflict with "${c.manager}" using v1: .${c.field.replace('/', '.')}`;
        return status(
          409,
          'Conflict',
          `Apply failed with ${conflicts.length} conflict${conflicts.length > 1 ? 's' : ''}: ${conflicts.map(fmt).join('\n')}`,
          {
            causes: conflicts.map((c) => ({
              reason: 'FieldManagerConflict',
              message: `conflict with "${c.manager}" using v1`,
              field: `.${c.field.replace('/', '.')}`,
            })),
          },
        );
      }
      if (force)
        for (const c of conflicts)
          for (const [owner, paths] of s.owners) if (owner.startsWith(`${c.manager}|`)) paths.delete(c.field);
      const before = s.owners.get(me) ?? new Set<string>();
      for (const p of before) {
        if (fields.has(p)) continue;
        const others = [...s.owners].some(([owner, paths]) => owner !== me && paths.has(p));
        if (!others) setField(s, p, undefined);
      }
      for (const [p, v] of fields) setField(s, p, v);
      s.owners.set(me, new Set(fields.keys()));
      for (const [owner, paths] of s.owners) if (paths.size === 0) s.owners.delete(owner);
      s.resourceVersion = ++rv;
      secrets.set(name, s);
      return { status: created ? 201 : 200, body: render(s) };
    }
    if (r.method === 'DELETE' && name !== undefined) {
      if (!can('delete', name)) return forbidden('delete');
      if (!secrets.delete(name)) return status(404, 'NotFound', `secrets "${name}" not found`);
      return {
        status: 200,
        body: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name, kind: 'secrets' } },
      };
    }
    return status(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
  };
  // HTTPS with a self-signed CA, as a real API server (the client refuses plain HTTP).
  const tls = selfSignedTls();
  const server = await startRecordingServer(handler, tls);
  return {
    caFile: tls.caFile,
    server,
    url: server.url,
    requests: server.requests,
    secrets,
    violations,
    updateAs(manager, name, change) {
      const s: StoredSecret = secrets.get(name) ?? {
        name,
        namespace: o.namespace,
        uid: `uid-${++uid}`,
        resourceVersion: 0,
        creationTimestamp: new Date().toISOString(),
        labels: {},
        annotations: {},
        data: {},
        type: 'Opaque',
        owners: new Map(),
      };
      const paths = s.owners.get(`${manager}|Update`) ?? new Set<string>();
      for (const [k, v] of Object.entries(change.data ?? {})) {
        s.data[k] = Buffer.from(v).toString('base64');
        paths.add(`data/${k}`);
        for (const [, ps] of s.owners) ps.delete(`data/${k}`);
      }
      for (const [k, v] of Object.entries(change.labels ?? {})) {
        s.labels[k] = v;
        paths.add(`labels/${k}`);
        for (const [, ps] of s.owners) ps.delete(`labels/${k}`);
      }
      s.owners.set(`${manager}|Update`, paths);
      s.resourceVersion = ++rv;
      secrets.set(name, s);
    },
    decoded(name, key) {
      const v = secrets.get(name)?.data[key];
      return v === undefined ? undefined : Buffer.from(v, 'base64').toString('utf8');
    },
    close: () => server.close(),
  };
}
