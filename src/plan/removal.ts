// Removing whole environments and projects (DESIGN.md "Ownership"): an environment that left the
// configuration (or every environment, for `kms-sync destroy`) is deleted with what it holds only
// when everything in it is this configuration's own: resources of another configuration, or
// protected ones, keep it (and are never touched); resources nobody owns (made by hand, registered
// by the SDK) keep it unless pruning. Children are deleted first, as their own operations, so the
// environment goes without `forceDelete`: if the service still finds something in it, it refuses.
// The operations are each kind's own (kinds/); what is decided here is whether the environment goes.
import {
  address,
  type DesiredState,
  type JsonObject,
  type LiveClient,
  type LiveEndpoint,
  type LiveEnv,
  type LiveState,
  type LiveTemplate,
} from '../model/index.js';
import { ownershipOf } from '../model/ownership.js';
import { clientDelete } from './kinds/client.js';
import { endpointDelete } from './kinds/endpoint.js';
import { envDelete, keepsEnv } from './kinds/env.js';
import { projectDelete } from './kinds/project.js';
import type { Operation, UnmanagedResource } from './types.js';

export interface EnvContents {
  env: LiveEnv;
  clients: LiveClient[];
  endpoints: LiveEndpoint[];
  templates: LiveTemplate[];
}

export interface RemovalResult {
  ops: Operation[];
  warnings: string[];
  unmanaged: UnmanagedResource[];
  /** The environment itself is deleted. */
  envDeleted: boolean;
}

/** Splits the live state by environment. */
export function contentsByEnv(live: LiveState): Map<string, EnvContents> {
  const out = new Map<string, EnvContents>();
  for (const env of live.envs) out.set(env.projectEnv, { env, clients: [], endpoints: [], templates: [] });
  for (const c of live.clients) out.get(c.projectEnv)?.clients.push(c);
  for (const e of live.endpoints) out.get(e.projectEnv)?.endpoints.push(e);
  for (const t of live.templates) out.get(t.projectEnv)?.templates.push(t);
  return out;
}

/**
 * The operations that remove one environment and its contents, or the reasons it is kept.
 * `why` says why it goes (left the configuration, destroy); `declaredProtected`: the
 * configuration marks it protected (destroy).
 */
export function planEnvRemoval(
  c: EnvContents,
  owner: string,
  o: { prune: boolean; why: string; declaredProtected?: boolean },
): RemovalResult {
  const r: RemovalResult = { ops: [], warnings: [], unmanaged: [], envDeleted: false };
  const pe = c.env.projectEnv;
  const envAddr = address.env(pe);
  const blockers: string[] = [];
  let ours = 0;
  // Built once it is known whether the environment goes: a reason never says "its environment is
  // destroyed" about an environment that is kept.
  const childOps: ((reason: string) => Operation)[] = [];
  const consider = (
    kind: 'client' | 'endpoint',
    addr: string,
    metadata: JsonObject | undefined,
    held: boolean | undefined,
    op: (reason: string) => Operation,
  ) => {
    const who = ownershipOf(metadata, owner, held);
    const keeps = keepsEnv({ address: addr, metadata, ...(held ? { held } : {}) }, owner, o.prune);
    if (keeps === undefined) {
      if (who.kind === 'ours') ours++;
      childOps.push(op);
      return;
    }
    blockers.push(keeps);
    r.unmanaged.push({
      address: addr,
      kind,
      projectEnv: pe,
      ...(who.kind === 'other' ? { owner: who.owner } : {}),
      note: `in an environment that ${o.why}; kept`,
    });
  };
  for (const lc of c.clients) {
    const addr = address.client(pe, lc.name);
    consider('client', addr, lc.metadata, lc.held, (reason) =>
      clientDelete(lc, reason, 'delete_removed_from_config', addr),
    );
  }
  for (const le of c.endpoints) {
    const addr = address.endpoint(pe, le.method, le.path);
    consider('endpoint', addr, le.metadata, le.held, (reason) =>
      endpointDelete(le, reason, 'delete_removed_from_config', addr),
    );
  }
  if (o.declaredProtected) blockers.push(`${envAddr} is protected in the configuration`);
  if (blockers.length === 0 && ours === 0 && !o.prune)
    blockers.push('nothing in it shows it belongs to this configuration (use --prune to delete it anyway)');
  if (blockers.length) {
    const destroying = o.why === 'is destroyed';
    r.ops.push(
      ...childOps.map((op) =>
        op(
          destroying
            ? `this configuration is destroyed; its environment is kept (${envAddr} holds more)`
            : `its environment left the configuration; the environment is kept (${envAddr} holds more)`,
        ),
      ),
    );
    r.warnings.push(
      `${envAddr}: ${destroying ? 'kept, not destroyed' : `${o.why}, but it is kept`}: ${blockers.slice(0, 5).join('; ')}${blockers.length > 5 ? `; and ${blockers.length - 5} more` : ''}`,
    );
    return r;
  }
  r.ops.push(...childOps.map((op) => op(`its environment ${o.why}`)));
  // Templates go with their environment; the environment goes last.
  r.ops.push(envDelete(c.env, `${o.why}; deleted with its ${c.templates.length} template(s)`));
  r.envDeleted = true;
  return r;
}

/**
 * `kms-sync destroy`: everything the configuration owns in its environments; environments it
 * defines once nothing else is left in them; projects it defines once all their environments go.
 */
export function planDestroy(
  desired: DesiredState,
  live: LiveState,
  owner: string,
): { ops: Operation[]; warnings: string[]; unmanaged: UnmanagedResource[] } {
  const byEnv = contentsByEnv(live);
  const ops: Operation[] = [];
  const warnings: string[] = [];
  const unmanaged: UnmanagedResource[] = [];
  const deletedEnvs = new Set<string>();
  for (const e of desired.envs) {
    const c = byEnv.get(e.projectEnv);
    if (!c) continue;
    const r = planEnvRemoval(c, owner, { prune: false, why: 'is destroyed', declaredProtected: e.protected === true });
    // An environment the configuration declares is its own even when it holds nothing (yet).
    if (!r.envDeleted && c.clients.length === 0 && c.endpoints.length === 0 && !e.protected) {
      const again = planEnvRemoval(c, owner, { prune: true, why: 'is destroyed' });
      ops.push(...again.ops);
      if (again.envDeleted) deletedEnvs.add(e.projectEnv);
      continue;
    }
    ops.push(...r.ops);
    warnings.push(...r.warnings);
    unmanaged.push(...r.unmanaged);
    if (r.envDeleted) deletedEnvs.add(e.projectEnv);
  }
  // A project whose environments all go is deleted as a whole (the API addresses it by one of them).
  for (const p of desired.projects) {
    const envs = live.envs.filter((e) => e.project === p.slug);
    if (envs.length === 0 || !envs.every((e) => deletedEnvs.has(e.projectEnv)) || p.protected) continue;
    const keep = ops.filter((op) => !(op.kind === 'env' && envs.some((e) => e.projectEnv === op.projectEnv)));
    ops.length = 0;
    const name = live.projects.find((x) => x.slug === p.slug)?.name ?? p.name;
    ops.push(
      ...keep,
      projectDelete(p.slug, name, envs[0]!.projectEnv, `destroyed with its ${envs.length} environment(s)`),
    );
  }
  return { ops, warnings, unmanaged };
}
