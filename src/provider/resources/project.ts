// kms_project: a project, identified by its slug.
import type { Diagnostics } from '../diagnostics.js';
import type { TfObject } from '../values/types.js';
import { check, matches, PROJECT_SLUG, splitImportId, type ResourceType } from './types.js';
import { crud } from './crud.js';

export const project: ResourceType = {
  typeName: 'kms_project',
  replaceOn: ['slug'],
  validate(config: TfObject, d: Diagnostics) {
    check(d, config, 'slug', 'Invalid project slug', matches(PROJECT_SLUG, '1-50 lower-case letters, digits or inner hyphens, e.g. acme'));
    check(d, config, 'name', 'Invalid project name', (v) => (String(v).trim() ? undefined : 'must not be empty'));
  },
  planKnown: (p) => ({ id: p.slug ?? null }),
  parseImportId: (id) => {
    const [slug] = splitImportId(id, ['slug'], 'acme');
    return { slug: slug!, id: slug! };
  },
  ...crud('project'),
};
