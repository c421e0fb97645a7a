// The scheduler: runs a plan's operations through the per-kind handlers (./kinds/) in dependency
// order, with bounded parallelism and bulk creates. It owns ordering, batching, events, the stop
// rules (a failure stops the run after its phase; a store failure stops key issuing; an interrupt
// stops new requests while the ones in flight finish) — never how a kind is written.
import { BULK_LIMIT } from '../api/client.js';
import { AmbiguousWriteError, ApiError, NetworkError, RequestsStoppedError } from '../api/http.js';
import { deepEqualJson, groupBy, isEnvOfProject, type JsonObject } from '../model/index.js';
import type { KeyAfter, Operation, Plan } from '../plan/types.js';
import { errorText, TemplateIds, type ApplyContext } from './context.js';
import { KeyStoreFailure, type KeyCapture, type StoredKeyReceipt } from './key-capture.js';
import { clients, endpoints, envs, keys as keyKind, projects, templates } from './kinds/index.js';
import type { ClientCreate } from './kinds/client.js';
import type { EndpointFields } from './kinds/endpoint.js';
import type { KmsClient } from '../api/client.js';

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
  /** Aborted on an interrupt: no new request starts; the ones in flight finish and journal their keys. */
  signal?: AbortSignal;
}

/** An operation that failed, and what that means for the next run. */
export interface FailedOperation {
  op: Operation;
  error: string;
  /** The write may have taken effect (no answer, or an unreadable one): the next run re-reads it. */
  unknown?: boolean;
  /** Running apply again can help (the failure was transient: network, throttling, 5xx, unknown outcome). */
  transient?: boolean;
}

/** Whether a failure is transient, and whether its write's outcome is unknown. */
export function classifyFailure(e: unknown, unknown = false): { unknown: boolean; transient: boolean } {
  if (e instanceof AmbiguousWriteError || unknown) return { unknown: true, transient: true };
  if (e instanceof RequestsStoppedError) return { unknown: false, transient: true };
  if (e instanceof NetworkError)
    return { unknown: false, transient: !['ENOTFOUND', 'BODY_TOO_LARGE'].includes(e.code) };
  if (e instanceof ApiError)
    return { unknown: false, transient: e.status === 408 || e.status === 429 || e.status >= 500 };
  return { unknown: false, transient: false };
}

export interface ApplyResult {
  done: Operation[];
  failed: FailedOperation[];
  /** Not attempted because an earlier step failed or the run was interrupted. */
  notAttempted: Operation[];
  keysStored: StoredKeyReceipt[];
  /** The live ids of the clients this run created, by address (the configuration's inventory records them). */
  created?: Map<string, string>;
  /** Notes on recoveries (lost responses re-read, keys re-issued, orphans revoked). */
  recoveries: string[];
  /** Why the run stopped before the end, when it did. */
  stopReason?: string;
  /** The run stopped because of an interrupt. */
  interrupted?: boolean;
}

class StopApply extends Error {}

