// kms_endpoint: a route of an environment's API, identified by (env, METHOD:/path). The service
// cannot change an endpoint's request or response description in place: those replace it.
import type { Diagnostics } from '../diagnostics.js';
import { UNKNOWN, isUnknown, type TfObject } from '../values/types.js';
import { check, isObject, matches, PROJECT_ENV, splitImportId, ImportIdError, type ResourceType } from './types.js';
import { crud } from './crud.js';

export const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];

const methodPathOf = (p: TfObject) =>
  isUnknown(p.method) || isUnknown(p.path) ? UNKNOWN : typeof p.method === 'string' && typeof p.path === 'string' ? `${p.method.toUpperCase()}:${p.path}` : null;

export const endpoint: ResourceType = {
  typeName: 'kms_endpoint',
  replaceOn: ['project_env', 'method', 'path', 'request', 'response'],
  changeOnUpdate: ['updated_at'],
  validate(config: TfObject, d: Diagnostics) {
    check(d, config, 'project_env', 'Invalid project_env', matches(PROJECT_ENV, '<project>-<type>, e.g. acme-production'));
    check(d, config, 'method', 'Invalid method', (v) => (METHODS.includes(String(v).toUpperCase()) ? undefined : `${JSON.stringify(v)} is not one of ${METHODS.join(', ')}`));
    check(d, config, 'path', 'Invalid path', matches(/^\//, 'a route path starting with /'));
    for (const a of ['request', 'response', 'metadata']) check(d, config, a, `Invalid ${a}`, isObject);
  },
  planKnown: (p) => {
    const mp = methodPathOf(p);
    const pe = p.project_env;
    return { method_path: mp, id: isUnknown(mp) || isUnknown(pe) ? UNKNOWN : mp && typeof pe === 'string' ? `${pe}/${mp}` : null };
  },
  parseImportId: (id) => {
    const [projectEnv, mp] = splitImportId(id, ['project_env', 'METHOD:path'], 'acme-production/GET:/v1/orders');
    const at = mp!.indexOf(':');
    if (at <= 0 || !mp!.slice(at + 1).startsWith('/')) throw new ImportIdError(`import id ${JSON.stringify(id)}: the endpoint part is not METHOD:/path, e.g. acme-production/GET:/v1/orders`);
    const method = mp!.slice(0, at).toUpperCase();
    return { id: `${projectEnv}/${method}:${mp!.slice(at + 1)}`, project_env: projectEnv!, method, path: mp!.slice(at + 1) };
  },
  ...crud('endpoint'),
};
