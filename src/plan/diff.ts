// Desired vs live → plan. Comparison is on canonical forms (CIDR sets, sorted-key JSON, UTC
// timestamps); fields the service fills in (ids, stats, dates) are never compared. A field left out
// of the desired state is not managed (Terraform's optional+computed), except the ownership marker.
import type { LiveReadResult } from '../live/read.js';
import {
  address, defaultSecretName, deepEqualJson, groupBy, KIND_ORDER,
  type DesiredClient, type DesiredEndpoint, type DesiredKey, type DesiredState, type JsonObject, type JsonValue,
  type LiveClient, type LiveEndpoint, type ResourceKind,
} from '../model/index.js';
import {
  actingOwnership, APPLIED_KEY, appliedDigest, clientRecord, driftOrigin, endpointRecord, isProtectedLive, managedMetadata, mayChange, PROTECTED_MARKER_KEY, targetMetadata,
  type Ownership,
} from '../model/ownership.js';
import { contentsByEnv, planEnvRemoval } from './removal.js';
import { summarize, type Action, type FieldChange, type KeyAfter, type Operation, type Plan, type UnmanagedResource } from './types.js';


export interface PlanInput {
  desired: DesiredState;
  live: LiveReadResult;
  prune: boolean;
  target: Plan['target'];
  now?: Date;
  /** Claim resources another configuration owns when this one names them (`--take-ownership`). */
  takeOwnership?: boolean;
}

/**
 * `deepEqualJson` with shortcuts for what a diff mostly compares (one value with itself, two
 * strings, two string lists), so an unchanged resource costs no canonical JSON text at all.
 * Anything else takes the canonical comparison, so the answer is always the same.
 */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a === 'string' && typeof b === 'string') return false;
  if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
    let strings = true;
    for (let i = 0; i < a.length && strings; i++) {
      const x: unknown = a[i];
      const y: unknown = b[i];
      if (typeof x !== 'string' || typeof y !== 'string') strings = false;
      else if (x !== y) return false;
    }
    if (strings) return true;
  }
  // Two objects with the same keys and values (endpoint requests and responses, mostly `{}`):
  // equal without their canonical texts. Anything else is left to the canonical comparison.
  if (isPlainObject(a) && isPlainObject(b)) {
    const keys = Object.keys(a);
    if (keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && sameJson(a[k], b[k]))) return true;
  }
  return deepEqualJson(a as JsonValue, b as JsonValue);
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Appends the change of one field to `out`, if it changed. */
function addChange(out: FieldChange[], path: string, before: unknown, after: unknown): void {
  if (!sameJson(before, after)) out.push({ path, before: before ?? null, after: after ?? null });
}

function change(path: string, before: unknown, after: unknown): FieldChange[] {
  const out: FieldChange[] = [];
  addChange(out, path, before, after);
  return out;
}

/**
 * Appends the field-level diff of two flat-ish objects (metadata.team, ...): the changed keys of
 * the union of both key sets, sorted, without building the union for an unchanged object.
 */
function addObjectChanges(out: FieldChange[], prefix: string, before: JsonObject, after: JsonObject): void {
  // for-in, not Object.keys: no key array per object (JSON objects have no inherited keys).
  let changed: string[] | undefined;
  for (const k in before) if (!sameJson(before[k], after[k])) (changed ??= []).push(k);
  for (const k in after) {
    if (Object.hasOwn(before, k)) continue;
    if (!sameJson(before[k], after[k])) (changed ??= []).push(k);
  }
  if (changed) for (const k of changed.sort()) out.push({ path: `${prefix}.${k}`, before: before[k] ?? null, after: after[k] ?? null });
}