/** Runs `fn` over items with at most `n` in flight; takes no new item once `stopped()`. */
async function forEachLimited<T>(
  items: readonly T[],
  n: number,
  stopped: () => boolean,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(n, items.length) }, async () => {
    while (next < items.length && !stopped()) {
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

const keysOf = (op: Operation) => (op.after as { keys?: KeyAfter[] }).keys ?? [];
/**
 * The top-level fields an update writes: the changed ones, plus metadata whenever the metadata to
 * write differs from the live one (it carries the ownership markers and the digest of what is
 * applied, which are written without showing as changes).
 */
const changedFields = (op: Operation) => {
  const fields = new Set(op.changes.map((c) => c.path.split('.')[0]!));
  const before = (op.before as { metadata?: JsonObject } | null)?.metadata;
  const after = (op.after as { metadata?: JsonObject } | null)?.metadata;
  if (after && !deepEqualJson(before ?? {}, after)) fields.add('metadata');
  return fields;
};

export async function applyPlan(opts: ApplyOptions): Promise<ApplyResult> {
  const { plan } = opts;
  const parallelism = opts.parallelism ?? 8;
  const emit = opts.onEvent ?? (() => {});
  const result: ApplyResult = { done: [], failed: [], notAttempted: [], keysStored: [], recoveries: [] };
  const finished = new Set<Operation>();
  const stopped = () => opts.signal?.aborted === true;
  let keysPrepared = false;
  let keyStoreBroken = false;
  const pendingStores: Promise<void>[] = [];
  const storeFailures: string[] = [];
  let currentOp: Operation | undefined;

  const ctx: ApplyContext = {
    api: opts.api,
    keys: opts.keys,
    now: opts.now ?? (() => new Date()),
    templates: new TemplateIds(opts.api),
    beforeIssue: async () => {
      if (keyStoreBroken) throw new StopApply('an earlier secret-store write failed; no further key is issued');
      if (!keysPrepared) {
        await opts.keys.prepare([...new Set(plan.operations.flatMap(opStores))], plan.operations.flatMap(opWrites));
        keysPrepared = true;
      }
    },
    track: (stored) => {
      pendingStores.push(
        stored.then(
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
        ),
      );
    },
    recovered: (note) => {
      result.recoveries.push(note);
      if (currentOp) emit({ type: 'recovered', op: currentOp, note });
    },
  };

  const ok = (op: Operation, note?: string) => {
    finished.add(op);
    result.done.push(op);
    emit({ type: 'done', op, ...(note ? { note } : {}) });
  };
  const fail = (op: Operation, e: unknown, unknown = false) => {
    if (e instanceof KeyStoreFailure) keyStoreBroken = true;
    finished.add(op);
    const error = errorText(e);
    const c = classifyFailure(e, unknown);
    result.failed.push({
      op,
      error,
      ...(c.unknown ? { unknown: true } : {}),
      ...(c.transient ? { transient: true } : {}),
    });
    emit({ type: 'failed', op, error });
  };
  const byKind = (kind: Operation['kind'], ...actions: Operation['action'][]) =>
    plan.operations.filter((o) => o.kind === kind && actions.includes(o.action) && !finished.has(o));
  /** Runs one group of operations that succeed or fail together; a note is optional. */
  type Step = () => Promise<string | undefined> | Promise<void>;
  const group = async (ops: Operation[], fn: Step) => {
    for (const o of ops) emit({ type: 'start', op: o });
    currentOp = ops[0];
    try {
      const note = await fn();
      for (const o of ops) if (!finished.has(o)) ok(o, note || undefined);
    } catch (e) {
      if (e instanceof StopApply) throw e;
      for (const o of ops) fail(o, e);
    }
  };
  const each = (ops: Operation[], fn: (op: Operation) => Promise<string | undefined> | Promise<void>) =>
    forEachLimited(ops, parallelism, stopped, (op) => group([op], () => fn(op)));
  const issues = (ops: Operation[]) => ops.some((o) => (o.issuesKeys ?? 0) > 0);

  const phases: (() => Promise<void>)[] = [
    // 1. New projects: one POST with their new environments and templates.
    () =>
      each(byKind('project', 'create'), async (op) => {
        const envOps = byKind('env', 'create').filter((e) => e.project === op.project);
        const envSet = new Set(envOps.map((e) => e.projectEnv));
        const tplOps = byKind('template', 'create').filter((t) => envSet.has(t.projectEnv!));
        const after = op.after as { slug: string; name: string; description?: string };
        const note = await projects.createProject(ctx, {
          slug: after.slug,
          name: after.name,
          ...(after.description !== undefined ? { description: after.description } : {}),
          envs: envOps.map((e) => ({
            type: (e.after as { type: string }).type,
            url: (e.after as { url: string }).url,
            templates: tplOps.filter((t) => t.projectEnv === e.projectEnv).map((t) => t.after as never),
          })),
        });
        // Completion lines in dependency order: the project before the environments it holds.
        ok(op, note);
        for (const o of [...envOps, ...tplOps]) ok(o);
      }),
    // 2. Project renames, then environment creates/updates with their template writes: one PUT per env.
    async () => {
      await each(byKind('project', 'update'), async (op) => {
        // The service renames a project through one of its live environments: one of this project's
        // (never another project whose slug starts the same), those this run does not create first.
        // A part of a plan applied environment by environment does not hold the environments' creates,
        // so an environment that turns out not to exist yet (404) gives way to the next.
        const creating = new Set(
          plan.operations.filter((o) => o.kind === 'env' && o.action === 'create').map((o) => o.projectEnv),
        );
        const own = plan.target.envs.filter((e) => isEnvOfProject(e, op.project!));
        const candidates = [...own.filter((e) => !creating.has(e)), ...own.filter((e) => creating.has(e))];
        if (!candidates.length) throw new Error('no live environment of this project is in scope');
        for (const [i, anyEnv] of candidates.entries()) {
          try {
            return await projects.renameProject(ctx, anyEnv, (op.after as { name: string }).name);
          } catch (e) {
            if (i === candidates.length - 1 || !(e instanceof ApiError) || e.status !== 404) throw e;
          }
        }
      });
      const envOps = [...byKind('env', 'create', 'update'), ...byKind('template', 'create', 'update')];
      await forEachLimited([...groupBy(envOps, (o) => o.projectEnv!)], parallelism, stopped, ([projectEnv, ops]) =>
        group(ops, () => {
          const envOp = ops.find((o) => o.kind === 'env');
          const tpls = ops
            .filter((o) => o.kind === 'template')
            .map((t) => ({
              ...(t.live?.id ? { id: t.live.id } : {}),
              ...(t.after as { name: string; rateLimitDay: number }),
            }));
          return envs.upsertEnv(ctx, projectEnv, {
            ...(envOp ? { url: (envOp.after as { url: string }).url } : {}),
            templates: tpls,
          });
        }),
      );
    },
    // 3. Clients: bulk creates (with their keys) per environment, then updates one PUT each.
    async () => {
      const creates = byKind('client', 'create');
      const batches = [...groupBy(creates, (o) => o.projectEnv!)].flatMap(([pe, ops]) =>
        chunk(ops, BULK_LIMIT).map((b) => [pe, b] as const),
      );
      await forEachLimited(batches, parallelism, stopped, async ([projectEnv, ops]) => {
        if (keyStoreBroken && issues(ops)) return; // no key issued after a store failure
        for (const o of ops) emit({ type: 'start', op: o });
        currentOp = ops[0];
        const outcomes = await clients.createClients(
          ctx,
          projectEnv,
          ops.map((o) => o.after as unknown as ClientCreate),
        );
        for (const [i, r] of outcomes.entries()) {
          if (r.ok) {
            (result.created ??= new Map()).set(ops[i]!.address, r.id);
            ok(ops[i]!, r.note);
          } else fail(ops[i]!, r.cause ?? new Error(r.error), r.unknown);
        }
      });
      await each(byKind('client', 'update'), (op) => {
        const a = op.after as { type?: string; template: string; ipWhitelist?: string[]; metadata: JsonObject };
        const f = changedFields(op);
        return clients.updateClient(ctx, op.live!.id!, op.projectEnv!, {
          ...(f.has('type') && a.type !== undefined ? { type: a.type } : {}),
          ...(f.has('template') ? { template: a.template } : {}),
          ...(f.has('ipWhitelist') && a.ipWhitelist !== undefined ? { ipWhitelist: a.ipWhitelist } : {}),
          ...(f.has('metadata') ? { metadata: a.metadata } : {}),
        });
      });
    },
    // 4. Keys of existing clients: one PUT per client (new keys captured from its response).
    async () => {
      const keyOps = byKind('key', 'create', 'update', 'rotate');
      // Rotations whose old key the plan revokes once the new one is stored (--revoke-old, overlap 0):
      // that revoke is journaled with the new raw key, so an interrupted run cannot strand it.
      const revokedAfter = new Set(
        plan.operations
          .filter((o) => o.kind === 'key' && o.action === 'delete' && o.actionReason === 'delete_rotated_out')
          .map((o) => o.live?.keyId),
      );
      await forEachLimited([...groupBy(keyOps, (o) => o.live!.clientId!)], parallelism, stopped, async ([id, ops]) => {
        if (keyStoreBroken && ops.some((o) => o.action !== 'update')) return; // no key issued after a store failure
        const first = ops[0]!;
        const keyName = (first.after as unknown as KeyAfter).name;
        const prefix = `key.${first.projectEnv}/`;
        const name = first.address.slice(prefix.length, first.address.length - keyName.length - 1);
        const client = {
          id,
          name,
          projectEnv: first.projectEnv!,
          knownKeyIds: first.live?.clientKeyIds ?? ops.flatMap((o) => (o.live?.keyId ? [o.live.keyId] : [])),
        };
        await group(ops, () =>
          keyKind.writeKeys(
            ctx,
            client,
            ops.filter((o) => o.action !== 'update').map((o) => o.after as unknown as KeyAfter),
            ops
              .filter((o) => o.action === 'update')
              .map((o) => {
                const k = o.after as unknown as KeyAfter;
                return {
                  id: o.live!.keyId!,
                  name: k.name,
                  ...(k.expiresAt !== undefined ? { expiresAt: k.expiresAt } : {}),
                  ...(k.autoRotate !== undefined ? { autoRotate: k.autoRotate } : {}),
                };
              }),
            ops
              .filter((o) => o.action === 'rotate' && o.live?.keyId !== undefined && revokedAfter.has(o.live.keyId))
              .map((o) => ({ keyId: o.live!.keyId!, name: (o.after as unknown as KeyAfter).name })),
          ),
        );
      });
    },
    // 5. Endpoints: bulk creates per environment, then updates and replaces.
    async () => {
      const creates = byKind('endpoint', 'create');
      const batches = [...groupBy(creates, (o) => o.projectEnv!)].flatMap(([pe, ops]) =>
        chunk(ops, BULK_LIMIT).map((b) => [pe, b] as const),
      );
      await forEachLimited(batches, parallelism, stopped, ([projectEnv, ops]) =>
        group(ops, () =>
          endpoints.createEndpoints(
            ctx,
            projectEnv,
            ops.map((o) => o.after as unknown as EndpointFields),
          ),
        ),
      );
      await each(byKind('endpoint', 'update', 'replace'), (op) => {
        const a = op.after as unknown as EndpointFields;
        return op.action === 'replace'
          ? endpoints.replaceEndpoint(ctx, op.projectEnv!, a)
          : endpoints.updateEndpoint(ctx, op.projectEnv!, a, changedFields(op));
      });
    },
    // 6. Deletes last, in reverse dependency order. A resource already gone counts as deleted.
    async () => {
      const gone = (r: 'deleted' | 'already gone') => (r === 'already gone' ? 'already gone' : undefined);
      await each(byKind('endpoint', 'delete'), async (op) => {
        const b = op.before as { method: string; path: string };
        return gone(await endpoints.deleteEndpoint(ctx, op.projectEnv!, b.method, b.path));
      });
      // Keys of clients that are themselves deleted go with their client.
      const deletedClients = new Set(byKind('client', 'delete').map((o) => o.live!.id));
      const keyDeletes = byKind('key', 'delete');
      for (const op of keyDeletes.filter((o) => deletedClients.has(o.live!.clientId)))
        ok(op, 'deleted with its client');
      await each(
        keyDeletes.filter((o) => !deletedClients.has(o.live!.clientId)),
        async (op) => gone(await keyKind.revokeKey(ctx, op.live!.clientId!, op.projectEnv!, op.live!.keyId!)),
      );
      await each(byKind('client', 'delete'), async (op) =>
        gone(await clients.deleteClient(ctx, op.live!.id!, op.projectEnv!)),
      );
      await each(byKind('template', 'delete'), async (op) =>
        gone(await templates.deleteTemplate(ctx, op.projectEnv!, op.live!.id!)),
      );
      await each(byKind('env', 'delete'), async (op) =>
        gone(await envs.deleteEnv(ctx, op.projectEnv!, op.live!.envId!)),
      );
      await each(byKind('project', 'delete'), async (op) => gone(await projects.deleteProject(ctx, op.projectEnv!)));
    },
  ];

  // A plan that issues keys checks its stores before its first write of any kind, so that a run
  // that cannot keep its keys (a store not writable, another service's secrets in it) changes nothing.
  if (plan.operations.some((o) => opWrites(o).length > 0)) {
    try {
      await ctx.beforeIssue();
    } catch (e) {
      result.stopReason = errorText(e);
      phases.length = 0;
    }
  }
  for (const phase of phases) {
    try {
      await phase();
    } catch (e) {
      // Raised before a request was sent (store not writable, journal not flushable, store broken).
      result.stopReason = errorText(e);
      break;
    } finally {
      await Promise.all(pendingStores.splice(0));
    }
    if (storeFailures.length > 0) {
      result.stopReason = `a secret-store write failed (${storeFailures.join('; ')}): the keys already issued are safe in the journal (run \`kms-sync secrets flush\` or apply again); no further key was issued`;
      break;
    }
    // Interrupted with nothing left to do: the run is complete all the same.
    if (stopped() && plan.operations.some((o) => !finished.has(o))) {
      result.interrupted = true;
      result.stopReason =
        'interrupted: the requests in flight finished and their keys were journaled; no new request was started';
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
  result.notAttempted = plan.operations.filter((o) => !finished.has(o));
  return result;
}

/** The secrets an operation writes (keys it issues). */
export function opWrites(op: Operation): { store?: string; secretName: string }[] {
  if (op.kind === 'client' && op.action === 'create')
    return keysOf(op).map((k) => ({ ...(k.secret.store ? { store: k.secret.store } : {}), secretName: k.secret.name }));
  if (op.kind === 'key' && (op.action === 'create' || op.action === 'rotate')) {
    const k = op.after as unknown as KeyAfter;
    return [{ ...(k.secret.store ? { store: k.secret.store } : {}), secretName: k.secret.name }];
  }
  return [];
}

/** Stores an operation writes keys to (undefined = the default store). */
export function opStores(op: Operation): (string | undefined)[] {
  if (op.kind === 'client' && op.action === 'create') return keysOf(op).map((k) => k.secret.store);
  if (op.kind === 'key' && op.action !== 'delete' && op.action !== 'update')
    return [(op.after as unknown as KeyAfter).secret.store];
  return [];
}
