// The agent's Prometheus metrics (prom-client, its own registry): every family of the agent is named
// kms_sync_…, and the process's are the standard process_… and nodejs_… (what dashboards and alerts
// for any Node.js service query); labels carry environments, categories, results and the revision
// in snake_case, never a key, a secret or a client's name (a name is the service's text and unbounded).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { KmsClient } from '../api/client.js';

/** `degraded`: the reconcile ran, but keys wait in the journal for their store (not stored yet: no success). */
export type ReconcileResult = 'success' | 'degraded' | 'failed' | 'invalid' | 'source_error' | 'locked' | 'interrupted';

export class AgentMetrics {
  readonly registry = new Registry();
  readonly reconciles: Counter<'result'>;
  readonly reconcileSeconds: Histogram<'result'>;
  readonly syncedRevision: Gauge<'revision'>;
  readonly fetchedRevision: Gauge<'revision'>;
  readonly drift: Gauge<'environment' | 'category'>;
  readonly expiring: Gauge<'environment' | 'within'>;
  readonly envSynced: Gauge<'environment'>;
  readonly operations: Counter<'action'>;
  readonly keysIssued: Counter;
  readonly apiRequests: Counter<'kind'>;
  readonly apiRetries: Counter;
  readonly lockWaitSeconds: Histogram;
  readonly lockContended: Counter;
  readonly webhooks: Counter<'provider' | 'result'>;
  readonly notifications: Counter<'kind' | 'result'>;
  readonly suspended: Gauge;
  readonly condition: Gauge<'type' | 'status'>;
  readonly requiresPruning: Gauge;
  readonly deletesHeld: Gauge;
  readonly journalKeysWaiting: Gauge;
  readonly inventoryItems: Gauge<'kind'>;
  readonly heals: Counter<'kind'>;
  readonly syncWindowOpen: Gauge;
  readonly lastReconcile: Gauge;
  readonly lastSuccess: Gauge;
  private api: KmsClient | undefined;
  private seenRequests = new Map<string, number>();

