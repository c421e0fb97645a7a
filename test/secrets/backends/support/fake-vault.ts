// A fake Vault/OpenBao implementing the KV version 2 HTTP API the way the real server documents it:
// versions, check-and-set (400 "check-and-set parameter did not match the current version"),
// custom_metadata, soft delete, LIST (GET ?list=true), sys/capabilities-self with glob policies,
// sys/internal/ui/mounts, X-Vault-Token auth (403 "permission denied") and namespaces.
import {
  selfSignedTls,
  startRecordingServer,
  type Recorded,
  type RecordingServer,
  type Reply,
} from './recording-server.js';

interface Version {
  data: Record<string, unknown>;
  created_time: string;
  deletion_time: string;
  destroyed: boolean;
}

interface Entry {
  versions: Version[];
  custom_metadata: Record<string, string> | null;
  created_time: string;
  updated_time: string;
}

export interface FakeVaultOptions {
  token: string;
  mount?: string;
  /** Required X-Vault-Namespace (requests with another namespace see an empty server). */
  namespace?: string;
  /** Policy: path glob (`secret/data/kms/*`) → capabilities. Default: everything allowed. */
  policy?: Record<string, string[]>;
  /** KV version of the mount (1 answers mount checks as version 1). */
  kvVersion?: 1 | 2;
  /** Runs before a data write is decided (after the body is read): lets tests interleave writers. */
  beforeDataWrite?: (path: string, cas: number | undefined) => Promise<void> | void;
  /** Runs after a data write is stored, before it is answered: lets a test land another write in between. */
  afterDataWrite?: (path: string, version: number) => Promise<void> | void;
  /** Serve HTTPS with a self-signed certificate (its PEM file is `caFile`). */
  tls?: boolean;
}

export interface FakeVault {
  caFile: string | undefined;
  server: RecordingServer;
  url: string;
  requests: Recorded[];
  /** Stored entries by path under the mount (decoded). */
  entries: Map<string, Entry>;
  currentValue(path: string): unknown;
  close(): Promise<void>;
}

const now = (): string => new Date().toISOString();

function globMatch(glob: string, path: string): boolean {
  if (glob.endsWith('*')) return path.startsWith(glob.slice(0, -1));
  return glob === path;
}

