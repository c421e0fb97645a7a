// Desired vs live → plan. Comparison is on canonical forms (CIDR sets, sorted-key JSON, UTC
// timestamps); fields the service fills in (ids, stats, dates) are never compared. A field left out
// of the desired state is not managed (Terraform's optional+computed), except the ownership marker.
import type { LiveReadResult } from '../live/read.js';
import {
  address, defaultSecretName, deepEqualJson, KIND_ORDER, OWNER_MARKER_KEY, OWNER_MARKER_VALUE,
  type DesiredClient, type DesiredEndpoint, type DesiredKey, type DesiredState, type JsonObject, type JsonValue,
  type LiveClient, type LiveEndpoint, type ResourceKind,
} from '../model/index.js';
import { summarize, type Action, type FieldChange, type KeyAfter, type Operation, type Plan, type UnmanagedResource } from './types.js';

export const PROTECTED_MARKER_KEY = 'kms-sync/protected';

export interface PlanInput {
  desired: DesiredState;
  live: LiveReadResult;
  prune: boolean;
  target: Plan['target'];
  now?: Date;
}

/** Metadata kms-sync writes on create: the desired map plus the ownership (and protection) markers. */
export function managedMetadata(metadata: JsonObject | undefined, isProtected: boolean | undefined): JsonObject {
  return {
    ...(metadata ?? {}),
    [OWNER_MARKER_KEY]: OWNER_MARKER_VALUE,
    ...(isProtected ? { [PROTECTED_MARKER_KEY]: 'true' } : {}),
  };
}

export function withoutMarkers(metadata: JsonObject | undefined): JsonObject {
  const { [OWNER_MARKER_KEY]: _o, [PROTECTED_MARKER_KEY]: _p, ...rest } = metadata ?? {};
  return rest;
}

/**
 * Metadata an existing resource should have. The ownership marker is written on create only and
 * kept as found (a resource someone else created stays theirs); metadata left out of the desired
 * state is not managed, but the protection marker always follows `protected`.
 */
function targetMetadata(desired: JsonObject | undefined, isProtected: boolean | undefined, live: JsonObject): JsonObject {
  return {
    ...(desired ?? withoutMarkers(live)),
    ...(isOwned(live) ? { [OWNER_MARKER_KEY]: OWNER_MARKER_VALUE } : {}),
    ...(isProtected ? { [PROTECTED_MARKER_KEY]: 'true' } : {}),
  };
}

export const isOwned = (metadata: JsonObject | undefined) => metadata?.[OWNER_MARKER_KEY] === OWNER_MARKER_VALUE;
const isProtectedLive = (metadata: JsonObject | undefined) => metadata?.[PROTECTED_MARKER_KEY] === 'true';

function change(path: string, before: unknown, after: unknown): FieldChange[] {
  return deepEqualJson(before as JsonValue, after as JsonValue) ? [] : [{ path, before: before ?? null, after: after ?? null }];
}

/** Field-level diff of two flat-ish objects, recursing into plain objects (metadata.team, ...). */
function objectChanges(prefix: string, before: JsonObject, after: JsonObject): FieldChange[] {
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  return keys.flatMap((k) => change(`${prefix}.${k}`, before[k], after[k]));
}

export function keyAfter(k: DesiredKey): KeyAfter {
  return {
    name: k.name,
    ...(k.expiresAt !== undefined ? { expiresAt: k.expiresAt } : {}),
    ...(k.ttl !== undefined ? { ttl: k.ttl } : {}),
    ...(k.autoRotate !== undefined ? { autoRotate: k.autoRotate } : {}),
    secret: { ...(k.secret?.store ? { store: k.secret.store } : {}), name: k.secret?.name ?? defaultSecretName(k.projectEnv, k.client, k.name) },
  };
}

function clientAfter(c: DesiredClient): Record<string, unknown> {
  return {
    name: c.name,
    ...(c.type !== undefined ? { type: c.type } : {}),
    template: c.template,
    ...(c.ipWhitelist !== undefined ? { ipWhitelist: c.ipWhitelist } : {}),
    metadata: managedMetadata(c.metadata, c.protected),
  };
}

