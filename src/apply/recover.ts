// What every planning command does first (DESIGN.md "Keys" 0 and 5): flush keys an earlier run
// left in the journal into their stores (a journaled key is a stored key), then turn the intents
// of requests whose response never arrived into orphans — keys live on the service whose raw
// value nobody holds — so that the plan re-issues and revokes them.
import { ApiError } from '../api/http.js';
import { clientId, type KmsClient, type WireClient } from '../api/client.js';
import { newOrphanId, type IssueIntent, type JournalIntent, type OrphanRecord } from '../secrets/journal.js';
import type { StoreRegistry } from '../secrets/registry.js';
import { errorText } from './context.js';
import type { JournaledKeyCapture } from './journaled-capture.js';

/** A live key whose raw value never reached us. */
export interface OrphanKey {
  projectEnv: string;
  clientId: string;
  client: string;
  keyId: string;
  keyName: string;
  /** A superseded generation (an interrupted `rotate --revoke-old`) is revoked, never re-issued. */
  reason?: 'lost-response' | 'superseded';
}

export interface Recovery {
  /** Keys flushed from the journal, per store (display URI). */
  flushed: { store: string; count: number }[];
  /** Orphans still live: the plan re-issues their key names and revokes them. */
  orphans: OrphanKey[];
  warnings: string[];
}

/** Human lines for the top of a plan: what the recovery did. */
export function describeRecovery(r: Recovery): string[] {
  const lines = r.flushed.map((f) => `Flushed ${f.count} key(s) from the journal into ${f.store}.`);
  const lost = r.orphans.filter((o) => o.reason !== 'superseded').length;
  const superseded = r.orphans.length - lost;
  if (lost)
    lines.push(
      `Found ${lost} key(s) issued by an interrupted run whose raw value never reached us: they are re-issued and revoked.`,
    );
  if (superseded)
    lines.push(
      `Found ${superseded} old key(s) that an interrupted rotate --revoke-old replaced but had not revoked yet: they are revoked now.`,
    );
  return lines;
}

async function getClient(api: KmsClient, id: string, projectEnv: string): Promise<WireClient | undefined> {
  try {
    return await api.getClient(id, projectEnv);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return undefined;
    throw e;
  }
}

/**
 * What replaces the intent of a key-issuing request whose response was lost, from its client as
 * re-read (by the run itself, or by the next one): the keys it created whose raw value never
 * arrived are orphans; and if it took effect, the live keys it superseded (`rotate --revoke-old`)
 * are pending revokes. Both go in the write that clears the intent: the intent is the only record
 * of those revokes, so clearing it without them leaves the old generation live with nobody to
 * revoke it (issue 40).
 */
export function recordsOfLostResponse(intent: IssueIntent, c: WireClient): (OrphanRecord & { id: string })[] {
  const known = new Set(intent.knownKeyIds);
  const names = new Set(intent.keyNames);
  const keys = (c.keys ?? []).filter((k) => names.has(k.name) && !known.has(k.id));
  if (keys.length === 0) return [];
  const of = { type: 'orphan' as const, projectEnv: intent.projectEnv, clientId: clientId(c), client: c.name };
  const lost = { id: newOrphanId(), ...of, keyIds: keys.map((k) => k.id), keyNames: keys.map((k) => k.name) };
  // The request took effect: the generations it superseded are revoked once the replacement of
  // the lost keys is stored (their secret then holds it), never given an overlap.
  const live = new Set((c.keys ?? []).map((k) => k.id));
  const superseded = (intent.supersedes ?? []).filter((s) => live.has(s.keyId) && keys.some((k) => k.name === s.name));
  return superseded.length
    ? [
        lost,
        {
          id: newOrphanId(),
          ...of,
          reason: 'superseded' as const,
          keyIds: superseded.map((s) => s.keyId),
          keyNames: superseded.map((s) => s.name),
        },
      ]
    : [lost];
}

/** The records an unresolved issue intent turns into, once its client(s) are re-read. */
async function orphansOfIntent(api: KmsClient, intent: IssueIntent): Promise<(OrphanRecord & { id: string })[]> {
  const clients: WireClient[] = [];
  if (intent.clientId) {
    const c = await getClient(api, intent.clientId, intent.projectEnv);
    if (c) clients.push(c);
  } else {
    for (const name of intent.clientNames ?? []) {
      const found = await api.listAll<WireClient>('/client', { project_env: intent.projectEnv, name }, 'list clients');
      clients.push(...found.filter((c) => c.name === name));
    }
  }
  return clients.flatMap((c) => recordsOfLostResponse(intent, c));
}

export async function recoverBeforePlan(
  api: KmsClient,
  capture: JournaledKeyCapture,
  registry: StoreRegistry,
  envsInScope: ReadonlySet<string>,
): Promise<Recovery> {
  const out: Recovery = { flushed: [], orphans: [], warnings: [] };
  const journal = capture.journal;

  // 1. Keys journaled by an earlier run go to their stores before anything is compared.
  const flush = await journal.flush((uri) => capture.storeFor(uri));
  const counts = new Map<string, number>();
  for (const f of flush.flushed) {
    const store = (await registry.get(f.storeUri)).displayUri;
    counts.set(store, (counts.get(store) ?? 0) + 1);
  }
  out.flushed = [...counts].map(([store, count]) => ({ store, count }));
  for (const f of flush.failed) {
    out.warnings.push(
      `${f.names.length} key(s) from an earlier run stay in the journal ${journal.path}: their store could not be written (${f.error.message}); they are not lost, and no new key is issued until they are flushed`,
    );
  }

  // 2. Intents of requests whose response never arrived become orphan records (one durable write).
  const pending: JournalIntent[] = await journal.intents();
  const inScope = pending.filter((i) => envsInScope.has(i.projectEnv));
  if (inScope.length < pending.length) {
    out.warnings.push(
      `${pending.length - inScope.length} record(s) of interrupted runs in ${journal.path} concern environments outside this run's scope; they are kept for a run that includes them`,
    );
  }
  const records: (OrphanRecord & { id: string })[] = [];
  for (const intent of inScope) {
    if (intent.type === 'orphan') {
      records.push(intent);
      continue;
    }
    try {
      const found = await orphansOfIntent(api, intent);
      records.push(...found);
      await journal.resolve({ resolve: [intent.id], orphans: found });
    } catch (e) {
      out.warnings.push(
        `could not re-read what an interrupted request in ${intent.projectEnv} created (${errorText(e)}); its record is kept for the next run`,
      );
    }
  }

  // 3. Which recorded orphans are still live? Records whose keys are all gone are cleared.
  const done: string[] = [];
  for (const r of records) {
    try {
      const c = await getClient(api, r.clientId, r.projectEnv);
      const live = new Set((c?.keys ?? []).map((k) => k.id));
      const still = r.keyIds.map((id, i) => ({ id, name: r.keyNames[i]! })).filter((k) => live.has(k.id));
      if (still.length === 0) done.push(r.id);
      for (const k of still)
        out.orphans.push({
          projectEnv: r.projectEnv,
          clientId: r.clientId,
          client: r.client,
          keyId: k.id,
          keyName: k.name,
          ...(r.reason ? { reason: r.reason } : {}),
        });
    } catch (e) {
      out.warnings.push(
        `could not check orphan key(s) of ${r.projectEnv}/${r.client} (${errorText(e)}); the record is kept`,
      );
    }
  }
  if (done.length) await journal.resolve({ resolve: done });
  await journal.compact();
  return out;
}
