// Keys of an existing client: issue (PUT /client with new key entries), update (entries with an
// id), revoke (DELETE /client?keyId). Issuing follows DESIGN.md "Keys": intent journaled → request
// → raw keys journaled (clearing the intent in the same write) → store. A lost response is
// resolved by comparing the exact key ids before and after: keys the request created whose raw
// value never arrived are orphans, recorded, replaced, then revoked — never a generation the
// request did not create, and never two raw values for one secret.
import { AmbiguousWriteError } from '../../api/http.js';
import { clientId, type ClientUpdate, type KeyInput, type WireClient, type WireKey } from '../../api/client.js';
import { parseTtl } from '../../model/index.js';
import type { KeyAfter } from '../../plan/types.js';
import { newOrphanId, type IssueIntent, type OrphanRecord } from '../../secrets/journal.js';
import { recordsOfLostResponse } from '../recover.js';
import { testPoint } from '../../model/test-hooks.js';
import { deleteIdempotent, type ApplyContext } from '../context.js';
import { KeyStoreFailure, type CapturedKey } from '../key-capture.js';

/** The client a key request goes to, as the plan read it. */
export interface KeyClientRef {
  id: string;
  name: string;
  projectEnv: string;
  /** Every key id the client had when it was read: anything else after a lost response is new. */
  knownKeyIds: string[];
}

export interface KeyUpdate {
  id: string;
  name: string;
  expiresAt?: string;
  autoRotate?: boolean;
}

export function expiryFor(k: KeyAfter, now: Date): string | null {
  return k.expiresAt ?? (k.ttl ? new Date(now.getTime() + parseTtl(k.ttl)).toISOString() : null);
}

export function keyInput(k: KeyAfter, now: Date): KeyInput {
  return {
    name: k.name,
    expiresAt: expiryFor(k, now),
    ...(k.autoRotate !== undefined ? { autoRotate: k.autoRotate } : {}),
  };
}

/** The raw keys of a response, each with where it goes; keys without a raw value are skipped. */
export function capturedFrom(
  projectEnv: string,
  client: WireClient,
  wanted: KeyAfter[],
  issued: WireKey[],
  now: Date,
): CapturedKey[] {
  return issued.flatMap((k) => {
    const target = wanted.find((w) => w.name === k.name);
    if (!k.key || !target) return [];
    return [
      {
        ...(target.secret.store ? { store: target.secret.store } : {}),
        secretName: target.secret.name,
        value: k.key,
        clientId: clientId(client),
        meta: {
          projectEnv,
          client: client.name,
          key: k.name,
          keyId: k.id,
          expiresAt: k.expiresAt ?? null,
          issuedAt: now.toISOString(),
        },
      },
    ];
  });
}

/**
 * Hands the raw keys of a response to the capture path (journal, then store in the background),
 * clearing `resolve` in the same journal write. Keys that could be saved nowhere are revoked.
 */
export async function captureKeys(
  ctx: ApplyContext,
  captured: CapturedKey[],
  resolve: string[],
  orphans: (OrphanRecord & { id: string })[] = [],
): Promise<void> {
  if (captured.length === 0) {
    if (resolve.length) await ctx.keys.resolve({ resolve });
    return;
  }
  let handle;
  try {
    handle = await ctx.keys.capture(captured, { resolve, ...(orphans.length ? { orphans } : {}) });
  } catch (e) {
    // Neither the journal nor a store took these raw keys: revoke them, so that no issued key is
    // lost (the intent stays pending; the next run finds them gone and issues them again).
    const unsaved = e instanceof KeyStoreFailure ? e.unsaved : captured;
    let revoked = 0;
    for (const k of unsaved) {
      try {
        await deleteIdempotent(() => ctx.api.deleteClient(k.clientId, k.meta.projectEnv, k.meta.keyId));
        revoked++;
      } catch {
        // reported below; the pending intent lets the next run find and revoke it
      }
    }
    throw new KeyStoreFailure(
      `${(e as Error).message}; ${revoked} of ${unsaved.length} key(s) that could be saved nowhere were revoked and will be issued again on the next run`,
    );
  }
  ctx.track(handle.stored);
}

/** Revokes one key; a key already gone counts as revoked. */
export async function revokeKey(ctx: ApplyContext, client: string, projectEnv: string, keyId: string) {
  await testPoint('before-revoke');
  return deleteIdempotent(async () => {
    await testPoint('revoke-sent');
    return ctx.api.deleteClient(client, projectEnv, keyId);
  });
}

/** A live key this write supersedes and revokes once its successor is stored (`rotate --revoke-old`). */
export interface SupersededKey {
  keyId: string;
  name: string;
}

/**
 * Issues `issue` and updates `updates` on one client in one PUT. Returns a note when a lost
 * response had to be recovered.
 */
