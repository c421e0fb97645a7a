// Clients: bulk create with their first keys (POST /client, array body), update (PUT), delete.
// A create whose response is lost is resolved by re-reading the environment by name: a client
// that exists now was created by that request (the plan saw none), so its keys are orphans.
import { testPoint } from '../../model/test-hooks.js';
import { AmbiguousWriteError } from '../../api/http.js';
import { clientId, type ClientInput, type ClientUpdate, type WireClient } from '../../api/client.js';
import type { JsonObject } from '../../model/index.js';
import type { KeyAfter } from '../../plan/types.js';
import { deleteIdempotent, errorText, type ApplyContext } from '../context.js';
import { captureKeys, capturedFrom, keyInput, orphanRecord, reissueAndRevoke, type KeyClientRef } from './key.js';

/** A client to create: its desired attributes (template by name) and its keys. */
export interface ClientCreate {
  name: string;
  type?: string;
  template: string;
  ipWhitelist?: string[];
  metadata: JsonObject;
  keys: KeyAfter[];
}

/** A failed create carries its error (`cause`) and whether the client may exist now (`unknown`). */
export type CreateOutcome =
  | { ok: true; id: string; note?: string }
  | { ok: false; error: string; cause?: unknown; unknown?: boolean };

/** The fields of a client update; only those present are sent. */
export interface ClientChange {
  type?: string;
  template?: string;
  ipWhitelist?: string[];
  metadata?: JsonObject;
}

async function inputOf(ctx: ApplyContext, projectEnv: string, c: ClientCreate): Promise<ClientInput> {
  const now = ctx.now();
  return {
    name: c.name,
    ...(c.type !== undefined ? { type: c.type } : {}),
    templateId: await ctx.templates.id(projectEnv, c.template),
    ...(c.ipWhitelist !== undefined ? { ipWhitelist: c.ipWhitelist } : {}),
    metadata: c.metadata,
    keys: c.keys.map((k) => keyInput(k, now)),
  };
}

/** Creates up to BULK_LIMIT clients of one environment in one request; one outcome per client. */
export async function createClients(
  ctx: ApplyContext,
  projectEnv: string,
  items: ClientCreate[],
): Promise<CreateOutcome[]> {
  let bodies: ClientInput[];
  try {
    bodies = await Promise.all(items.map((c) => inputOf(ctx, projectEnv, c)));
  } catch (e) {
    return items.map(() => ({ ok: false, error: errorText(e), cause: e }));
  }
  const keyNames = [...new Set(items.flatMap((c) => c.keys.map((k) => k.name)))];
  let intent: string | undefined;
  if (keyNames.length) {
    await ctx.beforeIssue();
    intent = await ctx.keys.intend({
      type: 'issue',
      projectEnv,
      clientNames: items.map((c) => c.name),
      keyNames,
      knownKeyIds: [],
    });
  }
  let created: WireClient[];
  try {
    if (intent) await testPoint('issue-sent');
    created = await ctx.api.createClients(projectEnv, bodies);
  } catch (e) {
    if (!(e instanceof AmbiguousWriteError)) {
      if (intent) await ctx.keys.resolve({ resolve: [intent] });
      return items.map(() => ({ ok: false, error: errorText(e), cause: e }));
    }
    return recoverLostCreate(ctx, projectEnv, items, intent);
  }
  // Keys first: the raw values exist only in this response.
  const now = ctx.now();
  try {
    await captureKeys(
      ctx,
      created.flatMap((c, i) => capturedFrom(projectEnv, c, items[i]!.keys, c.keys ?? [], now)),
      intent ? [intent] : [],
    );
  } catch (e) {
    return items.map(() => ({ ok: false, error: errorText(e), cause: e }));
  }
  return created.map((c) => ({ ok: true, id: clientId(c) }));
}

async function recoverLostCreate(
  ctx: ApplyContext,
  projectEnv: string,
  items: ClientCreate[],
  intent: string | undefined,
): Promise<CreateOutcome[]> {
  // Re-read every client of the batch first, then record all orphans and clear the batch intent
  // in one write: from then on each client is recovered on its own.
  const found: (WireClient | undefined | Error)[] = await Promise.all(
    items.map(async (c) => {
      try {
        const matches = (
          await ctx.api.listAll<WireClient>('/client', { project_env: projectEnv, name: c.name }, 'list clients')
        ).filter((x) => x.name === c.name);
        if (matches.length > 1)
          return new Error(`${matches.length} clients named '${c.name}' exist after a lost response; resolve by hand`);
        return matches[0];
      } catch (e) {
        return e instanceof Error ? e : new Error(String(e));
      }
    }),
  );
  const failedRead = found.find((f) => f instanceof Error);
  if (failedRead) {
    // The intent stays: the next run re-reads and revokes whatever this request created.
    return items.map((_, i) => ({
      ok: false,
      unknown: true,
      error: `outcome unknown: the response was lost and re-reading it failed (${found[i] instanceof Error ? (found[i] as Error).message : failedRead.message}); the next run re-reads it`,
    }));
  }
  const refs = items.map((c, i): KeyClientRef | undefined => {
    const live = found[i] as WireClient | undefined;
    return live
      ? { id: clientId(live), name: c.name, projectEnv, knownKeyIds: (live.keys ?? []).map((k) => k.id) }
      : undefined;
  });
  // Every key of a client this request created is an orphan: none of their raw values arrived.
  const records = items.map((c, i) => {
    const live = found[i] as WireClient | undefined;
    return live
      ? orphanRecord(
          refs[i]!,
          (live.keys ?? []).filter((k) => c.keys.some((w) => w.name === k.name)),
        )
      : undefined;
  });
  const orphans = records.filter((r) => r !== undefined);
  if (intent || orphans.length) await ctx.keys.resolve({ resolve: intent ? [intent] : [], orphans });
  const out: CreateOutcome[] = [];
  for (const [i, c] of items.entries()) {
    const ref = refs[i];
    try {
      if (!ref) {
        const [again] = await createClients(ctx, projectEnv, [c]);
        out.push(
          again!.ok
            ? { ...again!, note: 'created again after a lost response (the first attempt had not taken effect)' }
            : again!,
        );
        continue;
      }
      await reissueAndRevoke(ctx, ref, records[i], c.keys, []);
      out.push({
        ok: true,
        id: ref.id,
        note: 'created; the response was lost: its keys were re-issued and the ones whose raw value never reached us revoked',
      });
    } catch (e) {
      out.push({ ok: false, error: errorText(e), cause: e });
    }
  }
  return out;
}

/** Updates the given fields of one client. */
export async function updateClient(
  ctx: ApplyContext,
  id: string,
  projectEnv: string,
  change: ClientChange,
): Promise<void> {
  const body: ClientUpdate = {
    ...(change.type !== undefined ? { type: change.type } : {}),
    ...(change.template !== undefined ? { templateId: await ctx.templates.id(projectEnv, change.template) } : {}),
    ...(change.ipWhitelist !== undefined ? { ipWhitelist: change.ipWhitelist } : {}),
    ...(change.metadata !== undefined ? { metadata: change.metadata } : {}),
  };
  await ctx.api.updateClient(id, projectEnv, body);
}

/** Deletes a client and its keys; one already gone counts as deleted. */
export function deleteClient(ctx: ApplyContext, id: string, projectEnv: string) {
  return deleteIdempotent(() => ctx.api.deleteClient(id, projectEnv));
}