function clientBefore(c: LiveClient): Record<string, unknown> {
  return {
    name: c.name, type: c.type ?? null, template: c.templateName ?? c.templateId ?? null, ipWhitelist: c.ipWhitelist, metadata: c.metadata,
  };
}

function endpointAfter(e: DesiredEndpoint): Record<string, unknown> {
  return {
    method: e.method, path: e.path,
    ...(e.name !== undefined ? { name: e.name } : {}),
    ...(e.description !== undefined ? { description: e.description } : {}),
    ...(e.request !== undefined ? { request: e.request } : {}),
    ...(e.response !== undefined ? { response: e.response } : {}),
    metadata: managedMetadata(e.metadata, e.protected),
  };
}

function endpointBefore(e: LiveEndpoint): Record<string, unknown> {
  return { method: e.method, path: e.path, name: e.name, description: e.description, request: e.request, response: e.response, metadata: e.metadata };
}

function keyBefore(k: { name: string; expiresAt?: string | null; autoRotate?: boolean }) {
  return { name: k.name, expiresAt: k.expiresAt ?? null, autoRotate: k.autoRotate ?? false };
}

const ACTION_PHASE: Record<Action, number> = { create: 0, update: 0, replace: 0, rotate: 0, delete: 1 };

/** Stable order: creates/updates in dependency order, then deletes in reverse dependency order. */
export function sortOperations(ops: Operation[]): Operation[] {
  const kindIndex = (k: ResourceKind) => KIND_ORDER.indexOf(k);
  return ops.sort((a, b) => {
    const pa = ACTION_PHASE[a.action];
    const pb = ACTION_PHASE[b.action];
    if (pa !== pb) return pa - pb;
    const ka = pa === 0 ? kindIndex(a.kind) : -kindIndex(a.kind);
    const kb = pb === 0 ? kindIndex(b.kind) : -kindIndex(b.kind);
    if (ka !== kb) return ka - kb;
    return a.address < b.address ? -1 : a.address > b.address ? 1 : 0;
  });
}

