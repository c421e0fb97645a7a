// kms_key: a key of a client, identified by (env, client, name). The raw key goes from the
// create response to the journal and the secret store named here (the handlers of apply/ do
// that); the state holds its id, prefix, expiry and a fingerprint of where it was written, never
// the key. Rotation is a replacement: with create_before_destroy the new key is issued and stored
// first, and the old one is then revoked, or kept valid for rotation_overlap when that is set.
// One live key per resource (DESIGN.md "Keys"), even when Terraform is killed mid-apply: a key a
// create issues is journaled as *unconfirmed* until Terraform sends a state holding it, and a
// create finding such a key of its name, stored, adopts it instead of issuing another; live keys
// of the name that nobody holds are revoked once the resource's key is stored. A refresh first
// flushes the journal (a key journaled by a killed provider is a stored key), and reports a
// tracked key gone — after revoking it — when the store holds the key of its cut-short
// replacement: Terraform then plans a create, which adopts that key.
import type { WireClient, WireKey } from '../../api/client.js';
import { canonicalTimestamp, defaultSecretName, ownershipOf, parseTtl, type JsonObject } from '../../model/index.js';
import { isProtectedLive } from '../../model/ownership.js';
import { DiagnosticError, type Diagnostics } from '../diagnostics.js';
import type { OrphanKey } from '../../apply/recover.js';
import type { ChangeAction, Engine } from '../engine.js';
import { UNKNOWN, isUnknown, type TfObject } from '../values/types.js';
import {
  handlers,
  KEY_PREFIX_LENGTH,
  keepOptional,
  keepTimestamp,
  sameInstant,
  secretFingerprint,
  uuidOf as clientId,
} from './state.js';
import {
  bool,
  check,
  ids,
  known,
  matches,
  PartialApplyError,
  PROJECT_ENV,
  splitImportId,
  str,
  type ResourceType,
} from './types.js';

