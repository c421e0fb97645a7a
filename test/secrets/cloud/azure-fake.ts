// A local Azure Key Vault (secrets data plane) over HTTPS with a self-signed certificate:
// bearer-challenge authentication (401 + WWW-Authenticate first), PUT/GET/PATCH /secrets/{name},
// version and secret listings with nextLink paging, soft delete with /deletedsecrets/{name} and
// /recover, and Key Vault's JSON error shape. Names compare case-insensitively, as in Azure.
import { randomBytes } from 'node:crypto';
import { selfSignedCert, startFake, type FakeServer, type RecordedRequest, type Reply } from './fake-http.js';

export const AZURE_FAKE_TOKEN = 'kms-sync-fake-access-token';

export interface AzureFakeVersion {
  id: string;
  value: string;
  tags: Record<string, string>;
  contentType?: string;
  enabled: boolean;
  created: number;
}

export interface AzureFakeSecret {
  name: string;
  versions: AzureFakeVersion[];
  deleted?: number;
}

export interface AzureFake extends FakeServer {
  cert: string;
  secrets: Map<string, AzureFakeSecret>;
  fault: ((req: RecordedRequest) => Reply | undefined) | undefined;
  /** "METHOD path" patterns answered 403 Forbidden. */
  denied: RegExp[];
  listPageSize: number;
  softDelete(name: string): void;
}

const kverr = (status: number, code: string, message: string, inner?: string): Reply => ({
  status,
  body: { error: { code, message, ...(inner ? { innererror: { code: inner } } : {}) } },
});

