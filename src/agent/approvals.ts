// Approvals of the deletes the deletion guard holds (POST /api/approve-deletes), kept in the
// state folder (STATE/approved-deletes.json) so that a restart neither loses one (the agent stopped
// between the approval and the reconcile that applies it) nor replays one: an approval names the
// revision and the deletes it approved, covers no delete it did not name (a larger set held later
// needs a new approval), and is used up once a revision is applied in full (its deletes ran).
import { readStateJson, writeStateJson } from '../engine/state-files.js';

export interface DeleteApproval {
  revision: string;
  /** The addresses of the held deletes approved. */
  addresses: string[];
  at: string;
}

/** Approvals kept at once (one per held revision is the rule; a few more cost nothing). */
const APPROVALS_MAX = 20;

function parseApprovals(v: unknown): DeleteApproval[] | undefined {
  if (!Array.isArray(v)) return undefined;
  return v
    .filter(
      (a): a is DeleteApproval =>
        typeof a === 'object' &&
        a !== null &&
        typeof a.revision === 'string' &&
        typeof a.at === 'string' &&
        Array.isArray(a.addresses) &&
        a.addresses.every((x: unknown) => typeof x === 'string'),
    )
    .slice(-APPROVALS_MAX);
}

export class DeleteApprovals {
  private list: DeleteApproval[] = [];
  private readonly file: string | undefined;

  constructor(file?: string) {
    this.file = file;
  }

  async load(onDamaged?: (why: string) => void): Promise<void> {
    if (this.file) this.list = (await readStateJson(this.file, parseApprovals, onDamaged)) ?? [];
  }

  /** The approvals kept (oldest first). */
  get all(): readonly DeleteApproval[] {
    return this.list;
  }

  async approve(revision: string, addresses: readonly string[], at = new Date()): Promise<void> {
    this.list = [
      ...this.list.filter((a) => a.revision !== revision),
      { revision, addresses: [...addresses].sort(), at: at.toISOString() },
    ].slice(-APPROVALS_MAX);
    await this.save();
  }

  /** Whether every one of these deletes of this revision was approved. */
  covers(revision: string, addresses: readonly string[]): boolean {
    const a = this.list.find((x) => x.revision === revision);
    if (!a) return false;
    const approved = new Set(a.addresses);
    return addresses.every((x) => approved.has(x));
  }

  /** A revision applied in full: its approval is used up, and one of an older revision is moot. */
  async clear(): Promise<void> {
    if (this.list.length === 0) return;
    this.list = [];
    await this.save();
  }

  private async save(): Promise<void> {
    if (this.file) await writeStateJson(this.file, this.list);
  }
}