export function buildPlan(input: PlanInput): Plan {
  const { desired, live, prune } = input;
  const ops: Operation[] = [];
  const unmanaged: UnmanagedResource[] = [];
  const warnings: string[] = [];
  const duplicates = new Set(live.duplicates.map((d) => d.address));
  for (const d of live.duplicates) {
    warnings.push(`${d.address}: ${d.ids.length} live resources share this identity (${d.ids.join(', ')}); kms-sync leaves them alone until only one remains`);
  }
  const state = live.state;

  // ------------------------------------------------------------ projects
  const liveProjects = new Map(state.projects.map((p) => [p.slug, p]));
  for (const p of desired.projects) {
    const lp = liveProjects.get(p.slug);
    const after = { slug: p.slug, name: p.name, ...(p.description !== undefined ? { description: p.description } : {}) };
    if (!lp) {
      ops.push({
        address: address.project(p.slug), kind: 'project', action: 'create', project: p.slug,
        reason: 'project does not exist', actionReason: 'create_missing', before: null, after, changes: [],
      });
      continue;
    }
    const changes = change('name', lp.name, p.name);
    if (p.description !== undefined && (lp.description ?? '') !== p.description) {
      warnings.push(`${address.project(p.slug)}: description differs from the live one, but the service cannot update a project's description in place; change it in the dashboard`);
    }
    if (changes.length) {
      ops.push({
        address: address.project(p.slug), kind: 'project', action: 'update', project: p.slug, reason: 'name changed',
        actionReason: 'update_changed', before: { slug: lp.slug, name: lp.name }, after: { slug: p.slug, name: p.name }, changes,
      });
    }
  }

  // ------------------------------------------------------------ environments
  const liveEnvs = new Map(state.envs.map((e) => [e.projectEnv, e]));
  for (const e of desired.envs) {
    const le = liveEnvs.get(e.projectEnv);
    const after = { project: e.project, type: e.type, url: e.url };
    if (!le) {
      ops.push({
        address: address.env(e.projectEnv), kind: 'env', action: 'create', projectEnv: e.projectEnv, project: e.project,
        reason: 'environment does not exist', actionReason: 'create_missing', before: null, after, changes: [],
      });
      continue;
    }
    const changes = le.url !== undefined ? change('url', le.url, e.url) : [];
    if (changes.length) {
      ops.push({
        address: address.env(e.projectEnv), kind: 'env', action: 'update', projectEnv: e.projectEnv, project: e.project,
        reason: 'url changed', actionReason: 'update_changed', before: { project: le.project, type: le.type, url: le.url },
        after, changes, live: { envId: le.id },
      });
    }
  }

  // ------------------------------------------------------------ templates
  const liveTemplates = new Map(state.templates.map((t) => [address.template(t.projectEnv, t.name), t]));
  const desiredTemplateAddrs = new Set<string>();
  for (const t of desired.templates) {
    const addr = address.template(t.projectEnv, t.name);
    desiredTemplateAddrs.add(addr);
    if (duplicates.has(addr)) continue;
    const lt = liveTemplates.get(addr);
    const after = { name: t.name, rateLimitDay: t.rateLimitDay, ...(t.maxClients !== undefined ? { maxClients: t.maxClients } : {}) };
    if (!lt) {
      ops.push({
        address: addr, kind: 'template', action: 'create', projectEnv: t.projectEnv, reason: 'template does not exist',
        actionReason: 'create_missing', before: null, after, changes: [],
      });
      continue;
    }
    const changes = [
      ...change('rateLimitDay', lt.rateLimitDay, t.rateLimitDay),
      ...(t.maxClients !== undefined && lt.maxClients !== undefined ? change('maxClients', lt.maxClients, t.maxClients) : []),
    ];
    if (changes.length) {
      ops.push({
        address: addr, kind: 'template', action: 'update', projectEnv: t.projectEnv, reason: changes.map((c) => c.path).join(', ') + ' changed',
        actionReason: 'update_changed', before: { name: lt.name, rateLimitDay: lt.rateLimitDay, maxClients: lt.maxClients ?? null },
        after, changes, live: { id: lt.id },
      });
    }
  }
  for (const [addr, lt] of liveTemplates) {
    if (desiredTemplateAddrs.has(addr) || duplicates.has(addr)) continue;
    if (prune) {
      ops.push({
        address: addr, kind: 'template', action: 'delete', projectEnv: lt.projectEnv, reason: 'not in the configuration (--prune)',
        actionReason: 'delete_unmanaged_prune', before: { name: lt.name, rateLimitDay: lt.rateLimitDay, maxClients: lt.maxClients ?? null },
        after: null, changes: [], live: { id: lt.id },
      });
    } else unmanaged.push({ address: addr, kind: 'template', projectEnv: lt.projectEnv, note: 'not in the configuration; kept (use --prune to delete)' });
  }

  // ------------------------------------------------------------ clients and keys
  const liveClients = new Map<string, LiveClient>();
  for (const c of state.clients) {
    const addr = address.client(c.projectEnv, c.name);
    if (!duplicates.has(addr)) liveClients.set(addr, c);
  }
  const desiredClientAddrs = new Set<string>();
  for (const c of desired.clients) {
    const addr = address.client(c.projectEnv, c.name);
    desiredClientAddrs.add(addr);
    if (duplicates.has(addr)) continue;
    const lc = liveClients.get(addr);
    const after = clientAfter(c);
    if (!lc) {
      ops.push({
        address: addr, kind: 'client', action: 'create', projectEnv: c.projectEnv, reason: 'client does not exist',
        actionReason: 'create_missing', before: null, after: { ...after, keys: c.keys.map(keyAfter) }, changes: [],
        issuesKeys: c.keys.length, ...(c.protected ? { protected: true } : {}),
      });
      continue;
    }
    const before = clientBefore(lc);
    const updated = { ...after, metadata: targetMetadata(c.metadata, c.protected, lc.metadata) };
    const changes: FieldChange[] = [
      ...(c.type !== undefined ? change('type', lc.type, c.type) : []),
      ...change('template', lc.templateName ?? lc.templateId, c.template),
      ...(c.ipWhitelist !== undefined ? change('ipWhitelist', lc.ipWhitelist, c.ipWhitelist) : []),
      ...objectChanges('metadata', lc.metadata, updated.metadata),
    ];
    if (changes.length) {
      ops.push({
        address: addr, kind: 'client', action: 'update', projectEnv: c.projectEnv,
        reason: `${[...new Set(changes.map((x) => x.path.split('.')[0]))].join(', ')} changed`,
        actionReason: 'update_changed', before, after: updated, changes, live: { id: lc.id },
        ...(c.protected ? { protected: true } : {}),
      });
    }
    diffKeys(c, lc, ops, warnings);
  }
  for (const [addr, lc] of liveClients) {
    if (desiredClientAddrs.has(addr)) continue;
    const before = clientBefore(lc);
    if (isProtectedLive(lc.metadata)) {
      warnings.push(`${addr}: removed from the configuration but marked protected; kept (remove the ${PROTECTED_MARKER_KEY} metadata to allow deleting it)`);
      continue;
    }
    if (isOwned(lc.metadata)) {
      ops.push({
        address: addr, kind: 'client', action: 'delete', projectEnv: lc.projectEnv, reason: 'removed from the configuration (created by kms-sync)',
        actionReason: 'delete_removed_from_config', before, after: null, changes: [], live: { id: lc.id },
      });
    } else if (prune) {
      ops.push({
        address: addr, kind: 'client', action: 'delete', projectEnv: lc.projectEnv, reason: 'unmanaged, not in the configuration (--prune)',
        actionReason: 'delete_unmanaged_prune', before, after: null, changes: [], live: { id: lc.id },
      });
    } else unmanaged.push({ address: addr, kind: 'client', projectEnv: lc.projectEnv, note: 'not created by kms-sync and not in the configuration; kept (use --prune to delete)' });
  }

  // ------------------------------------------------------------ endpoints
  const liveEndpoints = new Map(state.endpoints.map((e) => [address.endpoint(e.projectEnv, e.method, e.path), e]));
  const desiredEndpointAddrs = new Set<string>();
  for (const e of desired.endpoints) {
    const addr = address.endpoint(e.projectEnv, e.method, e.path);
    desiredEndpointAddrs.add(addr);
    const le = liveEndpoints.get(addr);
    const after = endpointAfter(e);
    if (!le) {
      ops.push({
        address: addr, kind: 'endpoint', action: 'create', projectEnv: e.projectEnv, reason: 'endpoint is not registered',
        actionReason: 'create_missing', before: null, after, changes: [], ...(e.protected ? { protected: true } : {}),
      });
      continue;
    }
    const before = endpointBefore(le);
    const immutable = [
      ...(e.request !== undefined ? change('request', le.request, e.request) : []),
      ...(e.response !== undefined ? change('response', le.response, e.response) : []),
    ];
    const mutable = [
      ...(e.name !== undefined ? change('name', le.name, e.name) : []),
      ...(e.description !== undefined ? change('description', le.description, e.description) : []),
      ...objectChanges('metadata', le.metadata ?? {}, targetMetadata(e.metadata, e.protected, le.metadata ?? {})),
    ];
    if (immutable.length) {
      if (e.protected) {
        warnings.push(`${addr}: ${immutable.map((c) => c.path).join(' and ')} changed, which needs the endpoint replaced, but it is protected; not replaced`);
      } else {
        ops.push({
          address: addr, kind: 'endpoint', action: 'replace', projectEnv: e.projectEnv,
          // The replacement is a new resource created by kms-sync: it carries the marker.
          reason: `${immutable.map((c) => c.path).join(' and ')} cannot be updated in place (replacing resets the endpoint's usage stats)`,
          actionReason: 'replace_immutable_field', before, after, changes: [...immutable, ...mutable],
        });
        continue;
      }
    }
    if (mutable.length) {
      ops.push({
        address: addr, kind: 'endpoint', action: 'update', projectEnv: e.projectEnv,
        reason: `${[...new Set(mutable.map((x) => x.path.split('.')[0]))].join(', ')} changed`,
        actionReason: 'update_changed', before, after: { ...after, metadata: targetMetadata(e.metadata, e.protected, le.metadata ?? {}) }, changes: mutable,
        ...(e.protected ? { protected: true } : {}),
      });
    }
  }
  for (const [addr, le] of liveEndpoints) {
    if (desiredEndpointAddrs.has(addr)) continue;
    const before = endpointBefore(le);
    if (isProtectedLive(le.metadata)) {
      warnings.push(`${addr}: removed from the configuration but marked protected; kept`);
      continue;
    }
    if (isOwned(le.metadata)) {
      ops.push({
        address: addr, kind: 'endpoint', action: 'delete', projectEnv: le.projectEnv, reason: 'removed from the configuration (created by kms-sync)',
        actionReason: 'delete_removed_from_config', before, after: null, changes: [],
      });
    } else if (prune) {
      ops.push({
        address: addr, kind: 'endpoint', action: 'delete', projectEnv: le.projectEnv, reason: 'unmanaged (e.g. registered by the SDK), not in the configuration (--prune)',
        actionReason: 'delete_unmanaged_prune', before, after: null, changes: [],
      });
    } else unmanaged.push({ address: addr, kind: 'endpoint', projectEnv: le.projectEnv, note: 'not in the configuration (the SDK may have registered it); kept (use --prune to delete)' });
  }

  sortOperations(ops);
  unmanaged.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
  return {
    formatVersion: 1,
    generatedAt: (input.now ?? new Date()).toISOString(),
    target: input.target,
    options: { prune },
    operations: ops,
    unmanaged,
    keyFindings: [],
    warnings,
    summary: summarize(ops, unmanaged),
    stores: desired.stores.map(({ source: _s, ...s }) => s),
    fingerprints: live.fingerprints,
  };
}