export async function startAzureFake(): Promise<AzureFake> {
  const tls = selfSignedCert();
  const secrets = new Map<string, AzureFakeSecret>();
  let clock = 1_767_225_600;
  const fake = {} as AzureFake;
  let base = '';
  const key = (n: string): string => n.toLowerCase();
  const current = (s: AzureFakeSecret): AzureFakeVersion | undefined => s.versions[s.versions.length - 1];
  const attrs = (v: AzureFakeVersion): Record<string, unknown> => ({
    enabled: v.enabled,
    created: v.created,
    updated: v.created,
    recoveryLevel: 'Recoverable+Purgeable',
    recoverableDays: 90,
  });
  const item = (s: AzureFakeSecret, v: AzureFakeVersion, withVersion: boolean): Record<string, unknown> => ({
    id: `${base}/secrets/${s.name}${withVersion ? `/${v.id}` : ''}`,
    attributes: attrs(v),
    tags: v.tags,
    ...(v.contentType ? { contentType: v.contentType } : {}),
  });
  const bundle = (s: AzureFakeSecret, v: AzureFakeVersion): Record<string, unknown> => ({
    value: v.value,
    ...item(s, v, true),
  });
  const page = (items: unknown[], r: RecordedRequest): Reply => {
    const size = Math.min(Number(r.query.get('maxresults') ?? 25) || 25, fake.listPageSize);
    const start = Number(r.query.get('$skiptoken') ?? 0) || 0;
    const next = new URL(`${base}${r.path}`);
    next.searchParams.set('api-version', r.query.get('api-version') ?? '');
    next.searchParams.set('$skiptoken', String(start + size));
    return {
      status: 200,
      body: { value: items.slice(start, start + size), nextLink: start + size < items.length ? next.toString() : null },
    };
  };

  const handler = (r: RecordedRequest): Reply => {
    if (!r.query.get('api-version')) return kverr(400, 'BadParameter', 'api-version is required');
    const auth = String(r.headers.authorization ?? '');
    if (!auth) {
      return {
        status: 401,
        headers: {
          'www-authenticate': `Bearer authorization="https://login.microsoftonline.com/00000000-0000-0000-0000-000000000000", resource="https://vault.azure.net"`,
        },
        body: kverr(401, 'Unauthorized', 'AKV10000: Request is missing a Bearer or PoP token.').body,
      };
    }
    if (auth !== `Bearer ${AZURE_FAKE_TOKEN}`)
      return kverr(401, 'Unauthorized', 'AKV10022: Invalid audience or token.');
    const p = decodeURIComponent(r.path).replace(/\/$/, '');
    if (fake.denied.some((re) => re.test(`${r.method} ${p}`))) {
      return kverr(
        403,
        'Forbidden',
        `Caller is not authorized to perform action on resource. Action: '${r.method} ${p}'`,
        'ForbiddenByRbac',
      );
    }
    const injected = fake.fault?.(r);
    if (injected) return injected;
    const body = r.body ? (JSON.parse(r.body) as Record<string, unknown>) : {};
    let m: RegExpExecArray | null;
    if (p === '/secrets' && r.method === 'GET') {
      const items = [...secrets.values()]
        .filter((s) => !s.deleted && current(s))
        .sort((a, b) => (key(a.name) < key(b.name) ? -1 : 1))
        .map((s) => item(s, current(s)!, false));
      return page(items, r);
    }
    if ((m = /^\/secrets\/([^/]+)\/versions$/.exec(p)) && r.method === 'GET') {
      const s = secrets.get(key(m[1] as string));
      if (!s || s.deleted)
        return kverr(404, 'SecretNotFound', `A secret with (name/id) ${m[1]} was not found in this key vault.`);
      return page(
        s.versions.map((v) => item(s, v, true)),
        r,
      );
    }
    if ((m = /^\/secrets\/([^/]+)$/.exec(p)) && r.method === 'PUT') {
      const name = m[1] as string;
      if (!/^[0-9A-Za-z-]{1,127}$/.test(name))
        return kverr(400, 'BadParameter', 'The request URI contains an invalid name');
      if (typeof body.value !== 'string') return kverr(400, 'BadParameter', 'value is required');
      const tags = (body.tags as Record<string, string>) ?? {};
      if (Object.keys(tags).length > 15 || Object.values(tags).some((v) => v.length > 256))
        return kverr(400, 'BadParameter', 'too many tags or tag value too long');
      let s = secrets.get(key(name));
      if (s?.deleted) {
        return kverr(
          409,
          'Conflict',
          `Secret ${name} is currently in a deleted but recoverable state, and its name cannot be reused; in this state, the secret can only be recovered or purged.`,
          'ObjectIsDeletedButRecoverable',
        );
      }
      if (!s) secrets.set(key(name), (s = { name, versions: [] }));
      const v: AzureFakeVersion = {
        id: randomBytes(16).toString('hex'),
        value: body.value,
        tags,
        enabled: (body.attributes as { enabled?: boolean } | undefined)?.enabled ?? true,
        created: ++clock,
        ...(typeof body.contentType === 'string' ? { contentType: body.contentType } : {}),
      };
      s.versions.push(v);
      return { status: 200, body: bundle(s, v) };
    }
    if ((m = /^\/secrets\/([^/]+)(?:\/([^/]*))?$/.exec(p)) && (r.method === 'GET' || r.method === 'PATCH')) {
      const s = secrets.get(key(m[1] as string));
      const v = s && !s.deleted ? (m[2] ? s.versions.find((x) => x.id === m![2]) : current(s)) : undefined;
      if (!s || !v)
        return kverr(404, 'SecretNotFound', `A secret with (name/id) ${m[1]} was not found in this key vault.`);
      if (r.method === 'PATCH') {
        if (body.tags) v.tags = body.tags as Record<string, string>;
        const a = body.attributes as { enabled?: boolean } | undefined;
        if (a?.enabled !== undefined) v.enabled = a.enabled;
        return { status: 200, body: item(s, v, true) };
      }
      if (!v.enabled)
        return kverr(403, 'Forbidden', 'Operation get is not allowed on a disabled secret.', 'SecretDisabled');
      return { status: 200, body: bundle(s, v) };
    }
    if ((m = /^\/secrets\/([^/]+)$/.exec(p)) && r.method === 'DELETE') {
      const s = secrets.get(key(m[1] as string));
      if (!s || s.deleted) return kverr(404, 'SecretNotFound', 'not found');
      s.deleted = ++clock;
      return {
        status: 200,
        body: { ...item(s, current(s)!, true), recoveryId: `${base}/deletedsecrets/${s.name}`, deletedDate: s.deleted },
      };
    }
    if ((m = /^\/deletedsecrets\/([^/]+)$/.exec(p)) && r.method === 'GET') {
      const s = secrets.get(key(m[1] as string));
      if (!s?.deleted) return kverr(404, 'SecretNotFound', `Deleted Secret not found: ${m[1]}`);
      return {
        status: 200,
        body: { ...item(s, current(s)!, true), recoveryId: `${base}/deletedsecrets/${s.name}`, deletedDate: s.deleted },
      };
    }
    if ((m = /^\/deletedsecrets\/([^/]+)\/recover$/.exec(p)) && r.method === 'POST') {
      const s = secrets.get(key(m[1] as string));
      if (!s?.deleted) return kverr(404, 'SecretNotFound', `Deleted Secret not found: ${m[1]}`);
      delete s.deleted;
      return { status: 200, body: item(s, current(s)!, true) };
    }
    return kverr(400, 'BadParameter', `the fake does not implement ${r.method} ${p}`);
  };
  const server = await startFake(handler, tls);
  base = server.url;
  Object.assign(fake, server, {
    cert: tls.cert,
    secrets,
    fault: undefined,
    denied: [],
    listPageSize: 25,
    softDelete: (name: string) => {
      const s = secrets.get(key(name));
      if (s) s.deleted = ++clock;
    },
  });
  return fake;
}
