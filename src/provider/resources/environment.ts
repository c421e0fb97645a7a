// kms_environment: an environment of a project, identified by `<project>-<type>`.
import type { Diagnostics } from '../diagnostics.js';
import { UNKNOWN, isUnknown, type TfObject } from '../values/types.js';
import { check, ENV_TYPE, matches, PROJECT_SLUG, splitImportId, ImportIdError, type ResourceType } from './types.js';
import { crud } from './crud.js';

const projectEnvOf = (p: TfObject) => (isUnknown(p.project) || isUnknown(p.type) ? UNKNOWN : typeof p.project === 'string' && typeof p.type === 'string' ? `${p.project}-${p.type}` : null);

export const environment: ResourceType = {
  typeName: 'kms_environment',
  replaceOn: ['project', 'type'],
  validate(config: TfObject, d: Diagnostics) {
    check(d, config, 'project', 'Invalid project slug', matches(PROJECT_SLUG, 'a project slug, e.g. acme'));
    check(d, config, 'type', 'Invalid environment type', matches(ENV_TYPE, '1-20 lower-case letters or digits starting with a letter, e.g. production'));
    check(d, config, 'url', 'Invalid url', (v) => {
      try {
        new URL(String(v));
        return undefined;
      } catch {
        return `${JSON.stringify(v)} is not a URL, e.g. https://api.acme.example`;
      }
    });
  },
  planKnown: (p) => ({ id: projectEnvOf(p), project_env: projectEnvOf(p) }),
  parseImportId: (id) => {
    const [projectEnv] = splitImportId(id, ['project_env'], 'acme-production');
    // The type is the part after the last hyphen: slugs may hold hyphens, types may not.
    const at = projectEnv!.lastIndexOf('-');
    if (at <= 0) throw new ImportIdError(`import id ${JSON.stringify(id)} is not <project>-<type>, e.g. acme-production`);
    return { id: projectEnv!, project_env: projectEnv!, project: projectEnv!.slice(0, at), type: projectEnv!.slice(at + 1) };
  },
  ...crud('env'),
};
