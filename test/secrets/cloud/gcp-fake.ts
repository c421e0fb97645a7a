// A local GCP Secret Manager speaking the REST v1 surface the official client's HTTP/1.1 transport
// uses: projects/*/secrets (list, create), secrets/* (get, patch), secrets/*:addVersion,
// secrets/*/versions/latest (get) and versions/latest:access. Errors use Google's JSON error shape.
// Every call must carry a Bearer token; when a public key is given, the token must be a JWT signed
// by it (the self-signed JWT a service account produces), checked with node:crypto.
import { createVerify, type KeyObject } from 'node:crypto';
import { crc32c } from '../../../src/secrets/backends/cloud-names.js';
import { startFake, type FakeServer, type RecordedRequest, type Reply } from './fake-http.js';

export interface GcpFakeVersion {
  id: number;
  data: Buffer;
  state: 'ENABLED' | 'DISABLED' | 'DESTROYED';
  createTime: string;
}

export interface GcpFakeSecret {
  name: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  replication: unknown;
  createTime: string;
  versions: GcpFakeVersion[];
}

export interface GcpFake extends FakeServer {
  project: string;
  secrets: Map<string, GcpFakeSecret>;
  fault: ((req: RecordedRequest) => Reply | undefined) | undefined;
  /** Paths (regex on "METHOD path") answered with 403 PERMISSION_DENIED. */
  denied: RegExp[];
  listPageSize: number;
  /** Verified JWT claims of the last request. */
  lastClaims: Record<string, unknown> | undefined;
}

const STATUS: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  409: 'ALREADY_EXISTS',
  500: 'INTERNAL',
};
export const gerr = (code: number, message: string): Reply => ({
  status: code,
  body: { error: { code, message, status: STATUS[code] ?? 'UNKNOWN' } },
});

