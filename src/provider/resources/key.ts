// kms_key: a key of a client, identified by (env, client, name). The raw key goes from the
// create response to the journal and the secret store named here (the handlers of apply/ do
// that); the state holds its id, prefix, expiry and a fingerprint of where it was written, never
// the key. Rotation is a replacement: with create_before_destroy the new key is issued and stored
// first, and the old one then follows kms-sync's overlap rule instead of being revoked at once.
import type { WireClient, WireKey } from '../../api/client.js';
import { canonicalTimestamp, defaultSecretName, parseTtl } from '../../model/index.js';
import { DiagnosticError, type Diagnostics } from '../diagnostics.js';
import type { Engine } from '../engine.js';
import { UNKNOWN, isUnknown, type TfObject } from '../values/types.js';
import { handlers, keepOptional, keepTimestamp, secretFingerprint, uuidOf as clientId } from './state.js';
import { bool, check, ids, known, matches, PartialApplyError, PROJECT_ENV, splitImportId, str, type ResourceType } from './types.js';

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
async function clientOf(e: Engine, projectEnv: string, name: string): Promise<WireClient | undefined> {
  const found = await e.api.listAll<WireClient>('/client', { project_env: projectEnv, name }, 'list clients');
  return found.find((c) => c.name === name);
}

const newest = (keys: WireKey[]) => [...keys].sort((a, b) => String(b.createdAt ?? '').localeCompare(String(a.createdAt ?? '')))[0];

