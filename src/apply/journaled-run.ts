// One apply of a plan through the journal, as every writer runs it (the CLI's apply/rotate/destroy
// and the agent): the scheduler, then the orphan records its revokes settled, the journal compacted
// (the file goes when nothing in it is live), and the owner id recorded where the run keeps its state.
import { writeOwnerRecord } from '../model/owner.js';
import type { Plan } from '../plan/types.js';
import { applyPlan, type ApplyEvent, type ApplyResult } from './execute.js';
import type { JournaledKeyCapture } from './journaled-capture.js';
import type { KmsClient } from '../api/client.js';

export interface JournaledApplyOptions {
  api: KmsClient;
  plan: Plan;
  capture: JournaledKeyCapture;
  /** Where `.kms-sync/owner` is recorded (the configuration folder; the agent's state folder). */
  ownerDir: string;
  parallelism: number;
  onEvent?: (e: ApplyEvent) => void;
  /** Aborted on an interrupt: no new request starts, the ones in flight finish and journal their keys. */
  signal?: AbortSignal;
  onWarning?: (line: string) => void;
}

export async function applyJournaled(o: JournaledApplyOptions): Promise<ApplyResult> {
  const result = await applyPlan({
    api: o.api,
    plan: o.plan,
    keys: o.capture,
    parallelism: o.parallelism,
    ...(o.onEvent ? { onEvent: o.onEvent } : {}),
    ...(o.signal ? { signal: o.signal } : {}),
  });
  // Orphan records whose keys this run revoked are done (orphans of lost responses, and
  // generations a rotation superseded and revoked); then the journal goes if nothing is live.
  await o.capture.journal.resolveOrphans(
    new Set(result.done.filter((op) => op.kind === 'key' && op.action === 'delete').map((op) => op.live!.keyId!)),
  );
  await o.capture.compact();
  // What this run wrote carries its owner id: recorded, so that a later run notices if it moves.
  if (result.done.length > 0) {
    await writeOwnerRecord(o.ownerDir, o.plan.target.owner).catch((e: unknown) =>
      o.onWarning?.(`could not record the owner id in ${o.ownerDir}: ${(e as Error).message}`),
    );
  }
  return result;
}
