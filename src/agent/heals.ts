// The record of every heal (issue 36): each change made outside kms-sync that the agent undid —
// what changed (address, fields, live value → restored value, as the plan shows them: no key is
// ever in a plan, and the status is redacted once more when it leaves), when, and at which
// revision. Kept in the state folder (STATE/heals.json), so it survives restarts; bounded (the
// newest HEALS_MAX); deduplicated: the same heal again (someone re-opens the same client the same
// way) bumps the count and the time of its row instead of filling the history with copies.
import type { Operation } from '../plan/types.js';
import { readStateJson, writeStateJson } from '../engine/state-files.js';

export const HEALS_MAX = 200;
/** Field values longer than this are cut in the record (a 16 MB metadata value is not kept). */
const VALUE_MAX = 500;

export interface HealEntry {
  /** Increasing number of the heal (notifications say each once). */
  id: number;
  /** When it was first healed, and last (the same heal again). */
  at: string;
  lastAt: string;
  /** How many times this same heal was made. */
  count: number;
  revision: string;
  address: string;
  kind: string;
  projectEnv: string | null;
  action: string;
  /** What the plan said: the fields changed, or "ownership marker removed …", or "client does not exist". */
  reason: string;
  /** The fields changed back: `before` the live value found, `after` the one restored. */
  fields: { path: string; before: unknown; after: unknown }[];
}

/**
 * Whether an applied operation undid a change made outside kms-sync: an update of what drift
 * calls changed outside (the applied digest or the inventory's record says the live object moved),
 * or a create of what went missing while the revision stayed the same (deleted outside). A
 * difference nothing recorded can place (no digest) counts as a heal only between revisions:
 * with a new revision it may be that revision's own change.
 */
export function isHeal(op: Operation, newRevision: boolean): boolean {
  if (op.action === 'update' || op.action === 'replace')
    return (
      op.drift === 'outside' ||
      op.drift === 'both' ||
      (op.drift === undefined && !newRevision && op.actionReason === 'update_changed')
    );
  return op.action === 'create' && op.actionReason === 'create_missing' && !newRevision;
}

const cut = (v: unknown): unknown => {
  const text = JSON.stringify(v) ?? 'null';
  return text.length > VALUE_MAX ? `${text.slice(0, VALUE_MAX)}… (cut)` : v;
};

function parseHeals(v: unknown): HealEntry[] | undefined {
  if (!Array.isArray(v)) return undefined;
  return v
    .filter(
      (e): e is HealEntry =>
        typeof e === 'object' &&
        e !== null &&
        typeof e.id === 'number' &&
        typeof e.address === 'string' &&
        typeof e.at === 'string' &&
        typeof e.lastAt === 'string' &&
        typeof e.count === 'number' &&
        typeof e.revision === 'string' &&
        Array.isArray(e.fields),
    )
    .slice(0, HEALS_MAX);
}

export class HealHistory {
  /** Newest first. */
  entries: HealEntry[] = [];
  private readonly file: string | undefined;

  constructor(file?: string) {
    this.file = file;
  }

  async load(onDamaged?: (why: string) => void): Promise<void> {
    if (!this.file) return;
    this.entries = (await readStateJson(this.file, parseHeals, onDamaged)) ?? [];
  }

  /** Records the heals of one apply; returns the entries made or bumped (each is one heal to notify). */
  async record(ops: readonly Operation[], revision: string, at: Date): Promise<HealEntry[]> {
    if (ops.length === 0) return [];
    const when = at.toISOString();
    const touched: HealEntry[] = [];
    // Built aside and kept once written: what the status shows is what the state folder holds.
    let entries = [...this.entries];
    let next = (entries[0]?.id ?? 0) + 1;
    for (const op of ops) {
      const fields = op.changes.map((c) => ({ path: c.path, before: cut(c.before), after: cut(c.after) }));
      const last = entries.find((e) => e.address === op.address);
      // The same heal as the last one of this address (same revision, action and fields): one row, counted.
      if (
        last &&
        last.revision === revision &&
        last.action === op.action &&
        JSON.stringify(last.fields) === JSON.stringify(fields)
      ) {
        const bumped = { ...last, count: last.count + 1, lastAt: when, id: next++ };
        entries = [bumped, ...entries.filter((e) => e !== last)];
        touched.push(bumped);
        continue;
      }
      const entry: HealEntry = {
        id: next++,
        at: when,
        lastAt: when,
        count: 1,
        revision,
        address: op.address,
        kind: op.kind,
        projectEnv: op.projectEnv ?? null,
        action: op.action,
        reason: op.reason,
        fields,
      };
      entries.unshift(entry);
      touched.push(entry);
    }
    entries.length = Math.min(entries.length, HEALS_MAX);
    if (this.file) await writeStateJson(this.file, entries);
    this.entries = entries;
    return touched;
  }
}
