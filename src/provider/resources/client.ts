// kms_client: an end user of an environment, identified by (env, name). Its keys are kms_key.
import type { WireClient } from '../../api/client.js';
import { ApiError } from '../../api/http.js';
import { canonicalCidr, canonicalCidrSet, type DesiredClient, type JsonObject } from '../../model/index.js';
import { appliedDigest, clientRecord } from '../../model/ownership.js';
import { DiagnosticError, type Diagnostics } from '../diagnostics.js';
import type { ChangeAction, Engine } from '../engine.js';
import type { TfObject, TfValue } from '../values/types.js';
import { handlers, keepCidrs, keepObject, userMetadata, uuidOf } from './state.js';
import { check, ids, isObject, known, matches, PROJECT_ENV, splitImportId, str, type ResourceType } from './types.js';
import { idOf2 } from './template.js';

async function toState(e: Engine, s: TfObject, live: WireClient, projectEnv: string): Promise<TfObject> {
  const byId = [...(await e.templatesOf(projectEnv)).values()].find((t) => t.id === live.templateId);
  return {
    ...s,
    id: `${projectEnv}/${live.name}`,
    template: byId?.name ?? s.template ?? null,
    type: live.type ?? null,
    ip_whitelist: keepCidrs(s.ip_whitelist, live.ipWhitelist),
    metadata: keepObject(s.metadata, userMetadata(live.metadata)),
    client_uuid: uuidOf(live),
    // The listing carries no stats: the last ones read stay.
    stats: (live as { stats?: TfValue }).stats ?? s.stats ?? null,
  };
}

const stringList = (v: TfValue | undefined) => (Array.isArray(v) ? v.map(String) : undefined);
const objectOf = (v: TfValue | undefined) =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as JsonObject) : undefined;

/**
 * The client a configuration declares, as the YAML and CDKTF front ends load it (an attribute
 * left out is not managed; CIDRs canonical): what the applied digest (model/ownership.ts) covers,
 * so `kms-sync drift` of the same desired state reads the provider's digest as its own.
 */
export function declaredClient(
  config: TfObject,
): Pick<DesiredClient, 'type' | 'template' | 'ipWhitelist' | 'metadata'> {
  const ips = stringList(config.ip_whitelist);
  return {
    template: str(config.template)!,
    ...(str(config.type) !== undefined ? { type: str(config.type)! } : {}),
    ...(ips ? { ipWhitelist: canonicalCidrSet(ips) } : {}),
    ...(objectOf(config.metadata) ? { metadata: objectOf(config.metadata)! } : {}),
  };
}

const digestOf = (config: TfObject) => appliedDigest(clientRecord(declaredClient(config)));

/** The live client of a state, fresh; undefined when it is gone. */
async function liveOf(e: Engine, projectEnv: string, uuid: string): Promise<WireClient | undefined> {
  try {
    return await e.api.getClient(uuid, projectEnv);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return undefined;
    throw err;
  }
}

const what = (s: TfObject) => ({ type: 'kms_client', address: `${String(s.project_env)}/${String(s.name)}` });

