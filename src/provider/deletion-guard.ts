// The deletion guard of the Terraform provider (DESIGN.md "Ownership and deletes", plan/deletion-guard.ts
// for the CLI and the agent): one plan must not delete or revoke more than a few objects at once,
// nor any key of a client marked protected, unless the operator approves it for that run. One
// removed .tf file must not revoke every partner's credentials, which re-creating would not give
// back (new keys). Terraform asks for each delete separately (PlanResourceChange with no proposed
// object), so the deletes a plan has are counted as they come, in the provider process that plans
// them; past the limit the plan fails before anything is deleted. The limit and the approval come
// from the environment (the operator's), never the provider block (the configuration a pull
// request edits).
import { DEFAULT_MAX_DELETES } from '../plan/deletion-guard.js';
import { DiagnosticError } from './diagnostics.js';

export const MAX_DELETES_ENV = 'KMS_SYNC_MAX_DELETES';
export const APPROVE_DELETES_ENV = 'KMS_SYNC_APPROVE_DELETES';

export class DeletionGuard {
  private readonly planned = new Set<string>();
  readonly maxDeletes: number;
  readonly approved: boolean;

  constructor(env: NodeJS.ProcessEnv) {
    const raw = env[MAX_DELETES_ENV]?.trim();
    const n = raw ? Number(raw) : NaN;
    if (raw && !(Number.isInteger(n) && n >= 0))
      throw new DiagnosticError(
        'Invalid KMS_SYNC_MAX_DELETES',
        `${JSON.stringify(raw)} is not a whole number of deletes (e.g. 25)`,
      );
    this.maxDeletes = raw ? n : DEFAULT_MAX_DELETES;
    this.approved = /^(1|true|yes)$/i.test(env[APPROVE_DELETES_ENV]?.trim() ?? '');
  }

  /** A planned delete of `address` (type and import id); throws once the plan has more than the limit. */
  countDelete(address: string): void {
    if (this.approved) return;
    this.planned.add(address);
    if (this.planned.size <= this.maxDeletes) return;
    throw new DiagnosticError(
      'Deletion guard',
      `this plan deletes or revokes more than ${this.maxDeletes} objects at once (${address} is number ${this.planned.size}), so terraform-provider-kms refuses to plan it: ` +
        "a removed file or module must not revoke every partner's credentials at once. If these deletes are meant, run the command again with " +
        `${MAX_DELETES_ENV}=<how many> (or ${APPROVE_DELETES_ENV}=1) in its environment, e.g. ${MAX_DELETES_ENV}=${Math.max(this.planned.size, this.maxDeletes + 1) * 2} terraform apply; ` +
        'or remove fewer resources per apply.',
    );
  }

  /** A planned revoke of a key of a client marked protected: refused unless approved. */
  protectedKey(address: string, client: string): void {
    if (this.approved) return;
    throw new DiagnosticError(
      'Deletion guard',
      `${address} is a key of ${client}, which is marked protected in the service (metadata kms-sync/protected): its revoke is held. ` +
        `If it is meant, run the command again with ${APPROVE_DELETES_ENV}=1 in its environment; or set protected = false on the client and apply first.`,
    );
  }
}