export async function startGcpFake(project: string, publicKey?: KeyObject): Promise<GcpFake> {
  const secrets = new Map<string, GcpFakeSecret>();
  let tick = 0;
  const ts = (): string => new Date(Date.UTC(2026, 0, 1) + ++tick * 1000).toISOString();
  const fake = {} as GcpFake;
  const view = (s: GcpFakeSecret): Record<string, unknown> => ({
    name: `projects/${project}/secrets/${s.name}`,
    replication: s.replication,
    createTime: s.createTime,
    labels: s.labels,
    annotations: s.annotations,
    etag: `"${tick}"`,
  });
  const versionView = (s: GcpFakeSecret, v: GcpFakeVersion): Record<string, unknown> => ({
    name: `projects/${project}/secrets/${s.name}/versions/${v.id}`,
    createTime: v.createTime,
    state: v.state,
  });
  const latest = (s: GcpFakeSecret): GcpFakeVersion | undefined =>
    [...s.versions].reverse().find((v) => v.state !== 'DESTROYED');

  const checkAuth = (r: RecordedRequest): Reply | undefined => {
    const m = /^Bearer (\S+)$/.exec(String(r.headers.authorization ?? ''));
    if (!m) return gerr(401, 'Request is missing required authentication credential.');
    if (!publicKey) return undefined;
    const [h, p, sig] = (m[1] as string).split('.');
    if (!h || !p || !sig) return gerr(401, 'not a JWT');
    const header = JSON.parse(Buffer.from(h, 'base64url').toString()) as { alg?: string };
    const ok =
      header.alg === 'RS256' &&
      createVerify('RSA-SHA256').update(`${h}.${p}`).verify(publicKey, Buffer.from(sig, 'base64url'));
    if (!ok) return gerr(401, 'invalid JWT signature');
    fake.lastClaims = JSON.parse(Buffer.from(p, 'base64url').toString()) as Record<string, unknown>;
    return undefined;
  };

  const handler = (r: RecordedRequest): Reply => {
    const auth = checkAuth(r);
    if (auth) return auth;
    const p = decodeURIComponent(r.path);
    if (fake.denied.some((re) => re.test(`${r.method} ${p}`)))
      return gerr(403, `Permission denied on resource ${p} (or it may not exist).`);
    const injected = fake.fault?.(r);
    if (injected) return injected;
    const base = `/v1/projects/${project}/secrets`;
    if (!p.startsWith(base)) return gerr(404, `unknown path ${p}`);
    const rest = p.slice(base.length);
    const body = r.body ? (JSON.parse(r.body) as Record<string, unknown>) : {};
    let m: RegExpExecArray | null;
    if (rest === '' && r.method === 'GET') {
      const filter = r.query.get('filter') ?? '';
      const fm = /^name:(\S+)$/.exec(filter);
      if (filter && !fm) return gerr(400, `the fake only understands name: filters, got ${filter}`);
      const all = [...secrets.values()]
        .filter((s) => !fm || s.name.includes(fm[1] as string))
        .sort((a, b) => (a.name < b.name ? -1 : 1));
      const size = Math.min(Number(r.query.get('pageSize') ?? 25) || 25, fake.listPageSize);
      const start = Number(r.query.get('pageToken') ?? 0) || 0;
      const next = start + size < all.length ? String(start + size) : undefined;
      return {
        status: 200,
        body: {
          secrets: all.slice(start, start + size).map(view),
          totalSize: all.length,
          ...(next ? { nextPageToken: next } : {}),
        },
      };
    }
    if (rest === '' && r.method === 'POST') {
      const id = r.query.get('secretId') ?? '';
      if (!/^[A-Za-z0-9_-]{1,255}$/.test(id)) return gerr(400, 'invalid secretId');
      if (secrets.has(id)) return gerr(409, `Secret [projects/${project}/secrets/${id}] already exists.`);
      if (!body.replication || typeof body.replication !== 'object') return gerr(400, 'replication is required');
      const s: GcpFakeSecret = {
        name: id,
        labels: (body.labels as Record<string, string>) ?? {},
        annotations: (body.annotations as Record<string, string>) ?? {},
        replication: body.replication,
        createTime: ts(),
        versions: [],
      };
      for (const [k, v] of Object.entries(s.labels))
        if (!/^[a-z][a-z0-9_-]{0,62}$/.test(k) || !/^[a-z0-9_-]{0,63}$/.test(v)) return gerr(400, `invalid label ${k}`);
      secrets.set(id, s);
      return { status: 200, body: view(s) };
    }
    if ((m = /^\/([A-Za-z0-9_-]+)$/.exec(rest))) {
      const s = secrets.get(m[1] as string);
      if (!s) return gerr(404, `Secret [projects/${project}/secrets/${m[1]}] not found.`);
      if (r.method === 'GET') return { status: 200, body: view(s) };
      if (r.method === 'PATCH') {
        const mask = (r.query.get('updateMask') ?? '').split(',').filter(Boolean);
        if (mask.length === 0) return gerr(400, 'updateMask is required');
        for (const f of mask) {
          if (f === 'annotations') s.annotations = (body.annotations as Record<string, string>) ?? {};
          else if (f === 'labels') s.labels = (body.labels as Record<string, string>) ?? {};
          else return gerr(400, `the fake cannot update ${f}`);
        }
        for (const k of Object.keys(s.annotations))
          if (!/^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/.test(k))
            return gerr(400, `invalid annotation key ${k}`);
        for (const [k, v] of Object.entries(s.labels))
          if (!/^[a-z][a-z0-9_-]{0,62}$/.test(k) || !/^[a-z0-9_-]{0,63}$/.test(v))
            return gerr(400, `invalid label ${k}`);
        // Documented limit: annotation keys and values together under 16 KiB.
        if (
          Object.entries(s.annotations).reduce((n, [k, v]) => n + Buffer.byteLength(k) + Buffer.byteLength(v), 0) >
          16 * 1024
        )
          return gerr(400, 'annotations too large');
        return { status: 200, body: view(s) };
      }
    }
    if ((m = /^\/([A-Za-z0-9_-]+):addVersion$/.exec(rest)) && r.method === 'POST') {
      const s = secrets.get(m[1] as string);
      if (!s) return gerr(404, `Secret [projects/${project}/secrets/${m[1]}] not found or has no versions.`);
      const payload = body.payload as { data?: string; dataCrc32c?: string } | undefined;
      if (!payload?.data) return gerr(400, 'payload.data is required');
      const data = Buffer.from(payload.data, 'base64');
      if (payload.dataCrc32c !== undefined && Number(payload.dataCrc32c) !== crc32c(data))
        return gerr(400, 'Checksum mismatch');
      const v: GcpFakeVersion = { id: s.versions.length + 1, data, state: 'ENABLED', createTime: ts() };
      s.versions.push(v);
      return { status: 200, body: versionView(s, v) };
    }
    if ((m = /^\/([A-Za-z0-9_-]+)\/versions\/(latest|\d+)(:access)?$/.exec(rest)) && r.method === 'GET') {
      const s = secrets.get(m[1] as string);
      const v = s && (m[2] === 'latest' ? latest(s) : s.versions.find((x) => String(x.id) === m![2]));
      if (!s || !v)
        return gerr(404, `Secret Version [projects/${project}/secrets/${m[1]}/versions/${m[2]}] not found.`);
      if (!m[3]) return { status: 200, body: versionView(s, v) };
      if (v.state !== 'ENABLED')
        return {
          status: 400,
          body: { error: { code: 400, message: 'Secret version is disabled.', status: 'FAILED_PRECONDITION' } },
        };
      return {
        status: 200,
        body: {
          name: `projects/${project}/secrets/${s.name}/versions/${v.id}`,
          payload: { data: v.data.toString('base64'), dataCrc32c: String(crc32c(v.data)) },
        },
      };
    }
    return gerr(404, `the fake does not implement ${r.method} ${p}`);
  };
  const server = await startFake(handler);
  Object.assign(fake, server, {
    project,
    secrets,
    fault: undefined,
    denied: [],
    listPageSize: 250,
    lastClaims: undefined,
  });
  return fake;
}
