// kms_endpoint: a route of an environment's API, identified by (env, METHOD:/path). The service
// cannot change an endpoint's request or response description in place: those replace it.
import type { WireEndpoint } from '../../api/client.js';
import { ApiError } from '../../api/http.js';
import { methodPath, type DesiredEndpoint, type JsonObject } from '../../model/index.js';
import { appliedDigest, endpointRecord } from '../../model/ownership.js';
import { DiagnosticError, type Diagnostics } from '../diagnostics.js';
import type { ChangeAction, Engine } from '../engine.js';
import { UNKNOWN, isUnknown, type TfObject, type TfValue } from '../values/types.js';
import { handlers, keepObject, keepOptional, userMetadata } from './state.js';
import {
  check,
  ids,
  ImportIdError,
  isObject,
  matches,
  PROJECT_ENV,
  splitImportId,
  str,
  type ResourceType,
} from './types.js';

export const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];

const methodPathOf = (p: TfObject) =>
  isUnknown(p.method) || isUnknown(p.path)
    ? UNKNOWN
    : typeof p.method === 'string' && typeof p.path === 'string'
      ? `${p.method.toUpperCase()}:${p.path}`
      : null;
const objectOf = (v: TfValue | undefined) =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as JsonObject) : undefined;

/**
 * `importing`: the state holds only the identity, and the name and description the service holds
 * are taken; else a name or description the configuration leaves out stays unset, whatever the
 * service fills in (it names an endpoint without a name after its METHOD:/path): not managed, and
 * Terraform must find what it planned.
 */
function toState(s: TfObject, live: WireEndpoint, projectEnv: string, importing = false): TfObject {
  const mp = methodPath(live.method, live.path);
  const stats = (live as { stats?: { total?: number; success?: number; error?: number } }).stats;
  const dates = live as { createdAt?: string; updatedAt?: string };
  return {
    ...s,
    id: `${projectEnv}/${mp}`,
    // The service stores the method upper-case; the configuration's spelling stays.
    method:
      typeof s.method === 'string' && s.method.toUpperCase() === live.method.toUpperCase() ? s.method : live.method,
    path: live.path,
    name: s.name === null && !importing ? null : keepOptional(s.name, live.name, ''),
    description: s.description === null && !importing ? null : keepOptional(s.description, live.description, ''),
    request: keepObject(s.request, live.request as JsonObject | undefined),
    response: keepObject(s.response, live.response as JsonObject | undefined),
    metadata: keepObject(s.metadata, userMetadata(live.metadata)),
    method_path: mp,
    stats: stats
      ? { total: stats.total ?? 0, success: stats.success ?? 0, error: stats.error ?? 0 }
      : (s.stats ?? null),
    created_at: dates.createdAt ?? null,
    updated_at: dates.updatedAt ?? null,
  };
}

function fields(p: TfObject, metadata: JsonObject) {
  const [method, path] = ids(p, 'method', 'path');
  return {
    method: method!.toUpperCase(),
    path: path!,
    ...(str(p.name) !== undefined ? { name: str(p.name)! } : {}),
    ...(str(p.description) !== undefined ? { description: str(p.description)! } : {}),
    ...(objectOf(p.request) ? { request: objectOf(p.request)! } : {}),
    ...(objectOf(p.response) ? { response: objectOf(p.response)! } : {}),
    metadata,
  };
}

/**
 * The endpoint a configuration declares, as the YAML and CDKTF front ends load it (an attribute
 * left out is not managed): what the applied digest (model/ownership.ts) covers.
 */
export function declaredEndpoint(
  config: TfObject,
): Pick<DesiredEndpoint, 'name' | 'description' | 'request' | 'response' | 'metadata'> {
  return {
    ...(str(config.name) !== undefined ? { name: str(config.name)! } : {}),
    ...(str(config.description) !== undefined ? { description: str(config.description)! } : {}),
    ...(objectOf(config.request) ? { request: objectOf(config.request)! } : {}),
    ...(objectOf(config.response) ? { response: objectOf(config.response)! } : {}),
    ...(objectOf(config.metadata) ? { metadata: objectOf(config.metadata)! } : {}),
  };
}

const digestOf = (config: TfObject) => appliedDigest(endpointRecord(declaredEndpoint(config)));

const what = (s: TfObject) => ({
  type: 'kms_endpoint',
  address: `${String(s.project_env)}/${String(s.method).toUpperCase()}:${String(s.path)}`,
});

/** One endpoint, fresh; undefined when it is gone. */
async function liveOf(e: Engine, projectEnv: string, mp: string): Promise<WireEndpoint | undefined> {
  try {
    return await fetchEndpoint(e, projectEnv, mp);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return undefined;
    throw err;
  }
}

/** One endpoint, fresh (after a write): GET /endpoint/{method_path}. */
async function fetchEndpoint(e: Engine, projectEnv: string, mp: string): Promise<WireEndpoint> {
  return e.api.http.request<WireEndpoint>({
    method: 'GET',
    path: `/endpoint/${encodeURIComponent(mp)}`,
    query: { project_env: projectEnv },
    kind: 'get endpoint',
  });
}

