// Executes a plan: dependency order, bounded parallelism, bulk creates, key capture, and recovery
// of writes whose outcome is unknown (re-read, never a blind retry).
import { AmbiguousWriteError } from '../api/http.js';
import {
  BULK_LIMIT, clientId, type ClientInput, type ClientUpdate, type EndpointInput, type KmsClient, type WireClient,
  type WireKey, type WireProject,
} from '../api/client.js';
import { groupBy, parseTtl, type JsonObject } from '../model/index.js';
import type { KeyAfter, Operation, Plan } from '../plan/types.js';
import { KeyStoreFailure, type CapturedKey, type KeyCapture, type StoredKeyReceipt } from './key-capture.js';

export type ApplyEvent =
  | { type: 'start'; op: Operation }
  | { type: 'done'; op: Operation; note?: string }
  | { type: 'failed'; op: Operation; error: string }
  | { type: 'key-stored'; receipt: StoredKeyReceipt }
  | { type: 'recovered'; op: Operation; note: string };

export interface ApplyOptions {
  api: KmsClient;
  plan: Plan;
  keys: KeyCapture;
  /** Independent operations in flight at once (default 8). */
  parallelism?: number;
  onEvent?: (e: ApplyEvent) => void;
  now?: () => Date;
}

export interface ApplyResult {
  done: Operation[];
  failed: { op: Operation; error: string }[];
  /** Not attempted because an earlier step failed. */
  notAttempted: Operation[];
  keysStored: StoredKeyReceipt[];
  /** Notes on recoveries (lost responses re-read, keys re-issued). */
  recoveries: string[];
  /** Why the run stopped before the end, when it did. */
  stopReason?: string;
}

class StopApply extends Error {}

/** Runs `fn` over items with at most `n` in flight; collects every rejection instead of stopping. */
async function forEachLimited<T>(items: readonly T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(n, items.length) }, async () => {
    while (next < items.length) {
      const item = items[next++]!;
      await fn(item);
    }
  });
  await Promise.all(workers);
}

function chunk<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e));

