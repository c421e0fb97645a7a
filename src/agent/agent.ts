// The agent: a scheduler that runs the reconciler on an interval and on signed webhooks, can be
// suspended and resumed (Flux's `suspend`, kept across restarts in the state folder), serves its
// metrics, status and page, and stops the way an interrupted apply does: the reconcile in flight
// starts no new request, the ones in flight finish and journal their keys, the lock is released.
import { existsSync } from 'node:fs';
import { mkdir, rm, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Connection } from '../engine/run.js';
import type { AccessPolicy } from './access.js';
import type { ConfigLimits } from '../config/limits.js';
import type { Logger } from './log.js';
import { AgentMetrics } from './metrics.js';
import { Reconciler } from './reconciler.js';
import { startServer, type PushEvent } from './server.js';
import { ownStateFolder, type StateOwnership } from './state-owner.js';
import { GitSource, shownRepo } from './source.js';
import type { AgentStatus, Mode, ReconcileRecord, Trigger } from './status.js';
import type { Notifier } from './notify.js';
import { DEFAULT_POLICY, type OperatorPolicy } from '../model/index.js';
import type { SyncWindow } from './windows.js';
import { DeleteApprovals } from './approvals.js';
import { HealHistory } from './heals.js';
import { atomicWriteFile } from '../secrets/fsutil.js';
import { ReconcileHistory } from './history.js';

export interface AgentOptions {
  repo: string;
  ref?: string;
  path: string;
  cdktf: boolean;
  intervalMs: number;
  mode: Mode;
  prune: boolean;
  /** Also delete unmanaged resources in scope (--prune-unmanaged). */
  pruneUnmanaged?: boolean;
  /** The deletion guard (--max-deletes; default 10). */
  maxDeletes?: number;
  suspend: boolean;
  listen: { host: string; port: number };
  stateDir: string;
  conn: Connection;
  /** The operator's policy (flags, environment, a policy file outside the checkout): the default one when absent. */
  policy?: OperatorPolicy;
  parallelism: number;
  lockTimeoutMs?: number;
  log: Logger;
  /** Who may read and write over HTTP (access.ts). */
  access: AccessPolicy;
  githubSecret?: string;
  gitlabToken?: string;
  /** Built with the agent's metrics (it counts what it sends). */
  notifier?: (metrics: AgentMetrics) => Notifier;
  windows?: SyncWindow[];
  env?: NodeJS.ProcessEnv;
  /** The metrics (default: new ones); the caller makes them when it must count before the agent starts (API retries). */
  metrics?: AgentMetrics;
  /** A reconcile in flight longer than this means the loop is stuck: /healthz fails (default 15 minutes). */
  stuckAfterMs?: number;
  /** Sizes of the configuration's files (default: config/limits.ts defaults). */
  limits?: ConfigLimits;
  /** Longest one git command may take (--git-timeout; default 2 minutes). */
  gitTimeoutMs?: number;
  /** --verify-commits: the ssh allowed-signers file whose keys must have signed a revision. */
  verifyCommits?: string;
  /** --allow-empty: a configuration with no project or environment is reconciled, not invalid. */
  allowEmpty?: boolean;
}

export interface RunningAgent {
  url: string;
  /** Finishes the reconcile in flight as an interrupted apply does, then closes the server. */
  stop(): Promise<void>;
  /** Resolves when the agent stopped. */
  done: Promise<void>;
}

/** Where the agent keeps what must survive a restart and never sits in the checkout. */
export function stateLayout(stateDir: string) {
  return {
    checkout: path.join(stateDir, 'source'),
    /** Relative store paths of the configuration, the default store, the journal, the run lock and the owner record. */
    store: path.join(stateDir, 'store'),
    ageKeyFile: path.join(stateDir, 'age', 'keys.txt'),
    suspended: path.join(stateDir, 'suspended'),
    lastGood: path.join(stateDir, 'last-good-revision'),
    synced: path.join(stateDir, 'synced-revision'),
    /** The revision being loaded, or found invalid (kept across restarts: a load killed by memory is not retried for ever). */
    loading: path.join(stateDir, 'loading-revision'),
    /** What this configuration created or claimed (plan/inventory.ts). */
    inventory: path.join(stateDir, 'inventory.json'),
    /** The record of every heal (heals.ts). */
    heals: path.join(stateDir, 'heals.json'),
    /** The reconcile history (history.ts). */
    history: path.join(stateDir, 'history.json'),
    /** Deletes approved through the API, until they run (approvals.ts). */
    approvals: path.join(stateDir, 'approved-deletes.json'),
  };
}