export const client: ResourceType = {
  typeName: 'kms_client',
  replaceOn: ['project_env', 'name'],
  validate(config: TfObject, d: Diagnostics) {
    check(
      d,
      config,
      'project_env',
      'Invalid project_env',
      matches(PROJECT_ENV, '<project>-<type>, e.g. acme-production'),
    );
    check(d, config, 'name', 'Invalid client name', (v) => (String(v).trim() ? undefined : 'must not be empty'));
    check(
      d,
      config,
      'type',
      'Invalid client type',
      matches(/^[a-z][a-z0-9_-]{0,31}$/, 'a lower-case word, e.g. company'),
    );
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

  /** A change Terraform plans of a client another configuration owns is refused (the listing of the refresh: no extra read). */
  async guard(e: Engine, prior: TfObject | null, planned: TfObject | null, action: ChangeAction) {
    // A create whose identity exists already: refused when another configuration owns that client.
    const s = prior ?? planned;
    if (!s || typeof s.project_env !== 'string' || typeof s.name !== 'string') return;
    const live = (await e.clientOwners(s.project_env)).get(s.name);
    if (live) e.checkChange(what(s), live.metadata as JsonObject | undefined, action);
  },

  async create(e, p, d, config) {
    const [projectEnv, name, templateName] = ids(p, 'project_env', 'name', 'template');
    // A client of this identity already live (a state that lost it: terraform state rm, a lost or
    // restored state): this configuration's own is adopted, brought to what the configuration
    // says; another configuration's or one kms-sync did not make is refused (import it); two are
    // reported, never chosen between.
    const found = (
      await e.api.listAll<WireClient>('/client', { project_env: projectEnv!, name: name! }, 'list clients')
    ).filter((c) => c.name === name);
    e.refuseDuplicateClient(projectEnv!, name!, found);
    if (found[0]) {
      const o = e.checkChange(what(p), found[0].metadata as JsonObject | undefined, 'create');
      if (o.kind !== 'ours') {
        throw new DiagnosticError(
          'Already exists',
          `kms_client ${projectEnv}/${name} already exists in the service and ${o.kind === 'legacy' ? 'was made by kms-sync before owners were recorded' : 'was not made by kms-sync'}, ` +
            `so terraform-provider-kms does not take it over by creating it. Import it to manage it here: terraform import <address> ${projectEnv}/${name} (or an import block).`,
          ['name'],
        );
      }
      const prior: TfObject = {
        ...p,
        client_uuid: uuidOf(found[0]),
        type: found[0].type ?? null,
        template: null,
        ip_whitelist: null,
      };
      const state = await client.update(e, prior, p, config);
      d?.warning(
        'Existing client adopted',
        `kms_client ${projectEnv}/${name} (${uuidOf(found[0])}) was already live and owned by this configuration but tracked by no state (terraform state rm, or a lost or restored state): ` +
          'it is this resource again, updated to the configuration; no second client was created.',
      );
      return state;
    }
    const ipWhitelist = stringList(p.ip_whitelist);
    const { clients } = await handlers();
    const {
      value: [outcome],
    } = await e.change(undefined, projectEnv!, (ctx) =>
      clients.createClients(ctx, projectEnv!, [
        {
          name: name!,
          ...(str(p.type) !== undefined ? { type: str(p.type)! } : {}),
          template: templateName!,
          ...(ipWhitelist ? { ipWhitelist } : {}),
          metadata: e.managedMetadata(objectOf(p.metadata), p.protected === true, digestOf(config ?? p)),
          keys: [],
        },
      ]),
    );
    if (!outcome!.ok) throw new Error(outcome!.error);
    e.forget('client', projectEnv!);
    return toState(e, p, await e.api.getClient(outcome!.id, projectEnv!), projectEnv!);
  },

  async read(e, s) {
    const [projectEnv, name] = ids(s, 'project_env', 'name');
    const live = (await e.clientsOf(projectEnv!)).get(name!);
    e.refuseDuplicateClient(projectEnv!, name!);
    return live ? toState(e, s, live, projectEnv!) : null;
  },

  async update(e, prior, planned, config) {
    const [projectEnv, uuid] = ids(prior, 'project_env', 'client_uuid');
    const changed = (a: string) => JSON.stringify(prior[a]) !== JSON.stringify(planned[a]);
    const live = await liveOf(e, projectEnv!, uuid!);
    if (!live) throw new Error(`client ${String(prior.name)} no longer exists in ${projectEnv}`);
    e.checkChange(what(prior), live.metadata as JsonObject | undefined, 'update');
    // Markers as `plan` writes them: this configuration's owner and the digest of what it applies
    // (a legacy client is claimed), kept as found on a client someone else made.
    const metadata = e.updatedMetadata(
      objectOf(planned.metadata) ?? {},
      planned.protected === true,
      live.metadata as JsonObject | undefined,
      digestOf(config ?? planned),
    );
    const ipWhitelist = stringList(planned.ip_whitelist);
    const { clients } = await handlers();
    await e.change(undefined, projectEnv!, (ctx) =>
      clients.updateClient(ctx, uuid!, projectEnv!, {
        ...(changed('type') && str(planned.type) !== undefined ? { type: str(planned.type)! } : {}),
        ...(changed('template') ? { template: str(planned.template)! } : {}),
        ...(changed('ip_whitelist') ? { ipWhitelist: ipWhitelist ?? [] } : {}),
        metadata,
      }),
    );
    e.forget('client', projectEnv!);
    return toState(e, planned, await e.api.getClient(uuid!, projectEnv!), projectEnv!);
  },

  async delete(e, prior) {
    const [projectEnv, uuid] = ids(prior, 'project_env', 'client_uuid');
    const live = await liveOf(e, projectEnv!, uuid!);
    if (!live) return; // gone already
    e.checkChange(what(prior), live.metadata as JsonObject | undefined, 'delete');
    const { clients } = await handlers();
    await e.change(undefined, projectEnv!, (ctx) => clients.deleteClient(ctx, uuid!, projectEnv!));
    e.forget('client', projectEnv!);
  },
};
