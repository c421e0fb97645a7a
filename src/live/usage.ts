// Usage context for a reviewer: per-endpoint stats (from the endpoint list) and error rates per
// endpoint, client and key from a bounded sample of the most recent logs of each environment.
// Cost per environment with resources to describe: at most `endpointPages` + `logPages` requests.
import type { KmsClient, WireEndpoint, WireLog, WirePage } from '../api/client.js';
import { endpointShape, pageOf } from '../api/shapes.js';
import { address, groupBy, type LiveState, type ResourceKind } from '../model/index.js';

export interface UsageTarget {
  address: string;
  kind: ResourceKind;
  projectEnv: string | null;
}

export interface EndpointStats {
  total: number;
  success: number;
  error: number;
}

export interface RecentUsage {
  calls: number;
  errors: number;
  /** errors / calls, null without calls. */
  errorRate: number | null;
  lastSeen: string | null;
}

export interface ResourceUsage {
  endpointStats?: EndpointStats;
  recent?: RecentUsage;
}

export interface UsageWindow {
  projectEnv: string;
  logsSampled: number;
  oldest: string | null;
  newest: string | null;
  complete: boolean;
}

export interface UsageContext {
  byAddress: Record<string, ResourceUsage>;
  windows: UsageWindow[];
  /** Requests made to gather it. */
  requests: number;
}

export interface UsageOptions {
  /** Log pages read per environment (most recent first). */
  logPages?: number;
  /** Endpoint-list pages read per environment. */
  endpointPages?: number;
  pageSize?: number;
}

type StatsEndpoint = WireEndpoint & { stats?: Partial<EndpointStats>; method_path?: string };

const DESCRIBED: ReadonlySet<ResourceKind> = new Set(['client', 'key', 'endpoint']);

class Tally {
  calls = 0;
  errors = 0;
  lastSeen: string | null = null;
  add(log: WireLog) {
    this.calls++;
    if (log.status === 'error') this.errors++;
    if (log.timestamp && (!this.lastSeen || log.timestamp > this.lastSeen)) this.lastSeen = log.timestamp;
  }
  view(): RecentUsage {
    return {
      calls: this.calls,
      errors: this.errors,
      errorRate: this.calls ? Math.round((this.errors / this.calls) * 1000) / 1000 : null,
      lastSeen: this.lastSeen,
    };
  }
}

function tally<K>(map: Map<K, Tally>, key: K, log: WireLog) {
  let t = map.get(key);
  if (!t) map.set(key, (t = new Tally()));
  t.add(log);
}

/** Parses `endpoint.<env>/<METHOD:/path>`, `client.<env>/<name>`, `key.<env>/<client>/<name>`. */
function parts(addr: string): string[] {
  return addr.slice(addr.indexOf('.') + 1).split('/');
}

export async function collectUsage(
  api: KmsClient,
  state: LiveState,
  targets: readonly UsageTarget[],
  o: UsageOptions = {},
): Promise<UsageContext> {
  const logPages = o.logPages ?? 2;
  const endpointPages = o.endpointPages ?? 2;
  const limit = Math.min(100, o.pageSize ?? 100);
  const byEnv = groupBy(
    targets.filter((t) => t.projectEnv && DESCRIBED.has(t.kind)),
    (t) => t.projectEnv!,
  );
  const liveEnvs = new Set(state.envs.map((e) => e.projectEnv));
  const clientIds = new Map(state.clients.map((c) => [address.client(c.projectEnv, c.name), c.id]));
  const out: UsageContext = { byAddress: {}, windows: [], requests: 0 };

  await Promise.all(
    [...byEnv]
      .filter(([pe]) => liveEnvs.has(pe))
      .map(async ([pe, list]) => {
        // Endpoint stats, only when an endpoint is among the resources described.
        const stats = new Map<string, EndpointStats>();
        if (list.some((t) => t.kind === 'endpoint')) {
          for (let page = 1; page <= endpointPages; page++) {
            out.requests++;
            // The documented page envelope is checked here too: `{}` from a wrong URL is not "no stats".
            const r = await api.http.request<WirePage<StatsEndpoint>>({
              method: 'GET',
              path: '/endpoint',
              query: { project_env: pe, page, limit },
              kind: 'list endpoints',
              expect: pageOf(endpointShape),
            });
            for (const e of r.data ?? []) {
              const mp = e.method_path ?? `${e.method.toUpperCase()}:${e.path}`;
              if (e.stats)
                stats.set(mp, { total: e.stats.total ?? 0, success: e.stats.success ?? 0, error: e.stats.error ?? 0 });
            }
            if ((r.data ?? []).length < limit || page >= (r.pagination?.pages ?? Infinity)) break;
          }
        }
        // Recent logs.
        const byPath = new Map<string, Tally>();
        const byClient = new Map<string, Tally>();
        const byKey = new Map<string, Tally>();
        let sampled = 0;
        let oldest: string | null = null;
        let newest: string | null = null;
        let complete = false;
        for (let page = 1; page <= logPages; page++) {
          out.requests++;
          const r = await api.listLogs(pe, { page, limit });
          const data = r.data ?? [];
          for (const log of data) {
            sampled++;
            if (log.timestamp) {
              if (!oldest || log.timestamp < oldest) oldest = log.timestamp;
              if (!newest || log.timestamp > newest) newest = log.timestamp;
            }
            if (log.method_path) tally(byPath, log.method_path, log);
            if (log.clientId) {
              tally(byClient, log.clientId, log);
              if (log.name) tally(byKey, `${log.clientId}\u0000${log.name}`, log);
            }
          }
          if (data.length < limit || page >= (r.pagination?.pages ?? Infinity)) {
            complete = true;
            break;
          }
        }
        out.windows.push({ projectEnv: pe, logsSampled: sampled, oldest, newest, complete });

        for (const t of list) {
          const u: ResourceUsage = {};
          if (t.kind === 'endpoint') {
            const mp = parts(t.address).slice(1).join('/');
            const s = stats.get(mp);
            if (s) u.endpointStats = s;
            const recent = byPath.get(mp);
            if (recent) u.recent = recent.view();
          } else if (t.kind === 'client') {
            const id = clientIds.get(t.address);
            const recent = id ? byClient.get(id) : undefined;
            if (id) u.recent = recent?.view() ?? new Tally().view();
          } else if (t.kind === 'key') {
            const [, client, name] = parts(t.address);
            const id = client !== undefined ? clientIds.get(address.client(pe, client)) : undefined;
            if (id && name !== undefined) u.recent = byKey.get(`${id}\u0000${name}`)?.view() ?? new Tally().view();
          }
          if (u.endpointStats || u.recent) out.byAddress[t.address] = u;
        }
      }),
  );
  out.windows.sort((a, b) => (a.projectEnv < b.projectEnv ? -1 : 1));
  return out;
}