/** What kms-sync's YAML calls the key (KeyAfter of the handlers). */
function keyAfter(p: TfObject, projectEnv: string, clientName: string, name: string) {
  return {
    name,
    ...(str(p.expires_at) !== undefined && str(p.ttl) === undefined ? { expiresAt: canonicalTimestamp(str(p.expires_at)!) } : {}),
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
    secret_name: isUnknown(p.secret_name) && [p.project_env, p.client, p.name].every((x) => typeof x === 'string')
      ? defaultSecretName(p.project_env as string, p.client as string, p.name as string) : p.secret_name ?? null,
  }),
  /** auto_rotate with a ttl: a key inside its rotation window is replaced (a new key, the same name). */
  planExtra(prior, planned, config, now) {
    const expires = str(prior.expires_at);
    if (planned.auto_rotate !== true || typeof planned.ttl !== 'string' || known(config.expires_at) || !expires) return { replace: [], planned };
    const lifetime = parseTtl(planned.ttl);
    const window = duration(planned.rotation_window) ?? Math.min(DEFAULT_WINDOW_MS, lifetime / 4);
    if (now.getTime() + window < Date.parse(expires)) return { replace: [], planned };
    return { replace: ['expires_at'], planned: { ...planned, expires_at: UNKNOWN } };
  },
  parseImportId: (id) => {
    const [projectEnv, clientName, name] = splitImportId(id, ['project_env', 'client', 'name'], 'acme-production/globex/primary');
    return { id, project_env: projectEnv!, client: clientName!, name: name! };
  },

  async create(e, p) {
    const [projectEnv, clientName, name] = ids(p, 'project_env', 'client', 'name');
    const live = await clientOf(e, projectEnv!, clientName!);
    if (!live) throw new DiagnosticError('Client not found', `client ${clientName} does not exist in ${projectEnv}: create it (kms_client) before its keys`, ['client']);
    const after = keyAfter(p, projectEnv!, clientName!, name!);
    const { stores, capture } = await e.keyPath();
    const { keys: keyKind } = await handlers();
    if (after.secret.store !== undefined) {
      try {
        stores.uriOf(after.secret.store);
      } catch {
        throw new DiagnosticError('Unknown secret store', `no secret_store block named "${after.secret.store}" in the provider configuration`, ['secret_store']);
      }
    }
    const ref = { id: clientId(live), name: clientName!, projectEnv: projectEnv!, knownKeyIds: (live.keys ?? []).map((k) => k.id) };
    const { log, storeError } = await e.change(after.secret.store, projectEnv!, (ctx) => keyKind.writeKeys(ctx, ref, [after], []));
    const issued = log.issued[0];
    if (!issued) throw new Error(`the service issued no key named ${name} on ${projectEnv}/${clientName}`);
    e.forget('client', projectEnv!);
    const state: TfObject = {
      ...p, id: `${projectEnv}/${clientName}/${name}`, key_id: issued.keyId, key_prefix: issued.prefix,
      expires_at: keepTimestamp(p.expires_at, issued.expiresAt), secret_name: after.secret.name,
      created_at: (await clientOf(e, projectEnv!, clientName!))?.keys?.find((k) => k.id === issued.keyId)?.createdAt ?? new Date().toISOString(),
      secret_fingerprint: log.stored[0] ? secretFingerprint(log.stored[0]) : null,
    };
    if (storeError) {
      throw new PartialApplyError('Key issued, secret store write failed',
        `${projectEnv}/${clientName}/${name} (key ${issued.keyId}) was issued but its store write failed: ${storeError}. The raw key is safe in the journal ` +
        `${capture.journal.path}; \`kms-sync secrets flush\` or the next apply writes it to the store. Terraform keeps the key tainted, so the next apply replaces it.`, state);
    }
    // Keys an interrupted earlier run issued under this name without their raw value: revoked now that a replacement is stored.
    for (const o of (await e.orphansOf(projectEnv!)).filter((x) => x.client === clientName && x.keyName === name)) {
      await e.change(undefined, projectEnv!, (ctx) => keyKind.revokeKey(ctx, o.clientId, projectEnv!, o.keyId));
    }
    return state;
  },

  async read(e, s, importing) {
    const [projectEnv, clientName, name] = ids(s, 'project_env', 'client', 'name');
    const live = (await e.clientsOf(projectEnv!)).get(clientName!);
    const generations = (live?.keys ?? []).filter((k) => k.name === name);
    const current = importing ? newest(generations) : generations.find((k) => k.id === s.key_id);
    if (!current) return null;
    return {
      ...s, id: `${projectEnv}/${clientName}/${name}`, key_id: current.id,
      expires_at: keepTimestamp(s.expires_at, current.expiresAt ?? null),
      auto_rotate: importing ? (current.autoRotate ?? null) : keepOptional(s.auto_rotate, current.autoRotate, false),
      created_at: current.createdAt ?? s.created_at ?? null,
    };
  },

  async update(e, prior, planned) {
    const [projectEnv, clientName, name, keyId] = ids(prior, 'project_env', 'client', 'name', 'key_id');
    const expiresChanged = str(planned.ttl) === undefined && str(planned.expires_at) !== undefined && planned.expires_at !== prior.expires_at;
    const rotateChanged = planned.auto_rotate !== prior.auto_rotate && bool(planned.auto_rotate) !== undefined;
    if (expiresChanged || rotateChanged) {
      const { keys: keyKind } = await handlers();
      const live = await clientOf(e, projectEnv!, clientName!);
      if (!live) throw new DiagnosticError('Client not found', `client ${clientName} no longer exists in ${projectEnv}`, ['client']);
      const ref = { id: clientId(live), name: clientName!, projectEnv: projectEnv!, knownKeyIds: (live.keys ?? []).map((k) => k.id) };
      await e.change(undefined, projectEnv!, (ctx) => keyKind.writeKeys(ctx, ref, [], [{
        id: keyId!, name: name!,
        ...(expiresChanged ? { expiresAt: canonicalTimestamp(str(planned.expires_at)!) } : {}),
        ...(rotateChanged ? { autoRotate: bool(planned.auto_rotate)! } : {}),
      }]));
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
    const { keys: keyKind } = await handlers();
    const successor = (live.keys ?? []).find((k) => k.name === name && k.id !== keyId && String(k.createdAt ?? '') >= String(old.createdAt ?? ''));
    const overlap = duration(prior.rotation_overlap);
    if (successor && overlap !== 0) {
      // A rotation (create_before_destroy): the old key stays valid for the overlap, or until it
      // expires by itself, as kms-sync's rotation does; the service ends it, nobody has to come back.
      const now = Date.now();
      const until = overlap === undefined ? undefined : new Date(now + overlap).toISOString();
      const expires = old.expiresAt ? Date.parse(old.expiresAt) : Infinity;
      if (until === undefined && expires !== Infinity) return;
      if (until !== undefined && Date.parse(until) < expires) {
        await e.change(undefined, projectEnv!, (ctx) => keyKind.writeKeys(ctx, { id: clientId(live), name: clientName!, projectEnv: projectEnv!, knownKeyIds: [] }, [], [{ id: keyId!, name: name!, expiresAt: until }]));
        e.forget('client', projectEnv!);
        return;
      }
      if (until !== undefined) return; // expires before the overlap ends anyway
    }
    // Idempotent: a key already gone counts as revoked.
    await e.change(undefined, projectEnv!, (ctx) => keyKind.revokeKey(ctx, clientId(live), projectEnv!, keyId!));
    e.forget('client', projectEnv!);
  },
};
