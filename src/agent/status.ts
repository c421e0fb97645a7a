// What the agent knows about its last reconciles: served as JSON (/api/status), rendered as the
// status page (/) and read by the notifications. Plain data; no key, secret or credential is ever
// put in it (the plan carries none, and the JSON is redacted once more before it leaves).
import type { DriftCategory } from '../plan/drift.js';
import type { InventoryEntry } from '../plan/inventory.js';
import type { HealEntry } from './heals.js';
import type { ReconcileResult } from './metrics.js';

export type Mode = 'detect' | 'sync' | 'self-heal';
export type Trigger = 'start' | 'interval' | 'webhook' | 'resume' | 'manual';

export interface DriftEntry {
  category: DriftCategory;
  address: string;
  kind: string;
  projectEnv: string | null;
  detail: string;
  /** What applying would do (null: nothing). */
  action: string | null;
  fields: { path: string; before: unknown; after: unknown }[];
}

export interface EnvStatus {
  projectEnv: string;
  /** The live environment matched the configuration at the last reconcile. */
  synced: boolean;
  drift: number;
  byCategory: Partial<Record<DriftCategory, number>>;
  expiring7d: number;
  expiring30d: number;
}

export interface KeyExpiry {
  address: string;
  projectEnv: string;
  expiresAt: string;
  autoRotate: boolean;
}

export interface TimelineEvent {
  at: string;
  kind: 'rotated' | 'issued' | 'revoked' | 'healed';
  address: string;
  projectEnv: string;
  revision?: string;
}

export interface DeleteEntry {
  address: string;
  kind: string;
  projectEnv: string | null;
  reason: string;
}

export interface ReadyCondition {
  type: 'Ready';
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
}

export interface ReconcileRecord {
  startedAt: string;
  finishedAt: string;
  durationMs: number;
  trigger: Trigger;
  revision?: string;
  subject?: string;
  result: ReconcileResult;
  /** Operations the plan had, and those applied. */
  planned: number;
  applied: number;
  /** Errors with file:line for an invalid configuration; service or store errors otherwise. */
  errors: string[];
  note?: string;
  /** An operator overrode a closed sync window for this reconcile (POST /api/reconcile {"overrideSyncWindow": true}). */
  syncWindowOverride?: boolean;
  /** Ids of the heals this reconcile made (AgentStatus.heals). */
  heals?: number[];
}

/**
 * One row of the reconcile history (history.ts): a reconcile, or consecutive reconciles with the
 * same outcome folded into one (Flux's and Argo CD's "x N"). Its times and duration are the last
 * one's; `firstStartedAt` is when the first of the `count` started.
 */
export interface HistoryRow extends ReconcileRecord {
  count: number;
  firstStartedAt: string;
}

/** What the agent owns (Flux's inventory in a Kustomization's status), as kept in STATE/inventory.json. */
export interface InventoryStatus {
  updatedAt: string;
  revision?: string;
  count: number;
  byKind: Record<string, number>;
  /** The first INVENTORY_SHOWN entries, by address. */
  entries: InventoryEntry[];
}

export interface AgentStatus {
  agent: {
    version: string;
    mode: Mode;
    prune: boolean;
    repo: string;
    ref: string;
    path: string;
    intervalSeconds: number;
    suspended: boolean;
    startedAt: string;
    /** --sync-window specs (UTC), and whether one was open at the last reconcile. */
    syncWindows: string[];
    syncWindowOpen: boolean;
    /** --verify-commits: only revisions signed by an allowed key are reconciled. */
    verifyCommits?: boolean;
  };
  revision: {
    /** Last commit fetched from the source. */
    fetched?: string;
    /** Last commit whose configuration loaded (what the agent reconciles against). */
    lastGood?: string;
    /** Last commit applied in full (sync, self-heal). */
    synced?: string;
    /** The newest commit, when its configuration is invalid or (`unverified`) --verify-commits refused its signature (never applied). */
    invalid?: { revision: string; errors: string[]; unverified?: boolean };
  };
  sourceError?: string;
  /** The service could not be reached at the last reconcile: drift and sync states are unknown (stale). */
  serviceError?: string;
  /** Reconcile health, as Flux's Ready condition (and the kms_sync_reconcile_condition gauge). */
  condition: ReadyCondition;
  ready: boolean;
  /** Reconciles this process finished since it started (the history is kept across restarts and folds repeats: it is no count). */
  reconciles: number;
  lastReconcile?: ReconcileRecord;
  /** The reconcile history, newest first: kept in the state folder across restarts, repeats folded (HistoryRow.count), the newest HISTORY_MAX rows. */
  history: HistoryRow[];
  environments: EnvStatus[];
  drift: DriftEntry[];
  keys: { expiring7d: number; expiring30d: number; expiries: KeyExpiry[] };
  /** Owned resources that left the configuration, kept because the agent runs without --prune (Flux's "requires pruning"). */
  requiresPruning?: DeleteEntry[];
  /** Deletes the guard holds until approved (POST /api/approve-deletes with this revision). */
  heldDeletes?: { revision: string; reason: string; operations: DeleteEntry[] };
  /** Rotations and issues the agent made, newest first (bounded). */
  timeline: TimelineEvent[];
  /** What the agent owns: used for pruning and to find stripped ownership markers. */
  inventory?: InventoryStatus;
  /** Every change made outside kms-sync that the agent undid, newest first (bounded, kept across restarts). */
  heals: HealEntry[];
  /** Keys waiting in the journal for their store at the last reconcile (the agent is degraded until they are stored). */
  journalKeysWaiting?: number;
}

export const HISTORY_MAX = 50;
export const TIMELINE_MAX = 200;
/** Inventory entries shown in the status and on the page (the count is always whole). */
export const INVENTORY_SHOWN = 1000;
