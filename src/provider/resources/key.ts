// kms_key: a key of a client, identified by (env, client, name). The raw key goes from the
// create response to the journal and the secret store named here; the state holds its id,
// prefix, expiry and a fingerprint of where it was written, never the key.
import { canonicalTimestamp, parseTtl } from '../../model/index.js';
import type { Diagnostics } from '../diagnostics.js';
import { UNKNOWN, isUnknown, type TfObject } from '../values/types.js';
import { check, known, matches, PROJECT_ENV, splitImportId, type ResourceType } from './types.js';
import { crud } from './crud.js';

const DURATION = /^\s*(\d+[smhdw])+\s*$/;
const validTtl = (v: unknown) => {
  try {
    parseTtl(String(v));
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
};

export const key: ResourceType = {
  typeName: 'kms_key',
  // A raw key cannot be read back: moving it to another store or name means issuing a new one.
  replaceOn: ['project_env', 'client', 'name', 'secret_store', 'secret_name'],
  validate(config: TfObject, d: Diagnostics) {
    check(d, config, 'project_env', 'Invalid project_env', matches(PROJECT_ENV, '<project>-<type>, e.g. acme-production'));
    check(d, config, 'name', 'Invalid key name', (v) => (String(v).trim() ? undefined : 'must not be empty'));
    check(d, config, 'ttl', 'Invalid ttl', validTtl);
    check(d, config, 'expires_at', 'Invalid expires_at', (v) => {
      try {
        canonicalTimestamp(String(v));
        return undefined;
      } catch (e) {
        return (e as Error).message;
      }
    });
    if (known(config.ttl) && known(config.expires_at)) {
      d.error('Conflicting expiry', 'set either ttl (a lifetime from issuance) or expires_at (an absolute time), not both', ['expires_at']);
    }
    check(d, config, 'rotation_window', 'Invalid rotation_window', matches(DURATION, 'a duration such as 14d'));
    check(d, config, 'rotation_overlap', 'Invalid rotation_overlap', matches(DURATION, 'a duration such as 7d or 0s'));
    check(d, config, 'secret_store', 'Invalid secret_store', matches(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'the name of a secret_store block of the provider'));
  },
  planKnown: (p) => ({
    id: isUnknown(p.project_env) || isUnknown(p.client) || isUnknown(p.name) ? UNKNOWN
      : [p.project_env, p.client, p.name].every((x) => typeof x === 'string') ? `${p.project_env}/${p.client}/${p.name}` : null,
  }),
  parseImportId: (id) => {
    const [projectEnv, clientName, name] = splitImportId(id, ['project_env', 'client', 'name'], 'acme-production/globex/primary');
    return { id, project_env: projectEnv!, client: clientName!, name: name! };
  },
  ...crud('key'),
};