  constructor() {
    const r = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.reconciles = new Counter({
      name: 'kms_sync_reconcile_total',
      help: 'Reconcile cycles by result',
      labelNames: ['result'],
      registers: r,
    });
    this.reconcileSeconds = new Histogram({
      name: 'kms_sync_reconcile_duration_seconds',
      help: 'Duration of reconcile cycles by result',
      labelNames: ['result'],
      buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
      registers: r,
    });
    this.syncedRevision = new Gauge({
      name: 'kms_sync_synced_revision_info',
      help: 'The revision last applied (value 1; the revision is the label)',
      labelNames: ['revision'],
      registers: r,
    });
    this.fetchedRevision = new Gauge({
      name: 'kms_sync_source_revision_info',
      help: 'The revision last fetched from the source (value 1)',
      labelNames: ['revision'],
      registers: r,
    });
    this.drift = new Gauge({
      name: 'kms_sync_drift_items',
      help: 'Drift items found by the last reconcile, by environment and category',
      labelNames: ['environment', 'category'],
      registers: r,
    });
    this.expiring = new Gauge({
      name: 'kms_sync_keys_expiring',
      help: 'Live keys expiring within 7 or 30 days, by environment',
      labelNames: ['environment', 'within'],
      registers: r,
    });
    this.envSynced = new Gauge({
      name: 'kms_sync_environment_synced',
      help: '1 when the environment matched the configuration at the last reconcile',
      labelNames: ['environment'],
      registers: r,
    });
    this.operations = new Counter({
      name: 'kms_sync_operations_applied_total',
      help: 'Operations applied by action',
      labelNames: ['action'],
      registers: r,
    });
    this.keysIssued = new Counter({
      name: 'kms_sync_keys_stored_total',
      help: 'New keys issued and stored',
      registers: r,
    });
    const self = this;
    this.apiRequests = new Counter({
      name: 'kms_sync_api_requests_total',
      help: 'Requests sent to the key-management service, by kind',
      labelNames: ['kind'],
      registers: r,
      collect() {
        const counts = self.api?.http.requestCounts ?? {};
        for (const [kind, n] of Object.entries(counts)) {
          const delta = n - (self.seenRequests.get(kind) ?? 0);
          if (delta > 0) this.inc({ kind: snakeCase(kind) }, delta);
          self.seenRequests.set(kind, n);
        }
      },
    });
    this.apiRetries = new Counter({
      name: 'kms_sync_api_retries_total',
      help: 'Requests retried after a retryable failure',
      registers: r,
    });
    this.lockWaitSeconds = new Histogram({
      name: 'kms_sync_lock_wait_seconds',
      help: 'Time spent taking the run lock',
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 30, 60],
      registers: r,
    });
    this.lockContended = new Counter({
      name: 'kms_sync_lock_waits_total',
      help: 'Times the run lock was held by another run',
      registers: r,
    });
    this.webhooks = new Counter({
      name: 'kms_sync_webhook_requests_total',
      help: 'Webhook requests by provider and result',
      labelNames: ['provider', 'result'],
      registers: r,
    });
    this.notifications = new Counter({
      name: 'kms_sync_notifications_total',
      help: 'Notifications sent, by kind and result',
      labelNames: ['kind', 'result'],
      registers: r,
    });
    this.requiresPruning = new Gauge({
      name: 'kms_sync_requires_pruning',
      help: 'Owned resources that left the configuration and are kept because the agent runs without --prune',
      registers: r,
    });
    this.deletesHeld = new Gauge({
      name: 'kms_sync_deletes_held',
      help: 'Deletes and revokes the deletion guard holds until approved',
      registers: r,
    });
    this.journalKeysWaiting = new Gauge({
      name: 'kms_sync_journal_keys_waiting',
      help: 'Keys waiting in the journal for their secret store (issued, not stored yet) at the last reconcile',
      registers: r,
    });
    this.inventoryItems = new Gauge({
      name: 'kms_sync_inventory_items',
      help: 'What the agent owns (its inventory), by kind',
      labelNames: ['kind'],
      registers: r,
    });
    this.heals = new Counter({
      name: 'kms_sync_heals_total',
      help: 'Changes made outside kms-sync that the agent undid, by kind of resource',
      labelNames: ['kind'],
      registers: r,
    });
    this.condition = new Gauge({
      name: 'kms_sync_reconcile_condition',
      help: "The Ready condition of the last reconcile (1 for its status: True, False or Unknown), as Flux's gotk_reconcile_condition",
      labelNames: ['type', 'status'],
      registers: r,
    });
    this.suspended = new Gauge({
      name: 'kms_sync_suspended',
      help: '1 while reconciliation is suspended',
      registers: r,
    });
    this.syncWindowOpen = new Gauge({
      name: 'kms_sync_sync_window_open',
      help: '1 when writes were allowed at the last reconcile (inside a sync window, or none configured)',
      registers: r,
    });
    this.lastReconcile = new Gauge({
      name: 'kms_sync_last_reconcile_timestamp_seconds',
      help: 'When the last reconcile ended',
      registers: r,
    });
    this.lastSuccess = new Gauge({
      name: 'kms_sync_last_success_timestamp_seconds',
      help: 'When the last successful reconcile ended',
      registers: r,
    });
  }

  /** The API client whose request counts the metrics report. */
  watch(api: KmsClient): void {
    this.api = api;
    this.seenRequests = new Map(Object.entries(api.http.requestCounts));
  }

  setRevision(gauge: Gauge<'revision'>, revision: string): void {
    gauge.reset();
    gauge.set({ revision }, 1);
  }
}

/** A label value in snake_case: the API client's request kinds read `list clients`, `delete key`. */
export function snakeCase(value: string): string {
  return value
    .trim()
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '');
}
