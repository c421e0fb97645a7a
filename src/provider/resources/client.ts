// kms_client: an end user of an environment, identified by (env, name). Its keys are kms_key.
import { canonicalCidr } from '../../model/index.js';
import type { Diagnostics } from '../diagnostics.js';
import type { TfObject } from '../values/types.js';
import { check, isObject, known, matches, PROJECT_ENV, splitImportId, type ResourceType } from './types.js';
import { idOf2 } from './template.js';
import { crud } from './crud.js';

export const client: ResourceType = {
  typeName: 'kms_client',
  replaceOn: ['project_env', 'name'],
  validate(config: TfObject, d: Diagnostics) {
    check(d, config, 'project_env', 'Invalid project_env', matches(PROJECT_ENV, '<project>-<type>, e.g. acme-production'));
    check(d, config, 'name', 'Invalid client name', (v) => (String(v).trim() ? undefined : 'must not be empty'));
    check(d, config, 'type', 'Invalid client type', matches(/^[a-z][a-z0-9_-]{0,31}$/, 'a lower-case word, e.g. company'));
    check(d, config, 'metadata', 'Invalid metadata', isObject);
    const ips = config.ip_whitelist;
    if (Array.isArray(ips)) {
      for (const ip of ips) {
        if (!known(ip)) continue;
        try {
          canonicalCidr(String(ip));
        } catch (e) {
          // A set has no index Terraform could point at: the attribute it is.
          d.error('Invalid ip_whitelist entry', (e as Error).message, ['ip_whitelist']);
        }
      }
    }
  },
  planKnown: (p) => ({ id: idOf2(p, 'project_env', 'name') }),
  parseImportId: (id) => {
    const [projectEnv, name] = splitImportId(id, ['project_env', 'name'], 'acme-production/globex');
    return { id, project_env: projectEnv!, name: name! };
  },
  ...crud('client'),
};