export async function startFakeVault(o: FakeVaultOptions): Promise<FakeVault> {
  const mount = o.mount ?? 'secret';
  const entries = new Map<string, Entry>();
  const caps = (path: string): string[] => {
    if (!o.policy) return ['create', 'read', 'update', 'delete', 'list'];
    // Longest matching glob wins (Vault's priority rules, simplified).
    const hits = Object.keys(o.policy)
      .filter((g) => globMatch(g, path))
      .sort((a, b) => b.length - a.length);
    return hits.length ? o.policy[hits[0]!]! : ['deny'];
  };
  const allowed = (path: string, cap: string): boolean => caps(path).includes(cap);
  const denied: Reply = { status: 403, body: { errors: ['1 error occurred:\n\t* permission denied\n\n'] } };

  const handler = async (r: Recorded): Promise<Reply> => {
    if (r.headers['x-vault-token'] !== o.token) return denied;
    if (o.namespace !== undefined && r.headers['x-vault-namespace'] !== o.namespace)
      return { status: 404, body: { errors: [] } };
    const segs = r.rawPath
      .split('/')
      .slice(1)
      .map((s) => decodeURIComponent(s));
    if (segs[0] !== 'v1') return { status: 404, body: { errors: [] } };
    const rest = segs.slice(1);
    const full = rest.join('/');
    if (r.method === 'POST' && full === 'sys/capabilities-self') {
      const paths = (r.json as { paths?: string[] }).paths ?? [];
      const out: Record<string, unknown> = {};
      for (const p of paths) out[p] = caps(p);
      if (paths.length === 1) out.capabilities = caps(paths[0]!);
      return { status: 200, body: { ...out, data: out } };
    }
    if (r.method === 'GET' && full.startsWith('sys/internal/ui/mounts/')) {
      const m = full.slice('sys/internal/ui/mounts/'.length);
      if (m !== mount)
        return {
          status: 403,
          body: {
            errors: [
              'preflight capability check returned 403, please ensure client\'s policies grant access to path "' +
                m +
                '/"',
            ],
          },
        };
      return {
        status: 200,
        body: { data: { path: `${mount}/`, type: 'kv', options: { version: String(o.kvVersion ?? 2) } } },
      };
    }
    if (rest[0] !== mount)
      return { status: 404, body: { errors: [`no handler for route "${full}". route entry not found.`] } };
    const kind = rest[1];
    const trailingSlash = r.rawPath.endsWith('/');
    const path = rest
      .slice(2)
      .filter((s, i, a) => !(i === a.length - 1 && s === ''))
      .join('/');
    const policyPath = `${mount}/${kind}/${path}`;
    if (kind === 'metadata') {
      if (r.method === 'GET' && (r.query.get('list') === 'true' || trailingSlash)) {
        if (r.query.get('list') !== 'true') return { status: 405, body: { errors: [] } };
        if (!allowed(policyPath.replace(/\/?$/, '/'), 'list') && !allowed(policyPath, 'list')) return denied;
        const base = path === '' ? '' : `${path}/`;
        const keys = new Set<string>();
        for (const [p, e] of entries) {
          if (!p.startsWith(base) || e.versions.length === 0) continue;
          const tail = p.slice(base.length);
          const slash = tail.indexOf('/');
          keys.add(slash < 0 ? tail : tail.slice(0, slash + 1));
        }
        if (keys.size === 0) return { status: 404, body: { errors: [] } };
        return { status: 200, body: { data: { keys: [...keys].sort() } } };
      }
      if (r.method === 'GET') {
        if (!allowed(policyPath, 'read')) return denied;
        const e = entries.get(path);
        if (!e) return { status: 404, body: { errors: [] } };
        const versions: Record<string, unknown> = {};
        for (const [i, v] of e.versions.entries())
          versions[String(i + 1)] = {
            created_time: v.created_time,
            deletion_time: v.deletion_time,
            destroyed: v.destroyed,
          };
        return {
          status: 200,
          body: {
            data: {
              cas_required: false,
              created_time: e.created_time,
              current_version: e.versions.length,
              custom_metadata: e.custom_metadata,
              delete_version_after: '0s',
              max_versions: 0,
              oldest_version: 0,
              updated_time: e.updated_time,
              versions,
            },
          },
        };
      }
      if (r.method === 'POST' || r.method === 'PUT') {
        const e = entries.get(path);
        if (!allowed(policyPath, e ? 'update' : 'create')) return denied;
        const cm = (r.json as { custom_metadata?: Record<string, unknown> } | undefined)?.custom_metadata;
        if (cm !== undefined) {
          if (typeof cm !== 'object' || cm === null)
            return { status: 400, body: { errors: ['custom_metadata must be a map'] } };
          for (const [k, v] of Object.entries(cm)) {
            if (typeof v !== 'string')
              return { status: 400, body: { errors: [`custom_metadata values must be strings: ${k}`] } };
            if (k.length > 128 || v.length > 512)
              return { status: 400, body: { errors: ['custom_metadata key or value too long'] } };
          }
          if (Object.keys(cm).length > 64) return { status: 400, body: { errors: ['too many custom_metadata keys'] } };
        }
        const entry = e ?? { versions: [], custom_metadata: null, created_time: now(), updated_time: now() };
        if (cm !== undefined) entry.custom_metadata = cm as Record<string, string>;
        entry.updated_time = now();
        entries.set(path, entry);
        return { status: 204 };
      }
      if (r.method === 'DELETE') {
        if (!allowed(policyPath, 'delete')) return denied;
        entries.delete(path);
        return { status: 204 };
      }
    }
    if (kind === 'data') {
      if (r.method === 'GET') {
        if (!allowed(policyPath, 'read')) return denied;
        const e = entries.get(path);
        const v = e?.versions[e.versions.length - 1];
        if (!e || !v) return { status: 404, body: { errors: [] } };
        const meta = {
          created_time: v.created_time,
          custom_metadata: e.custom_metadata,
          deletion_time: v.deletion_time,
          destroyed: v.destroyed,
          version: e.versions.length,
        };
        if (v.deletion_time !== '' || v.destroyed)
          return { status: 404, body: { data: { data: null, metadata: meta } } };
        return { status: 200, body: { data: { data: v.data, metadata: meta } } };
      }
      if (r.method === 'POST' || r.method === 'PUT') {
        if (r.headers['content-type'] !== 'application/json')
          return { status: 400, body: { errors: ['unsupported content type'] } };
        const b = r.json as { options?: { cas?: unknown }; data?: unknown } | undefined;
        if (!b || typeof b.data !== 'object' || b.data === null)
          return { status: 400, body: { errors: ['no data provided'] } };
        const cas = b.options?.cas;
        if (cas !== undefined && typeof cas !== 'number')
          return { status: 400, body: { errors: ['cas must be an integer'] } };
        await o.beforeDataWrite?.(path, cas);
        const e = entries.get(path);
        if (!allowed(policyPath, e?.versions.length ? 'update' : 'create')) return denied;
        const current = e?.versions.length ?? 0;
        if (cas !== undefined && cas !== current) {
          return { status: 400, body: { errors: ['check-and-set parameter did not match the current version'] } };
        }
        const entry = e ?? { versions: [], custom_metadata: null, created_time: now(), updated_time: now() };
        const v: Version = {
          data: b.data as Record<string, unknown>,
          created_time: now(),
          deletion_time: '',
          destroyed: false,
        };
        entry.versions.push(v);
        entry.updated_time = v.created_time;
        entries.set(path, entry);
        const written = entry.versions.length;
        await o.afterDataWrite?.(path, written);
        return {
          status: 200,
          body: {
            data: {
              created_time: v.created_time,
              custom_metadata: entry.custom_metadata,
              deletion_time: '',
              destroyed: false,
              version: written,
            },
          },
        };
      }
      if (r.method === 'DELETE') {
        if (!allowed(policyPath, 'delete')) return denied;
        const e = entries.get(path);
        const v = e?.versions[e.versions.length - 1];
        if (v) v.deletion_time = now();
        return { status: 204 };
      }
    }
    return { status: 405, body: { errors: [] } };
  };
  const tls = o.tls ? selfSignedTls() : undefined;
  const server = await startRecordingServer(handler, tls);
  return {
    caFile: tls?.caFile,
    server,
    url: server.url,
    requests: server.requests,
    entries,
    currentValue: (path) => {
      const e = entries.get(path);
      const v = e?.versions[e.versions.length - 1];
      return v && v.deletion_time === '' ? v.data.value : undefined;
    },
    close: () => server.close(),
  };
}