export const endpoint: ResourceType = {
  typeName: 'kms_endpoint',
  replaceOn: ['project_env', 'method', 'path', 'request', 'response'],
  changeOnUpdate: ['updated_at'],
  validate(config: TfObject, d: Diagnostics) {
    check(
      d,
      config,
      'project_env',
      'Invalid project_env',
      matches(PROJECT_ENV, '<project>-<type>, e.g. acme-production'),
    );
    check(d, config, 'method', 'Invalid method', (v) =>
      METHODS.includes(String(v).toUpperCase())
        ? undefined
        : `${JSON.stringify(v)} is not one of ${METHODS.join(', ')}`,
    );
    check(d, config, 'path', 'Invalid path', matches(/^\//, 'a route path starting with /'));
    for (const a of ['request', 'response', 'metadata']) check(d, config, a, `Invalid ${a}`, isObject);
  },
  planKnown: (p) => {
    const mp = methodPathOf(p);
    const pe = p.project_env;
    return {
      method_path: mp,
      id: isUnknown(mp) || isUnknown(pe) ? UNKNOWN : mp && typeof pe === 'string' ? `${pe}/${mp}` : null,
    };
  },
  parseImportId: (id) => {
    const [projectEnv, mp] = splitImportId(id, ['project_env', 'METHOD:path'], 'acme-production/GET:/v1/orders');
    const at = mp!.indexOf(':');
    if (at <= 0 || !mp!.slice(at + 1).startsWith('/'))
      throw new ImportIdError(
        `import id ${JSON.stringify(id)}: the endpoint part is not METHOD:/path, e.g. acme-production/GET:/v1/orders`,
      );
    const method = mp!.slice(0, at).toUpperCase();
    return {
      id: `${projectEnv}/${method}:${mp!.slice(at + 1)}`,
      project_env: projectEnv!,
      method,
      path: mp!.slice(at + 1),
    };
  },

  /** A change Terraform plans of an endpoint another configuration owns is refused (the listing of the refresh: no extra read). */
  async guard(e: Engine, prior: TfObject | null, planned: TfObject | null, action: ChangeAction) {
    // A create whose identity exists already: refused when another configuration owns that endpoint.
    const s = prior ?? planned;
    if (!s || typeof s.project_env !== 'string' || typeof s.method !== 'string' || typeof s.path !== 'string') return;
    const live = (await e.endpointOwners(s.project_env)).get(methodPath(s.method, s.path));
    if (live) e.checkChange(what(s), live.metadata as JsonObject | undefined, action);
  },

  async create(e, p, d, config) {
    const [projectEnv, method, path] = ids(p, 'project_env', 'method', 'path');
    // An endpoint of this identity already live (a state that lost it): this configuration's own
    // is adopted and brought to what the configuration says; another's, or one kms-sync did not
    // register, is refused (import it).
    const existing = await liveOf(e, projectEnv!, methodPath(method!, path!));
    if (existing) {
      const o = e.checkChange(what(p), existing.metadata as JsonObject | undefined, 'create');
      if (o.kind !== 'ours') {
        throw new DiagnosticError(
          'Already exists',
          `${what(p).type} ${what(p).address} already exists in the service and ${o.kind === 'legacy' ? 'was made by kms-sync before owners were recorded' : 'was not registered by kms-sync'}, ` +
            `so terraform-provider-kms does not take it over by creating it. Import it to manage it here: terraform import <address> ${what(p).address} (or an import block).`,
          ['path'],
        );
      }
      const state = await endpoint.update(
        e,
        toState({ ...p, name: null, description: null }, existing, projectEnv!, true),
        p,
        config,
      );
      d?.warning(
        'Existing endpoint adopted',
        `${what(p).address} was already live and owned by this configuration but tracked by no state (terraform state rm, or a lost or restored state): it is this resource again, updated to the configuration.`,
      );
      return state;
    }
    const f = fields(p, e.managedMetadata(objectOf(p.metadata), p.protected === true, digestOf(config ?? p)));
    const { endpoints } = await handlers();
    await e.change(undefined, projectEnv!, (ctx) => endpoints.createEndpoints(ctx, projectEnv!, [f]));
    e.forget('endpoint', projectEnv!);
    return toState(p, await fetchEndpoint(e, projectEnv!, methodPath(f.method, f.path)), projectEnv!);
  },

  async read(e, s, importing) {
    const [projectEnv, method, path] = ids(s, 'project_env', 'method', 'path');
    const live = (await e.endpointsOf(projectEnv!)).get(methodPath(method!, path!));
    return live ? toState(s, live, projectEnv!, importing) : null;
  },

  async update(e, prior, planned, config) {
    const [projectEnv, method, path] = ids(planned, 'project_env', 'method', 'path');
    const mp = methodPath(method!, path!);
    const live = await fetchEndpoint(e, projectEnv!, mp);
    e.checkChange(what(prior), live.metadata as JsonObject | undefined, 'update');
    // Markers as `plan` writes them: this configuration's owner and the digest of what it applies
    // (a legacy endpoint is claimed), kept as found on an endpoint someone else registered.
    const f = fields(
      planned,
      e.updatedMetadata(
        objectOf(planned.metadata) ?? {},
        planned.protected === true,
        live.metadata as JsonObject | undefined,
        digestOf(config ?? planned),
      ),
    );
    const { endpoints } = await handlers();
    const changed = new Set(
      ['name', 'description'].filter((a) => JSON.stringify(prior[a]) !== JSON.stringify(planned[a])),
    );
    changed.add('metadata');
    await e.change(undefined, projectEnv!, (ctx) => endpoints.updateEndpoint(ctx, projectEnv!, f, changed));
    e.forget('endpoint', projectEnv!);
    return toState(planned, await fetchEndpoint(e, projectEnv!, mp), projectEnv!);
  },

  async delete(e, prior) {
    const [projectEnv, method, path] = ids(prior, 'project_env', 'method', 'path');
    const live = await liveOf(e, projectEnv!, methodPath(method!, path!));
    if (!live) return; // gone already
    e.checkChange(what(prior), live.metadata as JsonObject | undefined, 'delete');
    const { endpoints } = await handlers();
    await e.change(undefined, projectEnv!, (ctx) => endpoints.deleteEndpoint(ctx, projectEnv!, method!, path!));
    e.forget('endpoint', projectEnv!);
  },
};
