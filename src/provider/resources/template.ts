// kms_template: a plan of an environment (rate limit, client maximum), identified by (env, name).
import type { Diagnostics } from '../diagnostics.js';
import { UNKNOWN, isUnknown, type TfObject } from '../values/types.js';
import { check, matches, PROJECT_ENV, splitImportId, type ResourceType } from './types.js';
import { crud } from './crud.js';

export const idOf2 = (p: TfObject, a: string, b: string) =>
  isUnknown(p[a]) || isUnknown(p[b]) ? UNKNOWN : typeof p[a] === 'string' && typeof p[b] === 'string' ? `${p[a]}/${p[b]}` : null;

const wholeNumber = (min: number) => (v: unknown) => (typeof v === 'number' && Number.isInteger(v) && v >= min ? undefined : `must be a whole number >= ${min}, got ${String(v)}`);

export const template: ResourceType = {
  typeName: 'kms_template',
  replaceOn: ['project_env', 'name'],
  validate(config: TfObject, d: Diagnostics) {
    check(d, config, 'project_env', 'Invalid project_env', matches(PROJECT_ENV, '<project>-<type>, e.g. acme-production'));
    check(d, config, 'name', 'Invalid template name', (v) => (String(v).trim() ? undefined : 'must not be empty'));
    check(d, config, 'rate_limit_day', 'Invalid rate_limit_day', wholeNumber(0));
    check(d, config, 'max_clients', 'Invalid max_clients', wholeNumber(1));
  },
  planKnown: (p) => ({ id: idOf2(p, 'project_env', 'name') }),
  parseImportId: (id) => {
    const [projectEnv, name] = splitImportId(id, ['project_env', 'name'], 'acme-production/gold');
    return { id, project_env: projectEnv!, name: name! };
  },
  ...crud('template'),
};