export async function startAgent(o: AgentOptions): Promise<RunningAgent> {
  const layout = stateLayout(o.stateDir);
  await mkdir(layout.store, { recursive: true, mode: 0o700 });
  const metrics = o.metrics ?? new AgentMetrics();
  metrics.watch(o.conn.api);
  const suspended = o.suspend || existsSync(layout.suspended);
  if (o.suspend) await atomicWriteFile(layout.suspended, `${new Date().toISOString()}\n`);
  const heals = new HealHistory(layout.heals);
  const approvals = new DeleteApprovals(layout.approvals);
  const history = new ReconcileHistory(layout.history);
  // Read at start (the status shows them at once) and again once the folder is this agent's: one
  // that waited for another agent's folder would otherwise write back what that one has since changed.
  const loadRecords = async (say: boolean) => {
    const damaged = (file: string) => (why: string) => {
      if (say) o.log.warn(`${path.basename(file)} in the state folder ${why}; it starts empty`);
    };
    await heals.load(damaged(layout.heals));
    await approvals.load(damaged(layout.approvals));
    await history.load(damaged(layout.history));
  };
  await loadRecords(false);
  const status: AgentStatus = {
    agent: {
      version: '0.1.0',
      mode: o.mode,
      prune: o.prune,
      repo: shownRepo(o.repo),
      ref: o.ref ?? '(default branch)',
      path: o.path || '.',
      intervalSeconds: o.intervalMs / 1000,
      suspended,
      startedAt: new Date().toISOString(),
      syncWindows: (o.windows ?? []).map((w) => w.spec),
      syncWindowOpen: true,
      verifyCommits: Boolean(o.verifyCommits),
    },
    revision: {},
    ready: false,
    condition: {
      type: 'Ready',
      status: 'Unknown',
      reason: 'Progressing',
      message: 'no reconcile yet',
      lastTransitionTime: new Date().toISOString(),
    },
    reconciles: 0,
    history: history.rows,
    environments: [],
    drift: [],
    keys: { expiring7d: 0, expiring30d: 0, expiries: [] },
    timeline: [],
    heals: heals.entries,
  };
  metrics.suspended.set(suspended ? 1 : 0);
  const source = new GitSource({
    repo: o.repo,
    ...(o.ref ? { ref: o.ref } : {}),
    dir: layout.checkout,
    ...(o.env ? { env: o.env } : {}),
    ...(o.gitTimeoutMs !== undefined ? { timeoutMs: o.gitTimeoutMs } : {}),
  });
  const notifier = o.notifier?.(metrics);
  let ownership: StateOwnership | undefined;
  const reconciler = new Reconciler({
    incarnation: () => ownership?.incarnation,
    source,
    path: o.path,
    cdktf: o.cdktf,
    mode: o.mode,
    prune: o.prune,
    pruneUnmanaged: Boolean(o.pruneUnmanaged),
    ...(o.maxDeletes !== undefined ? { maxDeletes: o.maxDeletes } : {}),
    approvals,
    heals,
    history,
    inventoryFile: layout.inventory,
    storeDir: layout.store,
    conn: o.conn,
    parallelism: o.parallelism,
    policy: o.policy ?? { ...DEFAULT_POLICY, sources: [] },
    ...(o.lockTimeoutMs !== undefined ? { lockTimeoutMs: o.lockTimeoutMs } : {}),
    ...(o.windows ? { windows: o.windows } : {}),
    log: o.log,
    metrics,
    status,
    lastGoodFile: layout.lastGood,
    syncedFile: layout.synced,
    loadingFile: layout.loading,
    ...(o.limits ? { limits: o.limits } : {}),
    ...(o.verifyCommits ? { verifyCommits: o.verifyCommits } : {}),
    ...(o.allowEmpty ? { allowEmpty: true } : {}),
  });

  const stopping = new AbortController();
  let wake: (() => void) | undefined;
  let pending: Trigger | undefined;
  const sleep = () =>
    new Promise<Trigger>((resolve) => {
      const timer = setTimeout(() => {
        wake = undefined;
        resolve('interval');
      }, o.intervalMs);
      wake = () => {
        clearTimeout(timer);
        wake = undefined;
        resolve(pending ?? 'manual');
      };
    });
  /** An operator asked that the next reconcile write even outside the sync windows (POST /api/reconcile). */
  let windowOverride = false;
  const trigger = (t: Trigger) => {
    pending ??= t;
    wake?.();
  };

  // Readiness: can this pod serve and reconcile (the HTTP server answers, it owns its state folder,
  // and the folder takes a write)? Not what reconciles found: a pod taken out of its Service on an
  // invalid commit or a service outage could not receive the webhook of the fix. Reconcile health
  // is the Ready condition (status, metrics, page).
  let writable: { at: number; ok: boolean; why: string } | undefined;
  const probeFile = path.join(o.stateDir, '.ready-probe');
  const readiness = async () => {
    if (!ownership) return { ok: false, why: 'waiting for the state folder (another agent holds it)' };
    if (!writable || Date.now() - writable.at > 5000) {
      writable = await writeFile(probeFile, 'ok\n', { mode: 0o600 })
        .then(() => unlink(probeFile))
        .then(
          () => ({ at: Date.now(), ok: true, why: 'ok' }),
          (e: NodeJS.ErrnoException) => ({
            at: Date.now(),
            ok: false,
            why: `the state folder ${o.stateDir} does not take a write (${e.code ?? e.message})`,
          }),
        );
    }
    return { ok: writable.ok, why: writable.why };
  };
  // Liveness: the process answers, and its loop is not stuck in one reconcile (a hung request or
  // git); a restart then gets it going again (the next start recovers what was cut off).
  let busySince: number | undefined;
  const stuckAfterMs = o.stuckAfterMs ?? 15 * 60_000;
  const liveness = () => {
    if (busySince === undefined || Date.now() - busySince <= stuckAfterMs) return { ok: true, why: 'ok' };
    return {
      ok: false,
      why: `one reconcile has been running for ${Math.round((Date.now() - busySince) / 1000)} s (more than ${Math.round(stuckAfterMs / 1000)} s): the loop is stuck`,
    };
  };

  // Whether a pushed ref is the one the agent follows: --ref as a branch or a tag, else the
  // repository's default branch (any push when the webhook does not name it); a commit id pins
  // the agent, so no push moves it.
  const watches = (push: PushEvent) => {
    if (o.ref === undefined) return push.defaultBranch === undefined || push.ref === `refs/heads/${push.defaultBranch}`;
    if (/^[0-9a-f]{40}$/.test(o.ref)) return false;
    return push.ref === o.ref || push.ref === `refs/heads/${o.ref}` || push.ref === `refs/tags/${o.ref}`;
  };

  const server = await startServer({
    host: o.listen.host,
    port: o.listen.port,
    metrics,
    log: o.log,
    access: o.access,
    ...(o.githubSecret !== undefined ? { githubSecret: o.githubSecret } : {}),
    ...(o.gitlabToken !== undefined ? { gitlabToken: o.gitlabToken } : {}),
    hooks: {
      status: () => status,
      ready: readiness,
      alive: liveness,
      suspend: async () => {
        status.agent.suspended = true;
        metrics.suspended.set(1);
        await atomicWriteFile(layout.suspended, `${new Date().toISOString()}\n`);
      },
      resume: async () => {
        const was = status.agent.suspended;
        status.agent.suspended = false;
        metrics.suspended.set(0);
        await rm(layout.suspended, { force: true });
        if (was) trigger('resume');
      },
      trigger: (provider, push) => {
        if (status.agent.suspended) return 'suspended';
        if (!push || !watches(push)) {
          o.log.info(`webhook ignored: not a push of the watched ref${push ? ` (${push.ref.slice(0, 200)})` : ''}`, {
            provider,
          });
          return 'ignored';
        }
        o.log.info('reconcile requested', { provider });
        trigger('webhook');
        return 'accepted';
      },
      reconcileNow: ({ overrideSyncWindow }) => {
        const requestedAt = new Date().toISOString();
        if (status.agent.suspended) return { reconcile: 'suspended', requestedAt };
        if (overrideSyncWindow) windowOverride = true;
        trigger('manual');
        return { reconcile: 'accepted', requestedAt };
      },
      approveDeletes: async (revision) => {
        const held = status.heldDeletes;
        if (held?.revision !== revision) return false;
        // Kept before it is answered: a restart neither loses it nor applies more than it named.
        await approvals.approve(
          revision,
          held.operations.map((op) => op.address),
        );
        if (!status.agent.suspended) trigger('manual');
        return true;
      },
    },
  });
  const loop = (async () => {
    try {
      ownership = await ownStateFolder(o.stateDir, { signal: stopping.signal, onWait: (m) => o.log.warn(m) });
    } catch (e) {
      if (stopping.signal.aborted) return;
      throw e;
    }
    await loadRecords(true);
    status.heals = heals.entries;
    status.history = history.rows;
    let next: Trigger = 'start';
    while (!stopping.signal.aborted) {
      if (!status.agent.suspended) {
        let record: ReconcileRecord | undefined;
        busySince = Date.now();
        // The override is one reconcile's: the one that starts after the request takes it.
        const overrideSyncWindow = windowOverride;
        windowOverride = false;
        try {
          record = await reconciler.run(next, stopping.signal, { overrideSyncWindow });
        } catch (e) {
          o.log.error(`reconcile crashed: ${(e as Error).message}`);
        } finally {
          busySince = undefined;
        }
        status.ready = record?.result === 'success';
        if (record && notifier && !stopping.signal.aborted)
          await notifier
            .afterReconcile(record, status, stopping.signal)
            .catch((e: unknown) => o.log.warn(`notification failed: ${(e as Error).message}`));
      }
      if (stopping.signal.aborted) break;
      next = pending ?? (await sleep());
      pending = undefined;
    }
  })();

  o.log.info(`listening on ${server.url}`, {
    mode: o.mode,
    repo: status.agent.repo,
    ref: status.agent.ref,
    path: status.agent.path,
    interval_s: o.intervalMs / 1000,
    suspended,
  });

  let stopped: Promise<void> | undefined;
  const stop = () => {
    stopped ??= (async () => {
      stopping.abort();
      wake?.();
      await loop.catch(() => undefined);
      ownership?.release();
      await server.close();
    })();
    return stopped;
  };
  return { url: server.url, stop, done: loop.then(() => stopped) };
}