function objectChanges(prefix: string, before: JsonObject, after: JsonObject): FieldChange[] {
  const out: FieldChange[] = [];
  addObjectChanges(out, prefix, before, after);
  return out;
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

/** The fields whose desired value differs from the live one (in the records above). */
function differingFields(desired: Record<string, JsonValue | undefined>, live: Record<string, JsonValue | undefined>): string[] {
  const out: string[] = [];
  for (const k in desired) if (desired[k] !== undefined && !deepEqualJson(desired[k], live[k] ?? null)) out.push(k);
  return out;
}

/** What a configuration wants of a client another one owns: its differing fields and missing keys. */
function blockedOfClient(c: DesiredClient, lc: LiveClient): string[] {
  const fields = differingFields(clientRecord(c), clientRecord(c, lc));
  for (const k of c.keys) if (!lc.keys.some((x) => x.name === k.name)) fields.push(`keys.${k.name}`);
  return fields;
}

function clientAfter(c: DesiredClient, owner: string): Record<string, unknown> {
  return {
    name: c.name,
    ...(c.type !== undefined ? { type: c.type } : {}),
    template: c.template,
    ...(c.ipWhitelist !== undefined ? { ipWhitelist: c.ipWhitelist } : {}),
    metadata: managedMetadata(c.metadata, c.protected, owner, appliedDigest(clientRecord(c))),
  };
}

function clientBefore(c: LiveClient): Record<string, unknown> {
  return {
    name: c.name, type: c.type ?? null, template: c.templateName ?? c.templateId ?? null, ipWhitelist: c.ipWhitelist, metadata: c.metadata,
  };
}

function endpointAfter(e: DesiredEndpoint, owner: string): Record<string, unknown> {
  return {
    method: e.method, path: e.path,
    ...(e.name !== undefined ? { name: e.name } : {}),
    ...(e.description !== undefined ? { description: e.description } : {}),
    ...(e.request !== undefined ? { request: e.request } : {}),
    ...(e.response !== undefined ? { response: e.response } : {}),
    metadata: managedMetadata(e.metadata, e.protected, owner, appliedDigest(endpointRecord(e))),
  };
}

function endpointBefore(e: LiveEndpoint): Record<string, unknown> {
  return { method: e.method, path: e.path, name: e.name, description: e.description, request: e.request, response: e.response, metadata: e.metadata };
}

function keyBefore(k: { name: string; expiresAt?: string | null; autoRotate?: boolean }) {
  return { name: k.name, expiresAt: k.expiresAt ?? null, autoRotate: k.autoRotate ?? false };
}

/**
 * Resources by (environment, name) identity, in first-seen order, without building an address
 * or a joined key string per lookup (a no-op plan of 100,000 clients builds none): by
 * environment, then by name.
 */
class IdentityIndex<T> {
  private readonly byEnv = new Map<string, Map<string, { value: T; wanted: boolean }>>();
  /** Entries in the order their identity was first set; `wanted` is set by the caller. */
  readonly entries: { value: T; wanted: boolean }[] = [];
  get(projectEnv: string, name: string) {
    return this.byEnv.get(projectEnv)?.get(name);
  }
  set(projectEnv: string, name: string, value: T) {
    let names = this.byEnv.get(projectEnv);
    if (names === undefined) this.byEnv.set(projectEnv, (names = new Map()));
    const entry = names.get(name);
    if (entry) entry.value = value;
    else {
      const e = { value, wanted: false };
      names.set(name, e);
      this.entries.push(e);
    }
  }
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
  const owner = input.target.owner;
  const own = (metadata: JsonObject | undefined): Ownership => actingOwnership(metadata, owner, input.takeOwnership);
  const ops: Operation[] = [];
  const unmanaged: UnmanagedResource[] = [];
  const warnings: string[] = [];
  const duplicates = new Set(live.duplicates.map((d) => d.address));
  for (const d of live.duplicates) {
    warnings.push(`${d.address}: ${d.ids.length} live resources share this identity (${d.ids.join(', ')}); kms-sync leaves them alone until only one remains`);
  }
  // Environments that left the configuration (read because their project is still in it) are
  // removed as a whole or kept, by ownership (removal.ts); the passes below see only the others.
  const desiredEnvs = new Set(desired.envs.map((e) => e.projectEnv));
  const leaving = live.state.envs.filter((e) => !desiredEnvs.has(e.projectEnv));
  let state = live.state;
  if (leaving.length) {
    const byEnv = contentsByEnv(state);
    const gone = new Set(leaving.map((e) => e.projectEnv));
    const stays = <T extends { projectEnv: string }>(x: T) => !gone.has(x.projectEnv);
    state = { ...state, envs: state.envs.filter(stays), clients: state.clients.filter(stays), endpoints: state.endpoints.filter(stays), templates: state.templates.filter(stays) };
    for (const e of leaving) {
      const r = planEnvRemoval(byEnv.get(e.projectEnv)!, owner, { prune, why: 'left the configuration' });
      ops.push(...r.ops);
      warnings.push(...r.warnings);
      unmanaged.push(...r.unmanaged);
    }
  }

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
  // Live clients by identity, looked up without building an address per client: the addresses
  // are built only for what the plan reports (a no-op plan of 100,000 clients builds none).
  const liveClients = new IdentityIndex<LiveClient>();
  // Indexed loops here and below: this code runs once per plan, mostly before V8 optimizes it,
  // and there a for-of allocates an iterator result per item.
  for (let i = 0; i < state.clients.length; i++) {
    const c = state.clients[i]!;
    if (duplicates.size === 0 || !duplicates.has(address.client(c.projectEnv, c.name))) liveClients.set(c.projectEnv, c.name, c);
  }
  for (let i = 0; i < desired.clients.length; i++) {
    const c = desired.clients[i]!;
    const found = liveClients.get(c.projectEnv, c.name);
    if (found) found.wanted = true;
    if (duplicates.size > 0 && duplicates.has(address.client(c.projectEnv, c.name))) continue;
    const lc = found?.value;
    if (!lc) {
      ops.push({
        address: address.client(c.projectEnv, c.name), kind: 'client', action: 'create', projectEnv: c.projectEnv, reason: 'client does not exist',
        actionReason: 'create_missing', before: null, after: { ...clientAfter(c, owner), keys: c.keys.map(keyAfter) }, changes: [],
        issuesKeys: c.keys.length, ...(c.protected ? { protected: true } : {}),
      });
      continue;
    }
    const ownership = own(lc.metadata);
    if (!mayChange(ownership)) {
      const blocked = blockedOfClient(c, lc);
      unmanaged.push({
        address: address.client(c.projectEnv, c.name), kind: 'client', projectEnv: c.projectEnv, owner: ownership.owner,
        note: blocked.length
          ? `owned by configuration '${ownership.owner}'; this configuration's changes (${blocked.join(', ')}) are blocked (--take-ownership to manage it from this configuration)`
          : `owned by configuration '${ownership.owner}'; not changed here (--take-ownership to manage it from this configuration)`,
        ...(blocked.length ? { blocked } : {}),
      });
      continue;
    }
    // The before/after objects are built only for a client that changed: most of them did not.
    let metadata = targetMetadata(c.metadata, c.protected, lc.metadata, owner);
    const changes: FieldChange[] = [];
    if (c.type !== undefined) addChange(changes, 'type', lc.type, c.type);
    addChange(changes, 'template', lc.templateName ?? lc.templateId, c.template);
    if (c.ipWhitelist !== undefined) addChange(changes, 'ipWhitelist', lc.ipWhitelist, c.ipWhitelist);
    addObjectChanges(changes, 'metadata', lc.metadata, metadata);
    if (changes.length) {
      const applied = appliedDigest(clientRecord(c));
      metadata = targetMetadata(c.metadata, c.protected, lc.metadata, owner, applied);
      ops.push({
        drift: driftOrigin(lc.metadata[APPLIED_KEY], applied, appliedDigest(clientRecord(c, lc))),
        address: address.client(c.projectEnv, c.name), kind: 'client', action: 'update', projectEnv: c.projectEnv,
        reason: ownership.kind === 'legacy' ? claimReason(changes) : `${[...new Set(changes.map((x) => x.path.split('.')[0]))].join(', ')} changed`,
        actionReason: 'update_changed', before: clientBefore(lc), after: { ...clientAfter(c, owner), metadata }, changes, live: { id: lc.id },
        ...(c.protected ? { protected: true } : {}),
      });
    }
    diffKeys(c, lc, ops, warnings, ownership.kind !== 'none');
  }
  for (let i = 0; i < liveClients.entries.length; i++) {
    const { value: lc, wanted } = liveClients.entries[i]!;
    if (wanted) continue;
    const addr = address.client(lc.projectEnv, lc.name);
    const before = clientBefore(lc);
    if (isProtectedLive(lc.metadata)) {
      warnings.push(`${addr}: removed from the configuration but marked protected; kept (remove the ${PROTECTED_MARKER_KEY} metadata to allow deleting it)`);
      continue;
    }
    const ownership = own(lc.metadata);
    if (ownership.kind === 'ours') {
      ops.push({
        address: addr, kind: 'client', action: 'delete', projectEnv: lc.projectEnv, reason: 'removed from the configuration (owned by this configuration)',
        actionReason: 'delete_removed_from_config', before, after: null, changes: [], live: { id: lc.id },
      });
    } else if (ownership.kind === 'other') {
      unmanaged.push({ address: addr, kind: 'client', projectEnv: lc.projectEnv, owner: ownership.owner, note: `owned by configuration '${ownership.owner}'; kept` });
    } else if (ownership.kind === 'legacy') {
      unmanaged.push({ address: addr, kind: 'client', projectEnv: lc.projectEnv, note: 'created by kms-sync before owners were recorded, by a configuration unknown; kept (name it in a configuration to claim it)' });
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
    // Built (with the digest it hashes) only for an endpoint the plan changes: most are unchanged.
    const after = () => endpointAfter(e, owner);
    if (!le) {
      ops.push({
        address: addr, kind: 'endpoint', action: 'create', projectEnv: e.projectEnv, reason: 'endpoint is not registered',
        actionReason: 'create_missing', before: null, after: after(), changes: [], ...(e.protected ? { protected: true } : {}),
      });
      continue;
    }
    const eOwnership = own(le.metadata);
    if (!mayChange(eOwnership)) {
      const blocked = differingFields(endpointRecord(e), endpointRecord(e, le));
      unmanaged.push({
        address: addr, kind: 'endpoint', projectEnv: e.projectEnv, owner: eOwnership.owner,
        note: blocked.length
          ? `owned by configuration '${eOwnership.owner}'; this configuration's changes (${blocked.join(', ')}) are blocked (--take-ownership to manage it from this configuration)`
          : `owned by configuration '${eOwnership.owner}'; not changed here (--take-ownership to manage it from this configuration)`,
        ...(blocked.length ? { blocked } : {}),
      });
      continue;
    }
    const before = endpointBefore(le);
    let target = targetMetadata(e.metadata, e.protected, le.metadata ?? {}, owner);
    const immutable = [
      ...(e.request !== undefined ? change('request', le.request, e.request) : []),
      ...(e.response !== undefined ? change('response', le.response, e.response) : []),
    ];
    const mutable = [
      ...(e.name !== undefined ? change('name', le.name, e.name) : []),
      ...(e.description !== undefined ? change('description', le.description, e.description) : []),
      ...objectChanges('metadata', le.metadata ?? {}, target),
    ];
    // Only a changed endpoint gets a new digest of what is applied, and a drift origin.
    let origin: Operation['drift'];
    if (immutable.length || mutable.length) {
      const applied = appliedDigest(endpointRecord(e));
      target = targetMetadata(e.metadata, e.protected, le.metadata ?? {}, owner, applied);
      origin = driftOrigin(le.metadata?.[APPLIED_KEY], applied, appliedDigest(endpointRecord(e, le)));
    }
    if (immutable.length) {
      if (e.protected) {
        warnings.push(`${addr}: ${immutable.map((c) => c.path).join(' and ')} changed, which needs the endpoint replaced, but it is protected; not replaced`);
      } else {
        ops.push({
          address: addr, kind: 'endpoint', action: 'replace', projectEnv: e.projectEnv,
          // The replacement is a new resource created by kms-sync: it carries the marker.
          reason: `${immutable.map((c) => c.path).join(' and ')} cannot be updated in place (replacing resets the endpoint's usage stats)`,
          actionReason: 'replace_immutable_field', before, after: after(), changes: [...immutable, ...mutable], ...(origin ? { drift: origin } : {}),
        });
        continue;
      }
    }
    if (mutable.length) {
      ops.push({
        address: addr, kind: 'endpoint', action: 'update', projectEnv: e.projectEnv,
        reason: eOwnership.kind === 'legacy' ? claimReason(mutable) : `${[...new Set(mutable.map((x) => x.path.split('.')[0]))].join(', ')} changed`,
        actionReason: 'update_changed', before, after: { ...after(), metadata: target }, changes: mutable, ...(origin ? { drift: origin } : {}),
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
    const ownership = own(le.metadata);
    if (ownership.kind === 'ours') {
      ops.push({
        address: addr, kind: 'endpoint', action: 'delete', projectEnv: le.projectEnv, reason: 'removed from the configuration (owned by this configuration)',
        actionReason: 'delete_removed_from_config', before, after: null, changes: [],
      });
    } else if (ownership.kind === 'other') {
      unmanaged.push({ address: addr, kind: 'endpoint', projectEnv: le.projectEnv, owner: ownership.owner, note: `owned by configuration '${ownership.owner}'; kept` });
    } else if (ownership.kind === 'legacy') {
      unmanaged.push({ address: addr, kind: 'endpoint', projectEnv: le.projectEnv, note: 'created by kms-sync before owners were recorded, by a configuration unknown; kept (name it in a configuration to claim it)' });
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
    options: { prune, ...(input.takeOwnership ? { takeOwnership: true } : {}) },
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
function diffKeys(c: DesiredClient, lc: LiveClient, ops: Operation[], warnings: string[], managed: boolean) {
  for (let i = 0; i < c.keys.length; i++) {
    const k = c.keys[i]!;
    // Live keys of this name, found without building a map per client. Several keys under one
    // name are rotation generations: the newest (last) is the current key (key-health.ts retires
    // the older ones).
    let lk: LiveClient['keys'][number] | undefined;
    for (let j = 0; j < lc.keys.length; j++) if (lc.keys[j]!.name === k.name) lk = lc.keys[j];
    if (!lk) {
      ops.push({
        address: address.key(c.projectEnv, c.name, k.name), kind: 'key', action: 'create', projectEnv: c.projectEnv, reason: 'key does not exist',
        actionReason: 'create_missing', before: null, after: keyAfter(k) as unknown as Record<string, unknown>, changes: [],
        live: { clientId: lc.id, clientKeyIds: lc.keys.map((x) => x.id) }, issuesKeys: 1,
      });
      continue;
    }
    // An auto-rotated key's expiry moves with each generation: the configured one is the first.
    const expiry = k.expiresAt !== undefined && !k.autoRotate;
    if (!expiry && k.autoRotate === undefined) continue; // nothing of this key is managed
    const changes = [
      ...(expiry ? change('expiresAt', lk.expiresAt ?? null, k.expiresAt) : []),
      ...(k.autoRotate !== undefined ? change('autoRotate', lk.autoRotate ?? false, k.autoRotate) : []),
    ];
    if (changes.length) {
      ops.push({
        address: address.key(c.projectEnv, c.name, k.name), kind: 'key', action: 'update', projectEnv: c.projectEnv,
        reason: `${changes.map((x) => x.path).join(', ')} changed`, actionReason: 'update_changed', before: keyBefore(lk),
        after: keyAfter(k) as unknown as Record<string, unknown>, changes, live: { clientId: lc.id, keyId: lk.id, clientKeyIds: lc.keys.map((x) => x.id) },
      });
    }
  }
  if (!managed) return; // keys of an adopted client (made by hand) are never revoked by kms-sync
  if (everyLiveKeyConfigured(c, lc)) return;
  const byName = groupBy(lc.keys, (k) => k.name);
  const wanted = new Set(c.keys.map((k) => k.name));
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


/** Every live key's name is configured (nested loops over a few keys: no closure per client). */
function everyLiveKeyConfigured(c: DesiredClient, lc: LiveClient): boolean {
  outer: for (let i = 0; i < lc.keys.length; i++) {
    for (let j = 0; j < c.keys.length; j++) if (c.keys[j]!.name === lc.keys[i]!.name) continue outer;
    return false;
  }
  return true;
}

/** The reason of an update that claims a resource kms-sync created before owners were recorded. */
function claimReason(changes: FieldChange[]): string {
  const other = [...new Set(changes.map((x) => x.path.split('.')[0]).filter((p) => p !== 'metadata'))];
  return `claimed by this configuration (created by kms-sync before owners were recorded)${other.length ? `; ${other.join(', ')} changed` : ''}`;
}