export async function writeKeys(
  ctx: ApplyContext,
  client: KeyClientRef,
  issue: KeyAfter[],
  updates: KeyUpdate[],
  supersedes: SupersededKey[] = [],
): Promise<string | undefined> {
  const now = ctx.now();
  const body: ClientUpdate = {
    keys: [
      ...updates.map((u) => ({
        id: u.id,
        name: u.name,
        ...(u.expiresAt !== undefined ? { expiresAt: u.expiresAt } : {}),
        ...(u.autoRotate !== undefined ? { autoRotate: u.autoRotate } : {}),
      })),
      ...issue.map((k) => keyInput(k, now)),
    ],
  };
  const asked: IssueIntent = {
    type: 'issue',
    projectEnv: client.projectEnv,
    clientId: client.id,
    keyNames: issue.map((k) => k.name),
    knownKeyIds: client.knownKeyIds,
    ...(supersedes.length ? { supersedes } : {}),
  };
  let intent: string | undefined;
  if (issue.length) {
    await ctx.beforeIssue();
    intent = await ctx.keys.intend(asked);
  }
  let updated: WireClient;
  try {
    if (intent) await testPoint('issue-sent');
    updated = await ctx.api.updateClient(client.id, client.projectEnv, body);
  } catch (e) {
    if (!(e instanceof AmbiguousWriteError) || !intent) {
      // Refused: nothing was issued (an update-only PUT is retried by the transport and safe).
      if (intent) await ctx.keys.resolve({ resolve: [intent] });
      throw e;
    }
    return recoverLostKeyResponse(ctx, client, issue, updates, { id: intent, asked });
  }
  const fresh = (updated.keys ?? []).filter((k) => k.key);
  // The generations this write supersedes stop being held the moment their successors reach the
  // store: their pending revoke is journaled in the same write as the successors' raw keys, so a
  // run killed before the revoke leaves it to the next one (recover.ts), never a stranded key.
  const superseded = supersedes.filter((s) => fresh.some((k) => k.name === s.name));
  const record = superseded.length
    ? {
        ...orphanRecord(
          client,
          superseded.map((s) => ({ id: s.keyId, name: s.name }) as WireKey),
        )!,
        reason: 'superseded' as const,
      }
    : undefined;
  await captureKeys(
    ctx,
    capturedFrom(client.projectEnv, updated, issue, fresh, now),
    intent ? [intent] : [],
    record ? [record] : [],
  );
  return undefined;
}

async function recoverLostKeyResponse(
  ctx: ApplyContext,
  client: KeyClientRef,
  issue: KeyAfter[],
  updates: KeyUpdate[],
  intent: { id: string; asked: IssueIntent },
): Promise<string> {
  const live = await ctx.api.getClient(client.id, client.projectEnv);
  // The intent turns into its records (the keys it created, the generations it superseded) in
  // one durable write, exactly as the next run's recovery would turn it (recover.ts).
  const records = recordsOfLostResponse(intent.asked, live);
  await ctx.keys.resolve({ resolve: [intent.id], ...(records.length ? { orphans: records } : {}) });
  const lost = records.find((r) => r.reason !== 'superseded');
  // Revokes already pending are not recorded a second time with the re-issued key.
  const pending = new Set(records.filter((r) => r.reason === 'superseded').flatMap((r) => r.keyIds));
  const supersedes = (intent.asked.supersedes ?? []).filter((s) => !pending.has(s.keyId));
  await reissueAndRevoke(
    ctx,
    { ...client, knownKeyIds: (live.keys ?? []).map((k) => k.id) },
    lost,
    issue,
    updates,
    supersedes,
  );
  return `the response was lost; ${lost ? `${lost.keyIds.length} key(s) it had created without their raw value reaching us were replaced and revoked` : 'the request had not taken effect and was sent again'}`;
}

/** The orphan record for keys a lost request created (undefined when it created none). */
export function orphanRecord(client: KeyClientRef, orphans: WireKey[]): (OrphanRecord & { id: string }) | undefined {
  if (orphans.length === 0) return undefined;
  return {
    id: newOrphanId(),
    type: 'orphan',
    projectEnv: client.projectEnv,
    clientId: client.id,
    client: client.name,
    keyIds: orphans.map((k) => k.id),
    keyNames: orphans.map((k) => k.name),
  };
}

/**
 * The shared end of every recovery, once the orphans are recorded (in the same durable write that
 * cleared the lost request's intent): issue one replacement per key name, then revoke the orphans
 * and clear their record. A crash anywhere in here leaves the record for the next run.
 */
export async function reissueAndRevoke(
  ctx: ApplyContext,
  client: KeyClientRef,
  record: (OrphanRecord & { id: string }) | undefined,
  issue: KeyAfter[],
  updates: KeyUpdate[],
  supersedes: SupersededKey[] = [],
): Promise<void> {
  await writeKeys(ctx, client, issue, updates, supersedes);
  if (!record) return;
  for (const id of record.keyIds) await revokeKey(ctx, client.id, client.projectEnv, id);
  await ctx.keys.resolve({ resolve: [record.id] });
  ctx.recovered(
    `${record.keyIds.length} key(s) of ${client.projectEnv}/${client.name} (${record.keyNames.join(', ')}) were created by a request whose response was lost: re-issued, then revoked`,
  );
}