export async function applyPlan(opts: ApplyOptions): Promise<ApplyResult> {
  const { api, plan, keys } = opts;
  const parallelism = opts.parallelism ?? 8;
  const now = opts.now ?? (() => new Date());
  const emit = opts.onEvent ?? (() => {});
  const result: ApplyResult = { done: [], failed: [], notAttempted: [], keysStored: [], recoveries: [] };
  const finished = new Set<Operation>();
  /** Template ids per environment, filled from responses and, when unknown, from one list call. */
  const templateIds = new Map<string, Map<string, string>>();
  let keysPrepared = false;
  let keyStoreBroken = false;

  const ok = (op: Operation, note?: string) => {
    finished.add(op);
    result.done.push(op);
    emit({ type: 'done', op, ...(note ? { note } : {}) });
  };
  const fail = (op: Operation, e: unknown) => {
    finished.add(op);
    const error = errorText(e);
    result.failed.push({ op, error });
    emit({ type: 'failed', op, error });
  };
  const byKind = (kind: Operation['kind'], ...actions: Operation['action'][]) =>
    plan.operations.filter((o) => o.kind === kind && actions.includes(o.action) && !finished.has(o));

  const rememberTemplates = (project: WireProject) => {
    for (const e of project.envs?.list ?? []) {
      if (!e.templates) continue;
      const m = templateIds.get(e.project_env) ?? new Map<string, string>();
      for (const t of e.templates) m.set(t.name, t.id);
      templateIds.set(e.project_env, m);
    }
  };
  /** One template listing per environment at most, shared by every caller waiting on it. */
  const listings = new Map<string, Promise<void>>();
  const templateId = async (projectEnv: string, name: string): Promise<string> => {
    if (!templateIds.get(projectEnv)?.has(name)) {
      let listing = listings.get(projectEnv);
      if (!listing) {
        listing = api.listTemplates(projectEnv).then((list) => {
          const m = templateIds.get(projectEnv) ?? new Map<string, string>();
          for (const t of list) m.set(t.name, t.id);
          templateIds.set(projectEnv, m);
        });
        listings.set(projectEnv, listing);
        // A failed listing is not cached: the next caller asks again.
        listing.catch(() => listings.delete(projectEnv));
      }
      await listing;
    }
    const id = templateIds.get(projectEnv)?.get(name);
    if (!id) throw new Error(`template '${name}' not found in ${projectEnv}`);
    return id;
  };

  // ---------------------------------------------------------------- keys
  /** Once, before the first key-issuing request: journal flushed, every store of the plan writable. */
  const prepareKeys = async () => {
    if (keyStoreBroken) throw new StopApply('an earlier secret-store write failed; no further key is issued');
    if (!keysPrepared) {
      await keys.prepare([...new Set(plan.operations.flatMap(opStores))]);
      keysPrepared = true;
    }
  };
  /** Store writes running behind the journal, awaited at the end of each phase. */
  const pendingStores: Promise<void>[] = [];
  const storeFailures: string[] = [];
  const captureKeys = async (captured: CapturedKey[]) => {
    if (captured.length === 0) return;
    let handle: { stored: Promise<StoredKeyReceipt[]> };
    try {
      handle = await keys.capture(captured);
    } catch (e) {
      keyStoreBroken = true;
      // Neither the journal nor a store took these raw keys: revoke them, so that no issued key
      // is lost (a re-run issues them again).
      const unsaved = e instanceof KeyStoreFailure ? e.unsaved : captured;
      let revoked = 0;
      for (const k of unsaved) {
        try {
          await api.deleteClient(k.clientId, k.meta.projectEnv, k.meta.keyId);
          revoked++;
        } catch {
          // reported below: the key stays issued and unsaved; the plan shows its secret missing
        }
      }
      throw new KeyStoreFailure(`${errorText(e)}; ${revoked} of ${unsaved.length} key(s) that could be saved nowhere were revoked and will be issued again on the next run`);
    }
    pendingStores.push(handle.stored.then(
      (receipts) => {
        for (const receipt of receipts) {
          result.keysStored.push(receipt);
          emit({ type: 'key-stored', receipt });
        }
      },
      (e: unknown) => {
        keyStoreBroken = true;
        storeFailures.push(errorText(e));
      },
    ));
  };
  const expiryFor = (k: KeyAfter): string | null =>
    k.expiresAt ?? (k.ttl ? new Date(now().getTime() + parseTtl(k.ttl)).toISOString() : null);
  const keyInput = (k: KeyAfter) => ({ name: k.name, expiresAt: expiryFor(k), ...(k.autoRotate !== undefined ? { autoRotate: k.autoRotate } : {}) });
  const capturedFrom = (projectEnv: string, client: WireClient, wanted: KeyAfter[], issued: WireKey[]): CapturedKey[] =>
    issued.flatMap((k) => {
      const target = wanted.find((w) => w.name === k.name);
      if (!k.key || !target) return [];
      return [{
        ...(target.secret.store ? { store: target.secret.store } : {}),
        secretName: target.secret.name,
        value: k.key,
        clientId: clientId(client),
        meta: { projectEnv, client: client.name, key: k.name, keyId: k.id, expiresAt: k.expiresAt ?? null, issuedAt: now().toISOString() },
      }];
    });

  // A key whose raw value never reached us is revoked and issued again (DESIGN.md "Keys" 5).
  const reissueLostKeys = async (op: Operation, projectEnv: string, id: string, lost: WireKey[], wanted: KeyAfter[]) => {
    for (const k of lost) await api.deleteClient(id, projectEnv, k.id);
    const body: ClientUpdate = { keys: lost.map((k) => keyInput(wanted.find((w) => w.name === k.name)!)) };
    const updated = await api.updateClient(id, projectEnv, body);
    const fresh = (updated.keys ?? []).filter((k) => k.key);
    await captureKeys(capturedFrom(projectEnv, updated, wanted, fresh));
    const note = `${op.address}: the response was lost after the service acted; ${lost.length} key(s) whose raw value never arrived were revoked and re-issued`;
    result.recoveries.push(note);
    emit({ type: 'recovered', op, note });
  };

  // ---------------------------------------------------------------- phases
  const phases: (() => Promise<void>)[] = [
    // 1. New projects: one POST with their new environments and templates.
    async () => {
      await forEachLimited(byKind('project', 'create'), parallelism, async (op) => {
        const envOps = byKind('env', 'create').filter((e) => e.project === op.project);
        const envSet = new Set(envOps.map((e) => e.projectEnv));
        const tplOps = byKind('template', 'create').filter((t) => envSet.has(t.projectEnv!));
        if (envOps.length === 0) {
          fail(op, new Error('a project is created with at least one environment; none is configured in scope'));
          return;
        }
        emit({ type: 'start', op });
        try {
          const after = op.after as { slug: string; name: string; description?: string };
          const created = await api.createProject({
            slug: after.slug, name: after.name, ...(after.description !== undefined ? { description: after.description } : {}),
            envs: envOps.map((e) => ({
              type: (e.after as { type: string }).type,
              url: (e.after as { url: string }).url,
              templates: tplOps.filter((t) => t.projectEnv === e.projectEnv).map((t) => t.after as never),
            })),
          });
          rememberTemplates(created);
          ok(op);
          for (const o of [...envOps, ...tplOps]) ok(o);
        } catch (e) {
          fail(op, e);
        }
      });
    },
    // 2. Project renames, environment creates/updates and template creates/updates: one PUT per env.
    async () => {
      await forEachLimited(byKind('project', 'update'), parallelism, async (op) => {
        emit({ type: 'start', op });
        const anyEnv = plan.target.envs.find((e) => e.startsWith(`${op.project}-`));
        try {
          if (!anyEnv) throw new Error('no environment of this project is in scope');
          await api.updateProject(anyEnv, { name: (op.after as { name: string }).name });
          ok(op);
        } catch (e) {
          fail(op, e);
        }
      });
      const envOps = [...byKind('env', 'create', 'update'), ...byKind('template', 'create', 'update')];
      await forEachLimited([...groupBy(envOps, (o) => o.projectEnv!)], parallelism, async ([projectEnv, ops]) => {
        const envOp = ops.find((o) => o.kind === 'env');
        const tplOps = ops.filter((o) => o.kind === 'template');
        for (const o of ops) emit({ type: 'start', op: o });
        try {
          const templates = tplOps.map((t) => ({ ...(t.live?.id ? { id: t.live.id } : {}), ...(t.after as object) }));
          const updated = await api.updateProject(projectEnv, {
            singleEnv: { ...(envOp ? { url: (envOp.after as { url: string }).url } : {}), ...(templates.length ? { templates } : {}) },
          });
          rememberTemplates(updated);
          for (const o of ops) ok(o);
        } catch (e) {
          for (const o of ops) fail(o, e);
        }
      });
    },
    // 3. Clients: bulk creates (with their keys) per environment, updates one PUT each.
    async () => {
      const creates = byKind('client', 'create');
      const batches = [...groupBy(creates, (o) => o.projectEnv!)].flatMap(([pe, ops]) => chunk(ops, BULK_LIMIT).map((b) => [pe, b] as const));
      if (creates.some((o) => (o.issuesKeys ?? 0) > 0)) await prepareKeys();
      await forEachLimited(batches, parallelism, async ([projectEnv, ops]) => {
        if (keyStoreBroken && ops.some((o) => (o.issuesKeys ?? 0) > 0)) return; // no key issued after a store failure
        for (const o of ops) emit({ type: 'start', op: o });
        let bodies: ClientInput[];
        try {
          bodies = await Promise.all(ops.map(async (o) => {
            const a = o.after as { name: string; type?: string; template: string; ipWhitelist?: string[]; metadata: JsonObject; keys: KeyAfter[] };
            return {
              name: a.name, ...(a.type !== undefined ? { type: a.type } : {}), templateId: await templateId(projectEnv, a.template),
              ...(a.ipWhitelist !== undefined ? { ipWhitelist: a.ipWhitelist } : {}), metadata: a.metadata, keys: a.keys.map(keyInput),
            };
          }));
        } catch (e) {
          for (const o of ops) fail(o, e);
          return;
        }
        let created: WireClient[];
        try {
          created = await api.createClients(projectEnv, bodies);
        } catch (e) {
          if (!(e instanceof AmbiguousWriteError)) {
            for (const o of ops) fail(o, e);
            return;
          }
          await recoverClientCreates(projectEnv, ops, bodies);
          return;
        }
        // Keys first: the raw values exist only in this response.
        try {
          const captured = created.flatMap((c, i) => capturedFrom(projectEnv, c, (ops[i]!.after as { keys: KeyAfter[] }).keys, c.keys ?? []));
          await captureKeys(captured);
          for (const o of ops) ok(o);
        } catch (e) {
          for (const o of ops) fail(o, e);
        }
      });
      await forEachLimited(byKind('client', 'update'), parallelism, async (op) => {
        emit({ type: 'start', op });
        try {
          const a = op.after as { name: string; type?: string; template: string; ipWhitelist?: string[]; metadata: JsonObject };
          const fields = new Set(op.changes.map((c) => c.path.split('.')[0]));
          const body: ClientUpdate = {
            ...(fields.has('type') && a.type !== undefined ? { type: a.type } : {}),
            ...(fields.has('template') ? { templateId: await templateId(op.projectEnv!, a.template) } : {}),
            ...(fields.has('ipWhitelist') && a.ipWhitelist !== undefined ? { ipWhitelist: a.ipWhitelist } : {}),
            ...(fields.has('metadata') ? { metadata: a.metadata } : {}),
          };
          await api.updateClient(op.live!.id!, op.projectEnv!, body);
          ok(op);
        } catch (e) {
          fail(op, e);
        }
      });
    },
    // 4. Keys of existing clients: one PUT per client (new keys are captured from its response).
    async () => {
      const keyOps = byKind('key', 'create', 'update', 'rotate');
      if (keyOps.some((o) => o.action !== 'update')) await prepareKeys();
      await forEachLimited([...groupBy(keyOps, (o) => o.live!.clientId!)], parallelism, async ([id, ops]) => {
        if (keyStoreBroken && ops.some((o) => o.action !== 'update')) return; // no key issued after a store failure
        const projectEnv = ops[0]!.projectEnv!;
        for (const o of ops) emit({ type: 'start', op: o });
        const wanted = ops.map((o) => o.after as unknown as KeyAfter);
        const body: ClientUpdate = {
          keys: ops.map((o) => {
            const k = o.after as unknown as KeyAfter;
            return o.action === 'update'
              ? { id: o.live!.keyId!, name: k.name, ...(k.expiresAt !== undefined ? { expiresAt: k.expiresAt } : {}), ...(k.autoRotate !== undefined ? { autoRotate: k.autoRotate } : {}) }
              : keyInput(k);
          }),
        };
        let updated: WireClient;
        try {
          updated = await api.updateClient(id, projectEnv, body);
        } catch (e) {
          if (!(e instanceof AmbiguousWriteError)) {
            for (const o of ops) fail(o, e);
            return;
          }
          try {
            const known = new Set(ops.map((o) => o.live?.keyId).filter(Boolean));
            const live = await api.getClient(id, projectEnv);
            const newNames = new Set(ops.filter((o) => o.action !== 'update').map((o) => (o.after as unknown as KeyAfter).name));
            const lost = (live.keys ?? []).filter((k) => newNames.has(k.name) && !known.has(k.id));
            if (lost.length) await reissueLostKeys(ops[0]!, projectEnv, id, lost, wanted);
            else {
              // Nothing was issued: the request never took effect; sending it again is safe now.
              updated = await api.updateClient(id, projectEnv, body);
              await captureKeys(capturedFrom(projectEnv, updated, wanted, (updated.keys ?? []).filter((k) => k.key)));
            }
            for (const o of ops) ok(o, 'recovered after a lost response');
          } catch (e2) {
            for (const o of ops) fail(o, e2);
          }
          return;
        }
        try {
          const fresh = (updated.keys ?? []).filter((k) => k.key);
          await captureKeys(capturedFrom(projectEnv, updated, wanted, fresh));
          for (const o of ops) ok(o);
        } catch (e) {
          for (const o of ops) fail(o, e);
        }
      });
    },
    // 5. Endpoints: bulk creates per environment, updates, replaces (delete then create).
    async () => {
      const input = (op: Operation): EndpointInput => {
        const a = op.after as unknown as EndpointInput;
        return {
          method: a.method, path: a.path, ...(a.name !== undefined ? { name: a.name } : {}), ...(a.description !== undefined ? { description: a.description } : {}),
          ...(a.request !== undefined ? { request: a.request } : {}), ...(a.response !== undefined ? { response: a.response } : {}), metadata: a.metadata ?? {},
        };
      };
      const creates = byKind('endpoint', 'create');
      const batches = [...groupBy(creates, (o) => o.projectEnv!)].flatMap(([pe, ops]) => chunk(ops, BULK_LIMIT).map((b) => [pe, b] as const));
      await forEachLimited(batches, parallelism, async ([projectEnv, ops]) => {
        for (const o of ops) emit({ type: 'start', op: o });
        try {
          await api.createEndpoints(projectEnv, ops.map(input));
          for (const o of ops) ok(o);
        } catch (e) {
          if (!(e instanceof AmbiguousWriteError)) {
            for (const o of ops) fail(o, e);
            return;
          }
          // Re-read: endpoints carry no secret, so the missing ones are simply created again.
          try {
            const live = new Set((await api.listEndpoints(projectEnv)).map((x) => `${x.method.toUpperCase()}:${x.path}`));
            const missing = ops.filter((o) => !live.has(`${(o.after as unknown as EndpointInput).method}:${(o.after as unknown as EndpointInput).path}`));
            if (missing.length) await api.createEndpoints(projectEnv, missing.map(input));
            for (const o of ops) ok(o, 'recovered after a lost response');
          } catch (e2) {
            for (const o of ops) fail(o, e2);
          }
        }
      });
      await forEachLimited(byKind('endpoint', 'update', 'replace'), parallelism, async (op) => {
        emit({ type: 'start', op });
        const a = op.after as unknown as EndpointInput;
        const mp = `${a.method}:${a.path}`;
        try {
          if (op.action === 'replace') {
            await api.deleteEndpoint(op.projectEnv!, mp);
            await api.createEndpoints(op.projectEnv!, [input(op)]);
          } else {
            const fields = new Set(op.changes.map((c) => c.path.split('.')[0]));
            await api.updateEndpoint(op.projectEnv!, mp, {
              ...(fields.has('name') && a.name !== undefined ? { name: a.name } : {}),
              ...(fields.has('description') && a.description !== undefined ? { description: a.description } : {}),
              ...(fields.has('metadata') ? { metadata: a.metadata ?? {} } : {}),
            });
          }
          ok(op);
        } catch (e) {
          fail(op, e);
        }
      });
    },
    // 6. Deletes last, in reverse dependency order.
    async () => {
      const run = async (ops: Operation[], fn: (op: Operation) => Promise<unknown>) =>
        forEachLimited(ops, parallelism, async (op) => {
          emit({ type: 'start', op });
          try {
            await fn(op);
            ok(op);
          } catch (e) {
            fail(op, e);
          }
        });
      await run(byKind('endpoint', 'delete'), (op) => {
        const b = op.before as { method: string; path: string };
        return api.deleteEndpoint(op.projectEnv!, `${b.method}:${b.path}`);
      });
      // Keys of clients that are themselves deleted go with their client.
      const deletedClients = new Set(byKind('client', 'delete').map((o) => o.live!.id));
      const keyDeletes = byKind('key', 'delete');
      for (const op of keyDeletes.filter((o) => deletedClients.has(o.live!.clientId))) ok(op, 'deleted with its client');
      await run(keyDeletes.filter((o) => !deletedClients.has(o.live!.clientId)), (op) => api.deleteClient(op.live!.clientId!, op.projectEnv!, op.live!.keyId!));
      await run(byKind('client', 'delete'), (op) => api.deleteClient(op.live!.id!, op.projectEnv!));
      await run(byKind('template', 'delete'), (op) => api.deleteProject(op.projectEnv!, { kind: 'template', templateId: op.live!.id! }));
    },
  ];

  async function recoverClientCreates(projectEnv: string, ops: Operation[], bodies: ClientInput[]) {
    // Outcome unknown: re-read each client by name and finish what the service did or did not do.
    for (const [i, op] of ops.entries()) {
      try {
        const body = bodies[i]!;
        const matches = (await api.listAll<WireClient>('/client', { project_env: projectEnv, name: body.name }, 'list clients'))
          .filter((c) => c.name === body.name);
        const wanted = (op.after as { keys: KeyAfter[] }).keys;
        if (matches.length === 0) {
          const [created] = await api.createClients(projectEnv, [body]);
          await captureKeys(capturedFrom(projectEnv, created!, wanted, created!.keys ?? []));
          ok(op, 'created again after a lost response (the first attempt had not taken effect)');
        } else if (matches.length === 1) {
          const live = matches[0]!;
          const lost = (live.keys ?? []).filter((k) => wanted.some((w) => w.name === k.name));
          if (lost.length) await reissueLostKeys(op, projectEnv, clientId(live), lost, wanted);
          ok(op, 'created; response lost, keys re-issued');
        } else {
          throw new Error(`${matches.length} clients named '${body.name}' exist after a lost response; resolve by hand`);
        }
      } catch (e) {
        fail(op, e);
      }
    }
  }

  for (const phase of phases) {
    try {
      await phase();
    } catch (e) {
      // Raised before a request was sent (store not writable, journal not flushable).
      result.stopReason = errorText(e);
      break;
    } finally {
      await Promise.all(pendingStores.splice(0));
    }
    if (storeFailures.length > 0) {
      result.stopReason = `a secret-store write failed (${storeFailures.join('; ')}): the keys already issued are safe in the journal (run \`kms-sync secrets flush\` or apply again); no further key was issued`;
      break;
    }
    // A failure stops the run after the phase that had it: later phases depend on earlier ones.
    if (result.failed.length > 0) {
      result.stopReason = keyStoreBroken
        ? 'a secret-store write failed, so no further key was issued (see the failures above; keys in the journal are flushed by `kms-sync secrets flush` or the next apply)'
        : `${result.failed.length} operation(s) failed`;
      break;
    }
  }
  result.notAttempted = plan.operations.filter((o) => !finished.has(o) && !result.failed.some((f) => f.op === o));
  return result;
}

/** Stores an operation writes keys to (undefined = the default store). */
export function opStores(op: Operation): (string | undefined)[] {
  if (op.kind === 'client' && op.action === 'create') return ((op.after as { keys: KeyAfter[] }).keys ?? []).map((k) => k.secret.store);
  if (op.kind === 'key' && op.action !== 'delete' && op.action !== 'update') return [(op.after as unknown as KeyAfter).secret.store];
  return [];
}