const DURATION = /^\s*(\d+[smhdw])+\s*$/;
const DEFAULT_WINDOW_MS = 14 * 86_400_000;
const duration = (v: unknown) => (typeof v === 'string' ? (/^\s*0+[smhdw]\s*$/.test(v) ? 0 : parseTtl(v)) : undefined);
const validTtl = (v: unknown) => {
  try {
    parseTtl(String(v));
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
};

/** The client of a key, read fresh (a key's apply follows its client's). */
export async function clientOf(e: Engine, projectEnv: string, name: string): Promise<WireClient | undefined> {
  const found = (await e.api.listAll<WireClient>('/client', { project_env: projectEnv, name }, 'list clients')).filter(
    (c) => c.name === name,
  );
  e.refuseDuplicateClient(projectEnv, name, found);
  return found[0];
}

/**
 * The live generations of a key name before a create issues one, sorted by who holds them:
 * - `adopt`: a key an earlier create of this provider issued (unconfirmed: Terraform never saved
 *   its state) whose raw value the store holds: it becomes this resource's key.
 * - `revoke`: keys nobody holds: other unconfirmed keys of this provider, expired generations, and
 *   `strays` (tracked by nothing, on a client this configuration owns); revoked once the key of
 *   the resource is stored.
 * - `superseded`: the generation the store holds that no state of this process showed (the key a
 *   create_before_destroy replaces, or the key of a state Terraform lost: terraform state rm, a
 *   lost or restored state): once the new key replaces it in the store it is held nowhere, so it
 *   ends as a replacement ends it (revoked, or kept for rotation_overlap).
 * - kept: keys Terraform showed in a state, overlap generations the configuration asks for.
 * A stray on a client this configuration does not own fails the create: import it instead.
 */
async function generationsOf(
  e: Engine,
  live: WireClient,
  name: string,
  after: ReturnType<typeof keyAfter>,
  p: TfObject,
  orphanIds: string[],
) {
  const gens = (live.keys ?? []).filter((k) => k.name === name && !orphanIds.includes(k.id));
  const out = {
    adopt: undefined as WireKey | undefined,
    revoke: [] as WireKey[],
    strays: [] as WireKey[],
    superseded: [] as WireKey[],
  };
  if (gens.length === 0) return out;
  const unconfirmed = await e.unconfirmedKeys();
  const held = await e.heldKeyId(after.secret.store, after.secret.name);
  const now = Date.now();
  const overlap = duration(p.rotation_overlap) ?? 0;
  const ours = gens.filter((k) => unconfirmed.has(k.id));
  out.adopt = ours.find((k) => k.id === held && !(k.expiresAt && Date.parse(k.expiresAt) <= now));
  for (const k of gens) {
    if (k === out.adopt) continue;
    if (unconfirmed.has(k.id) || (k.expiresAt && Date.parse(k.expiresAt) <= now)) {
      out.revoke.push(k);
      continue;
    }
    if (e.knownKeyIds.has(k.id)) continue;
    if (k.id === held) {
      out.superseded.push(k);
      continue;
    }
    // An overlap generation: it ends within the configured overlap after a newer generation began.
    const ends = k.expiresAt ? Date.parse(k.expiresAt) : Infinity;
    const overlapOf = gens.some(
      (n) =>
        n !== k &&
        n.createdAt &&
        Date.parse(n.createdAt) <= ends &&
        ends <= Date.parse(n.createdAt) + overlap + 120_000,
    );
    if (overlap > 0 && overlapOf) continue;
    out.strays.push(k);
  }
  if (out.strays.length) {
    const owned = ownershipOf(live.metadata as JsonObject | undefined, e.config.owner).kind === 'ours';
    if (!owned) {
      throw new DiagnosticError(
        'Untracked key of the same name',
        `${live.name} in ${String(p.project_env)} already has ${out.strays.length} live key(s) named ${name} (${out.strays.map((k) => k.id).join(', ')}) that ` +
          'neither Terraform nor this provider tracks, and the client is not owned by this configuration, so terraform-provider-kms does not revoke them. ' +
          `Import the key instead: terraform import <address> ${String(p.project_env)}/${live.name}/${name} (or revoke it yourself), then apply again.`,
        ['name'],
      );
    }
    out.revoke.push(...out.strays);
  }
  return out;
}

/**
 * A newer generation of the key that the store holds in place of `current`: the new key of a
 * replacement Terraform never recorded, or that a restored older state no longer names. Costs
 * nothing (no store read) unless a newer generation exists.
 */
async function cutShortSuccessor(
  e: Engine,
  s: TfObject,
  generations: WireKey[],
  current: WireKey,
): Promise<WireKey | undefined> {
  // Any newer generation the store holds: issued by this provider (unconfirmed), or tracked by a
  // state Terraform has since lost (a restored older state still names the key it replaced).
  const newer = generations.filter(
    (k) => k.id !== current.id && String(k.createdAt ?? '') >= String(current.createdAt ?? ''),
  );
  if (newer.length === 0) return undefined;
  const [projectEnv, clientName, name] = ids(s, 'project_env', 'client', 'name');
  const secret = keyAfter(s, projectEnv!, clientName!, name!).secret;
  const held = await e.heldKeyId(secret.store, str(s.secret_name) ?? secret.name);
  return newer.find((k) => k.id === held);
}

/**
 * The plan of a create (no prior state) whose key name has a live generation the store holds and
 * no Terraform state showed this process: Terraform lost track of it (state rm, a lost or
 * truncated state, a restored backup). It is marked held so that the create of Terraform's apply
 * adopts it instead of issuing a second key (the apply runs in another provider process; the
 * create half of a replacement in that process never marks the key it replaces, which Terraform
 * showed in the plan). Only on a client this configuration owns; costs a store listing only when
 * such a generation exists.
 */
async function markHeldKey(e: Engine, planned: TfObject, client: WireClient): Promise<void> {
  const [projectEnv, clientName, name] = [planned.project_env, planned.client, planned.name];
  if (
    typeof projectEnv !== 'string' ||
    typeof clientName !== 'string' ||
    typeof name !== 'string' ||
    isUnknown(planned.secret_store) ||
    isUnknown(planned.secret_name)
  )
    return;
  if (ownershipOf(client.metadata as JsonObject | undefined, e.config.owner).kind !== 'ours') return;
  const now = Date.now();
  const untracked = (client.keys ?? []).filter(
    (k) => k.name === name && !e.knownKeyIds.has(k.id) && !(k.expiresAt && Date.parse(k.expiresAt) <= now),
  );
  if (untracked.length === 0) return;
  const secret = keyAfter(planned, projectEnv, clientName, name).secret;
  const held = await e.heldKeyId(secret.store, str(planned.secret_name) ?? secret.name).catch(() => undefined);
  const k = untracked.find((x) => x.id === held);
  if (k)
    await e.markHeld({ projectEnv, clientId: clientId(client), client: clientName, keyIds: [k.id], keyNames: [name] });
}

/** Keys of another configuration's client are neither issued, changed nor revoked (its owner's, as in `plan`). */
function checkClient(e: Engine, s: TfObject, client: WireClient | undefined, action: ChangeAction): void {
  if (!client) return;
  e.checkChange(
    { type: 'kms_key', address: String(s.name), of: `kms_client ${String(s.project_env)}/${client.name}` },
    client.metadata as JsonObject | undefined,
    action,
  );
}

/**
 * A refresh of a tracked key whose raw value the store holds: other generations of its name that
 * nobody holds are revoked — keys of requests whose response was lost (orphans), and keys an
 * earlier create of this provider issued that Terraform never recorded and the store no longer
 * holds (unconfirmed). Nothing else would: no create of this name follows while the state tracks
 * a key. Only when no raw key waits in the journal (a key there is held, not yet stored).
 */
async function revokeUnheld(
  e: Engine,
  live: WireClient,
  s: TfObject,
  generations: WireKey[],
  current: WireKey,
  orphans: OrphanKey[],
  journalClean: boolean,
) {
  const unconfirmed = await e.unconfirmedKeys();
  const orphanIds = new Set(
    orphans.filter((o) => o.client === live.name && o.keyName === current.name).map((o) => o.keyId),
  );
  const unheld = generations.filter(
    (k) => k.id !== current.id && (orphanIds.has(k.id) || (journalClean && unconfirmed.has(k.id))),
  );
  if (unheld.length === 0) return;
  const [projectEnv, clientName, name] = ids(s, 'project_env', 'client', 'name');
  const secret = keyAfter(s, projectEnv!, clientName!, name!).secret;
  if ((await e.heldKeyId(secret.store, str(s.secret_name) ?? secret.name)) !== current.id) return;
  const { keys: keyKind } = await handlers();
  for (const k of unheld)
    await e.change(undefined, projectEnv!, (ctx) => keyKind.revokeKey(ctx, clientId(live), projectEnv!, k.id));
  await e.forgetUnconfirmed(unheld.map((k) => k.id));
  e.forget('client', projectEnv!);
}

/**
 * A revoked key's raw value leaves its store: the secret is removed when it still holds that key
 * (checked by the backend with the removal: a successor written since stays). Backends that
 * cannot remove keep it (`kms-sync secrets prune` lists and removes such secrets later).
 */
async function dropRawValue(e: Engine, s: TfObject, keyId: string): Promise<void> {
  const [projectEnv, clientName, name] = ids(s, 'project_env', 'client', 'name');
  const secret = keyAfter(s, projectEnv!, clientName!, name!).secret;
  const { stores } = await e.keyPath();
  const store = await stores.get(secret.store);
  if (!store.deleteMany) return;
  await store.deleteMany([{ name: store.secretName(str(s.secret_name) ?? secret.name), keyId }]);
}

/** Ends a generation a newer one replaced: revoked, or, with an overlap, valid until now + overlap (never later than it already ends). */
async function endSuperseded(
  e: Engine,
  live: WireClient,
  projectEnv: string,
  name: string,
  k: WireKey,
  overlap: number | undefined,
): Promise<void> {
  const { keys: keyKind } = await handlers();
  if (overlap !== undefined && overlap > 0) {
    const until = new Date(Date.now() + overlap).toISOString();
    if (!k.expiresAt || Date.parse(until) < Date.parse(k.expiresAt)) {
      await e.change(undefined, projectEnv, (ctx) =>
        keyKind.writeKeys(
          ctx,
          { id: clientId(live), name: live.name, projectEnv, knownKeyIds: [] },
          [],
          [{ id: k.id, name, expiresAt: until }],
        ),
      );
    }
    return;
  }
  await e.change(undefined, projectEnv, (ctx) => keyKind.revokeKey(ctx, clientId(live), projectEnv, k.id));
  await e.forgetUnconfirmed([k.id]);
}

const newest = (keys: WireKey[]) =>
  [...keys].sort((a, b) => String(b.createdAt ?? '').localeCompare(String(a.createdAt ?? '')))[0];

/** What kms-sync's YAML calls the key (KeyAfter of the handlers). */
function keyAfter(p: TfObject, projectEnv: string, clientName: string, name: string) {
  return {
    name,
    ...(str(p.expires_at) !== undefined && str(p.ttl) === undefined
      ? { expiresAt: canonicalTimestamp(str(p.expires_at)!) }
      : {}),
    ...(str(p.ttl) !== undefined ? { ttl: str(p.ttl)! } : {}),
    ...(bool(p.auto_rotate) !== undefined ? { autoRotate: bool(p.auto_rotate)! } : {}),
    secret: {
      ...(str(p.secret_store) !== undefined && p.secret_store !== 'default' ? { store: str(p.secret_store)! } : {}),
      name: str(p.secret_name) ?? defaultSecretName(projectEnv, clientName, name),
    },
  };
}

export const key: ResourceType = {
  typeName: 'kms_key',
  // A raw key cannot be read back: moving it to another store or name means issuing a new one.
  replaceOn: ['project_env', 'client', 'name', 'secret_store', 'secret_name'],
  /**
   * secret_store left out (or "default") and the name of the declared default store are one store:
   * an import reads the store as unset, and a configuration that names the default store must not
   * replace (revoke and reissue) the key it just imported.
   */
  sameTarget(attr, prior, planned, config) {
    if (attr !== 'secret_store' || isUnknown(prior) || isUnknown(planned)) return false;
    const uri = (name: unknown) =>
      name === null || name === 'default'
        ? config.stores.find((s) => s.default)?.uri
        : config.stores.find((s) => s.name === name)?.uri;
    const a = uri(prior);
    return a !== undefined && a === uri(planned);
  },
  validate(config: TfObject, d: Diagnostics) {
    check(
      d,
      config,
      'project_env',
      'Invalid project_env',
      matches(PROJECT_ENV, '<project>-<type>, e.g. acme-production'),
    );
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
      d.error(
        'Conflicting expiry',
        'set either ttl (a lifetime from issuance) or expires_at (an absolute time), not both',
        ['expires_at'],
      );
    }
    check(d, config, 'rotation_window', 'Invalid rotation_window', matches(DURATION, 'a duration such as 14d'));
    check(d, config, 'rotation_overlap', 'Invalid rotation_overlap', matches(DURATION, 'a duration such as 7d or 0s'));
    check(
      d,
      config,
      'secret_store',
      'Invalid secret_store',
      matches(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'the name of a secret_store block of the provider'),
    );
  },
  planKnown: (p) => ({
    id:
      isUnknown(p.project_env) || isUnknown(p.client) || isUnknown(p.name)
        ? UNKNOWN
        : [p.project_env, p.client, p.name].every((x) => typeof x === 'string')
          ? `${p.project_env}/${p.client}/${p.name}`
          : null,
    secret_name:
      isUnknown(p.secret_name) && [p.project_env, p.client, p.name].every((x) => typeof x === 'string')
        ? defaultSecretName(p.project_env as string, p.client as string, p.name as string)
        : (p.secret_name ?? null),
  }),
  /** auto_rotate with a ttl: a key inside its rotation window is replaced (a new key, the same name). */
  planExtra(prior, planned, config, now) {
    // A changed ttl moves the live expiry to issuance + the new ttl (an update); one already past
    // issues a new key with the new lifetime (a replacement).
    const ttl = str(planned.ttl);
    const created = str(prior.created_at);
    if (
      ttl !== undefined &&
      ttl !== str(prior.ttl) &&
      created !== undefined &&
      !known(config.expires_at) &&
      Number.isFinite(Date.parse(created))
    ) {
      const until = Date.parse(created) + parseTtl(ttl);
      const current = Date.parse(str(prior.expires_at) ?? '');
      // The same lifetime as the live one (an import of a key issued with this ttl): nothing moves.
      if (!(Number.isFinite(current) && Math.abs(current - until) < 2000)) {
        if (until <= now.getTime()) return { replace: ['ttl'], planned: { ...planned, expires_at: UNKNOWN } };
        planned = { ...planned, expires_at: new Date(until).toISOString().replace('.000Z', 'Z') };
      }
    }
    const expires = str(planned.expires_at) ?? str(prior.expires_at);
    if (planned.auto_rotate !== true || typeof planned.ttl !== 'string' || known(config.expires_at) || !expires)
      return { replace: [], planned };
    const lifetime = parseTtl(planned.ttl);
    const window = duration(planned.rotation_window) ?? Math.min(DEFAULT_WINDOW_MS, lifetime / 4);
    if (now.getTime() + window < Date.parse(expires)) return { replace: [], planned };
    return { replace: ['expires_at'], planned: { ...planned, expires_at: UNKNOWN } };
  },
  parseImportId: (id) => {
    const [projectEnv, clientName, name] = splitImportId(
      id,
      ['project_env', 'client', 'name'],
      'acme-production/globex/primary',
    );
    return { id, project_env: projectEnv!, client: clientName!, name: name! };
  },

  /** A key change Terraform plans on another configuration's client is refused (the listing of the refresh). */
  async guard(e: Engine, prior: TfObject | null, planned: TfObject | null, action: ChangeAction) {
    // A store the provider block does not declare fails the plan, not the apply's first key.
    const store = planned ? str(planned.secret_store) : undefined;
    if (store !== undefined && store !== 'default' && !e.config.stores.some((x) => x.name === store)) {
      throw new DiagnosticError(
        'Unknown secret store',
        `no secret_store block named "${store}" in the provider configuration (declared: ${e.config.stores.map((x) => x.name).join(', ') || 'none; keys go to the default store'})`,
        ['secret_store'],
      );
    }
    const s = prior ?? planned;
    if (!s || typeof s.project_env !== 'string' || typeof s.client !== 'string') return;
    const client = (await e.clientOwners(s.project_env)).get(s.client);
    checkClient(e, s, client, action);
    if (action === 'create' && !prior && planned && client) await markHeldKey(e, planned, client);
    // A key of a protected client is never revoked without the operator's approval (the deletion guard).
    if (action === 'delete' && client && isProtectedLive(client.metadata as JsonObject | undefined))
      e.deletions.protectedKey(`kms_key.${String(s.id)}`, `kms_client ${s.project_env}/${s.client}`);
  },

  async create(e, p, d) {
    // After a store failure in this process no key is issued: fail before any request.
    e.assertCanIssue();
    const [projectEnv, clientName, name] = ids(p, 'project_env', 'client', 'name');
    const live = await clientOf(e, projectEnv!, clientName!);
    if (!live)
      throw new DiagnosticError(
        'Client not found',
        `client ${clientName} does not exist in ${projectEnv}: create it (kms_client) before its keys`,
        ['client'],
      );
    checkClient(e, p, live, 'create');
    const after = keyAfter(p, projectEnv!, clientName!, name!);
    const { stores, capture } = await e.keyPath();
    const { keys: keyKind } = await handlers();
    if (after.secret.store !== undefined) {
      try {
        stores.uriOf(after.secret.store);
      } catch {
        throw new DiagnosticError(
          'Unknown secret store',
          `no secret_store block named "${after.secret.store}" in the provider configuration`,
          ['secret_store'],
        );
      }
    }
    // Recovery first (journal flushed into the store, interrupted requests turned into orphans),
    // then the generations of this name already live are sorted out before anything is issued.
    const orphans = (await e.prepareIssue(projectEnv!, after.secret.store, after.secret.name)).filter(
      (x) => x.client === clientName && x.keyName === name,
    );
    const gens = await generationsOf(
      e,
      live,
      name!,
      after,
      p,
      orphans.map((o) => o.keyId),
    );
    const revokeLater = async () => {
      for (const o of orphans)
        await e.change(undefined, projectEnv!, (ctx) => keyKind.revokeKey(ctx, o.clientId, projectEnv!, o.keyId));
      for (const k of gens.revoke)
        await e.change(undefined, projectEnv!, (ctx) => keyKind.revokeKey(ctx, clientId(live), projectEnv!, k.id));
      await e.forgetUnconfirmed(gens.revoke.map((k) => k.id));
      // The generation the store held until now: its raw value is gone from the store, so it ends
      // as a replacement ends it (what the delete of a replaced object would do, which then finds
      // it done): revoked, or valid for rotation_overlap.
      for (const k of gens.superseded)
        await endSuperseded(e, live, projectEnv!, name!, k, duration(p.rotation_overlap));
      if (gens.strays.length) {
        d?.warning(
          'Untracked keys revoked',
          `${gens.strays.length} live key(s) named ${name} on ${projectEnv}/${clientName} (${gens.strays.map((k) => k.id).join(', ')}) were tracked by nothing ` +
            '(no Terraform state, no record of this provider) and their raw value is not in the store: revoked now that the key of this resource is stored.',
        );
      }
      e.forget('client', projectEnv!);
    };
    if (gens.adopt) {
      // A key an earlier create issued and stored, whose state Terraform never saved (killed
      // mid-apply): it is this resource's key. Nothing is issued.
      const k = gens.adopt;
      e.adoptedKeyIds.add(k.id);
      const store = await stores.get(after.secret.store);
      const secret = store.secretName(after.secret.name);
      const raw = store.read ? await store.read(secret) : undefined;
      const prefix = raw?.slice(0, KEY_PREFIX_LENGTH) ?? (k as { keyPrefix?: string }).keyPrefix ?? null;
      await revokeLater();
      return {
        ...p,
        id: `${projectEnv}/${clientName}/${name}`,
        key_id: k.id,
        key_prefix: prefix,
        expires_at: keepTimestamp(p.expires_at, k.expiresAt ?? null),
        secret_name: after.secret.name,
        created_at: k.createdAt ?? new Date().toISOString(),
        secret_fingerprint: secretFingerprint({ store: store.displayUri, secret }),
      };
    }
    const ref = {
      id: clientId(live),
      name: clientName!,
      projectEnv: projectEnv!,
      knownKeyIds: (live.keys ?? []).map((k) => k.id),
    };
    const { log, storeError } = await e.change(
      after.secret.store,
      projectEnv!,
      (ctx) => keyKind.writeKeys(ctx, ref, [after], []),
      { unconfirmed: true, secretName: after.secret.name },
    );
    const issued = log.issued[0];
    if (!issued) throw new Error(`the service issued no key named ${name} on ${projectEnv}/${clientName}`);
    e.forget('client', projectEnv!);
    const state: TfObject = {
      ...p,
      id: `${projectEnv}/${clientName}/${name}`,
      key_id: issued.keyId,
      key_prefix: issued.prefix,
      expires_at: keepTimestamp(p.expires_at, issued.expiresAt),
      secret_name: after.secret.name,
      created_at:
        (await clientOf(e, projectEnv!, clientName!))?.keys?.find((k) => k.id === issued.keyId)?.createdAt ??
        new Date().toISOString(),
      secret_fingerprint: log.stored[0] ? secretFingerprint(log.stored[0]) : null,
    };
    if (storeError) {
      throw new PartialApplyError(
        'Key issued, secret store write failed',
        `${projectEnv}/${clientName}/${name} (key ${issued.keyId}) was issued but its store write failed: ${storeError}. The raw key is safe in the journal ` +
          `${capture.journal.path}; \`kms-sync secrets flush\` or the next apply writes it to the store. No further key is issued by this apply. ` +
          'Terraform keeps the key tainted, so the next apply replaces it.',
        state,
      );
    }
    // Keys without a holder under this name (orphans of interrupted requests, unconfirmed keys of
    // a killed apply that the store does not hold, untracked or expired generations): revoked now
    // that a replacement is stored.
    await revokeLater();
    return state;
  },

  /** A state Terraform sent holds this key: it is tracked, so its unconfirmed record (if any) goes. */
  async seen(e, s) {
    if (typeof s.key_id === 'string') await e.confirm(s.key_id);
  },

  async read(e, s, importing) {
    const [projectEnv, clientName, name] = ids(s, 'project_env', 'client', 'name');
    // Decided with the journal flushed into the store (DESIGN.md "Keys" 0): a key a killed
    // provider journaled but never stored is held, not a stray, when the generations are sorted.
    const { orphans, journalClean } = await e.recoverForRead(projectEnv!);
    const live = (await e.clientsOf(projectEnv!)).get(clientName!);
    e.refuseDuplicateClient(projectEnv!, clientName!);
    const generations = (live?.keys ?? []).filter((k) => k.name === name);
    const current = importing ? newest(generations) : generations.find((k) => k.id === s.key_id);
    // The tracked key is gone: Terraform sees the object gone and plans a create (which adopts
    // a stored key of this name Terraform never recorded, if there is one), never a revoked key.
    if (!current) return null;
    const successor = importing ? undefined : await cutShortSuccessor(e, s, generations, current);
    if (successor) {
      // A replacement (create_before_destroy) cut short: its new key was issued and stored, and
      // the store holds it in place of the tracked key, whose raw value is therefore no longer
      // held. The old key ends as the replacement would have ended it (revoked, or kept for
      // rotation_overlap), and the object is reported gone. Terraform cannot say whether this
      // object is the resource's current one (Terraform killed before it saved the new key: the
      // create it now plans adopts that key, issuing nothing) or a deposed one whose successor
      // it does track (the provider killed while it revoked the old key): returning the new key
      // here would make the destroy of that deposed object revoke the key the state tracks.
      await key.delete(e, s);
      return null;
    }
    if (!importing && live) await revokeUnheld(e, live, s, generations, current, orphans, journalClean);
    return {
      ...s,
      id: `${projectEnv}/${clientName}/${name}`,
      key_id: current.id,
      expires_at: keepTimestamp(s.expires_at, current.expiresAt ?? null),
      // An import reads "off" (the service default) as unset, as a refresh does: a configuration that leaves it out plans no change.
      auto_rotate: keepOptional(importing ? null : s.auto_rotate, current.autoRotate, false),
      created_at: current.createdAt ?? s.created_at ?? null,
    };
  },

  async update(e, prior, planned) {
    const [projectEnv, clientName, name, keyId] = ids(prior, 'project_env', 'client', 'name', 'key_id');
    // Another spelling of the same instant changes the state only (the plan cannot hide it: a configured value is planned as written).
    const ttlChanged =
      str(planned.ttl) !== undefined && str(planned.ttl) !== str(prior.ttl) && str(planned.expires_at) !== undefined;
    const expiresChanged =
      (str(planned.ttl) === undefined || ttlChanged) &&
      str(planned.expires_at) !== undefined &&
      !sameInstant(planned.expires_at, prior.expires_at);
    const rotateChanged = planned.auto_rotate !== prior.auto_rotate && bool(planned.auto_rotate) !== undefined;
    if (expiresChanged || rotateChanged) {
      const { keys: keyKind } = await handlers();
      const live = await clientOf(e, projectEnv!, clientName!);
      if (!live)
        throw new DiagnosticError('Client not found', `client ${clientName} no longer exists in ${projectEnv}`, [
          'client',
        ]);
      checkClient(e, prior, live, 'update');
      const ref = {
        id: clientId(live),
        name: clientName!,
        projectEnv: projectEnv!,
        knownKeyIds: (live.keys ?? []).map((k) => k.id),
      };
      await e.change(undefined, projectEnv!, (ctx) =>
        keyKind.writeKeys(
          ctx,
          ref,
          [],
          [
            {
              id: keyId!,
              name: name!,
              ...(expiresChanged ? { expiresAt: canonicalTimestamp(str(planned.expires_at)!) } : {}),
              ...(rotateChanged ? { autoRotate: bool(planned.auto_rotate)! } : {}),
            },
          ],
        ),
      );
      // Older generations of the key that have expired go with this write of the key.
      const now = Date.now();
      for (const k of (live.keys ?? []).filter(
        (x) => x.name === name && x.id !== keyId && x.expiresAt && Date.parse(x.expiresAt) <= now,
      )) {
        await e.change(undefined, projectEnv!, (ctx) => keyKind.revokeKey(ctx, clientId(live), projectEnv!, k.id));
      }
      e.forget('client', projectEnv!);
    }
    // ttl, rotation settings and the rest live in the state only (a ttl counts from issuance).
    return planned;
  },

  async delete(e, prior) {
    const [projectEnv, clientName, name, keyId] = ids(prior, 'project_env', 'client', 'name', 'key_id');
    const live = await clientOf(e, projectEnv!, clientName!);
    const old = live?.keys?.find((k) => k.id === keyId);
    if (!live || !old) return; // gone already (with its client, or behind Terraform's back)
    checkClient(e, prior, live, 'delete');
    // A key this process adopted as a resource's current key is never revoked as an old object
    // (a replaced object whose key was adopted by its successor: the key stays, held and tracked).
    if (e.adoptedKeyIds.has(keyId!)) return;
    const { keys: keyKind } = await handlers();
    const sameName = (live.keys ?? []).filter((k) => k.name === name && k.id !== keyId);
    const successor = sameName.find((k) => String(k.createdAt ?? '') >= String(old.createdAt ?? ''));
    const older = sameName.filter((k) => String(k.createdAt ?? '') < String(old.createdAt ?? ''));
    const revoke = async (id: string) => {
      // Idempotent: a key already gone counts as revoked.
      await e.change(undefined, projectEnv!, (ctx) => keyKind.revokeKey(ctx, clientId(live), projectEnv!, id));
    };
    const now = Date.now();
    const overlap = duration(prior.rotation_overlap);
    if (successor) {
      // A replacement whose successor is already issued and stored (create_before_destroy, or a
      // -replace/taint of one): the old key is revoked now, or, with rotation_overlap, stays valid
      // for that long (the service ends it; nobody has to come back). Older generations that have
      // expired are revoked on the way.
      for (const k of older) if (k.expiresAt && Date.parse(k.expiresAt) <= now) await revoke(k.id);
      if (overlap !== undefined && overlap > 0) {
        const until = new Date(now + overlap).toISOString();
        const expires = old.expiresAt ? Date.parse(old.expiresAt) : Infinity;
        if (Date.parse(until) < expires) {
          await e.change(undefined, projectEnv!, (ctx) =>
            keyKind.writeKeys(
              ctx,
              { id: clientId(live), name: clientName!, projectEnv: projectEnv!, knownKeyIds: [] },
              [],
              [{ id: keyId!, name: name!, expiresAt: until }],
            ),
          );
        }
        e.forget('client', projectEnv!);
        return;
      }
      await revoke(keyId!);
      e.forget('client', projectEnv!);
      await e.forgetUnconfirmed([keyId!]);
      return;
    }
    // A destroy (or the destroy half of a replace that destroys first): every generation of this
    // key the resource owns goes, the current one and the overlap generations older than it.
    await revoke(keyId!);
    for (const k of older) await revoke(k.id);
    e.forget('client', projectEnv!);
    await e.forgetUnconfirmed([keyId!, ...older.map((k) => k.id)]);
    await dropRawValue(e, prior, keyId!);
  },
};