/** Keys of a managed client: create missing, update changed, delete the ones the config dropped. */
function diffKeys(c: DesiredClient, lc: LiveClient, ops: Operation[], warnings: string[]) {
  const byName = new Map<string, LiveClient['keys']>();
  for (const k of lc.keys) byName.set(k.name, [...(byName.get(k.name) ?? []), k]);
  const wanted = new Set<string>();
  for (const k of c.keys) {
    const addr = address.key(c.projectEnv, c.name, k.name);
    wanted.add(k.name);
    const found = byName.get(k.name) ?? [];
    const after = keyAfter(k);
    if (found.length === 0) {
      ops.push({
        address: addr, kind: 'key', action: 'create', projectEnv: c.projectEnv, reason: 'key does not exist',
        actionReason: 'create_missing', before: null, after: after as unknown as Record<string, unknown>, changes: [],
        live: { clientId: lc.id }, issuesKeys: 1,
      });
      continue;
    }
    // Several keys under one name are rotation generations: the newest is the current key
    // (key-health.ts retires the older ones).
    const lk = found.at(-1)!;
    const changes = [
      // An auto-rotated key's expiry moves with each generation: the configured one is the first.
      ...(k.expiresAt !== undefined && !k.autoRotate ? change('expiresAt', lk.expiresAt ?? null, k.expiresAt) : []),
      ...(k.autoRotate !== undefined ? change('autoRotate', lk.autoRotate ?? false, k.autoRotate) : []),
    ];
    if (changes.length) {
      ops.push({
        address: addr, kind: 'key', action: 'update', projectEnv: c.projectEnv, reason: `${changes.map((x) => x.path).join(', ')} changed`,
        actionReason: 'update_changed', before: keyBefore(lk), after: after as unknown as Record<string, unknown>, changes,
        live: { clientId: lc.id, keyId: lk.id },
      });
    }
  }
  if (!isOwned(lc.metadata)) return; // keys of an adopted client are kept until the adoption lands
  for (const [name, found] of byName) {
    if (wanted.has(name)) continue;
    const addr = address.key(c.projectEnv, c.name, name);
    if (c.protected) {
      warnings.push(`${addr}: not in the configuration, but its client is protected; kept`);
      continue;
    }
    for (const lk of found) {
      ops.push({
        address: addr, kind: 'key', action: 'delete', projectEnv: c.projectEnv,
        reason: 'not in the configuration of its client (revokes the key)', actionReason: 'delete_removed_from_config',
        before: keyBefore(lk), after: null, changes: [], live: { clientId: lc.id, keyId: lk.id },
      });
    }
  }
}

