// One reconcile: fetch the source, load the configuration of its newest commit (an invalid one is
// never applied: the last good one stays, and the errors are reported with file:line), then, under
// the run lock, the same recovery → live read → plan → journaled apply as `kms-sync apply`
// (engine/run.ts planFor, apply/journaled-run.ts), with the mode deciding what is applied:
// detect nothing, sync each new revision in full and only what is due (rotations, recovered keys)
// between revisions, self-heal everything the plan has. Stores and journal live under the state
// folder: relative store paths of the configuration resolve there, never in the checkout.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { lstat, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { applyJournaled } from '../apply/journaled-run.js';
import { acquireRunLock, RunLockedError } from '../apply/run-lock.js';
import { NetworkError } from '../api/http.js';
import { atomicWriteFile, type StateIncarnation } from '../secrets/fsutil.js';
import type { ApplyResult } from '../apply/execute.js';
import {
  deriveOwner,
  readOwnerRecord,
  OwnerMovedError,
  type DesiredState,
  type OperatorPolicy,
} from '../model/index.js';
import { classifyDrift, type DriftReport } from '../plan/drift.js';
import { DEFAULT_MAX_DELETES, guardDeletes, type GuardedPlan } from '../plan/deletion-guard.js';
import { noIgnoreRules } from '../plan/ignore.js';
import {
  describeBlocked,
  describeSecurityChange,
  summarize,
  type ActionReason,
  type Operation,
  type Plan,
} from '../plan/types.js';
import { newRecipientRefusal, settleSecurityChanges } from '../apply/trust.js';
import type { LiveState } from '../model/index.js';
import { loadConfig, planFor, type Connection, type LoadedConfig } from '../engine/run.js';
import { loadIgnoreRules } from '../engine/ignore-file.js';
import { testPoint } from '../model/test-hooks.js';
import { cutLongValues } from '../model/printable.js';
import { DEFAULT_CONFIG_LIMITS, formatSize, type ConfigLimits } from '../config/limits.js';
import type { Logger } from './log.js';
import type { AgentMetrics } from './metrics.js';
import type { GitSource } from './source.js';
import { windowOpen, type SyncWindow } from './windows.js';
import type { DeleteApprovals } from './approvals.js';
import { isHeal, type HealHistory } from './heals.js';
import { keepInventory, keepServiceInventory, readInventory } from '../engine/inventory.js';
import { InventoryIndex, type Inventory, type InventoryScan } from '../plan/inventory.js';
import type { ReconcileHistory } from './history.js';
import {
  INVENTORY_SHOWN,
  TIMELINE_MAX,
  type AgentStatus,
  type DriftEntry,
  type EnvStatus,
  type KeyExpiry,
  type Mode,
  type ReadyCondition,
  type ReconcileRecord,
  type Trigger,
} from './status.js';

/**
 * What sync applies between revisions: what is due on schedule, what recovery found, and (with
 * --prune, which Flux applies at every reconcile) what this configuration owns and no longer has.
 */
const DUE: ReadonlySet<ActionReason> = new Set([
  'rotate_expiring',
  'rotate_secret_missing',
  'reissue_lost_key',
  'revoke_orphan',
  'delete_rotated_out',
  'expire_rotated_out',
  'delete_removed_from_config',
]);

export interface ReconcilerOptions {
  source: GitSource;
  /** Folder of the configuration inside the repository ('' or '.': its root). */
  path: string;
  cdktf: boolean;
  mode: Mode;
  /** Flux's prune: delete what this configuration owns and that left it (without: reported as requiring pruning). */
  prune: boolean;
  /** Also delete unmanaged resources in scope (`apply --prune`'s meaning; a separate, explicit flag). */
  pruneUnmanaged?: boolean;
  /** The deletion guard: more deletes or revokes than this are held until approved (default 10). */
  maxDeletes?: number;
  /** Deletes approved through the API (kept in the state folder: a restart neither loses nor replays one). */
  approvals?: DeleteApprovals;
  /** Where the inventory is kept (what this configuration created or claimed: STATE/inventory.json). */
  inventoryFile?: string;
  /** The record of every heal (kept in the state folder). */
  heals?: HealHistory;
  /** The reconcile history (kept in the state folder; an in-memory one when it has no file). */
  history: ReconcileHistory;
  /** Where the journal, the default store, the run lock and the owner record live. */
  storeDir: string;
  /** The operator's policy (its flags, environment and policy file): never the checkout's. */
  policy: OperatorPolicy;
  conn: Connection;
  parallelism: number;
  /** How long to wait for another run's lock before reporting `locked` (default 30 s). */
  lockTimeoutMs?: number;
  /** Where the last good revision is recorded (restored after a restart on an invalid head). */
  lastGoodFile?: string;
  /** Where the last revision applied in full is recorded (a restart in sync mode does not re-apply it over drift). */
  syncedFile?: string;
  /**
   * Where the revision being loaded is recorded before its load, and an invalid one with its
   * errors: an agent killed while loading (out of memory on a huge or hostile revision) does not
   * load it again for ever after each restart, and an invalid revision stays reported as such.
   */
  loadingFile?: string;
  /** Sizes of the configuration's files (checked in git's tree before the checkout, and again when read). */
  limits?: ConfigLimits;
  /** When writes are allowed (none: always). */
  windows?: SyncWindow[];
  /**
   * --verify-commits: an ssh allowed-signers file; only a revision signed by one of its keys is
   * loaded (Flux's verify, Argo CD's GnuPG keys), others are refused like invalid ones.
   */
  verifyCommits?: string;
  /**
   * --allow-empty (Argo CD's allowEmpty): a revision whose configuration defines no project or
   * environment is reconciled (nothing in scope: nothing read or changed); without it, it is invalid.
   */
  allowEmpty?: boolean;
  /** The agent's hold on its state folder (state-owner.ts): run locks its earlier starts left are broken. */
  incarnation?: () => StateIncarnation | undefined;
  log: Logger;
  metrics: AgentMetrics;
  status: AgentStatus;
  now?: () => Date;
}

const DAY = 86_400_000;
/** Loads of one revision cut off by a kill before it counts as invalid: one kill may be anything (a node drained), two in a row are the revision. */
export const LOAD_ATTEMPTS = 2;
const CONFIG_NAME = /\.(ya?ml|json)$/i;

/** What the state folder says about the revision last loaded (loadingFile). */
interface LoadingRecord {
  revision: string;
  /** What else decides whether it loads (--path, --cdktf, the size limits): a restart with others loads it again. */
  settings: string;
  /** Loads started and never finished (killed). */
  attempts: number;
  /** Set once it is known to be invalid. */
  errors?: string[];
  /** Invalid because --verify-commits refused its signature. */
  unverified?: boolean;
}
const short = (rev: string | undefined) => rev?.slice(0, 12);

/** A revision --verify-commits refuses: invalid like a broken configuration, with its own reason. */
export class UnverifiedRevisionError extends Error {}

function readFileSyncOrEmpty(file: string): Buffer {
  try {
    return readFileSync(file);
  } catch {
    return Buffer.alloc(0);
  }
}

export class Reconciler {
  private readonly o: ReconcilerOptions;
  /** The configuration of the last good revision: reconciled against while a newer one is invalid. */
  private lastGood: { revision: string; cfg: LoadedConfig; configDir: string } | undefined;
  private readonly subjects = new Map<string, string>();
  /** Revisions whose commit message approves their deletes (a `kms-sync: approve-deletes` line). */
  private readonly approvedByCommit = new Map<string, boolean>();
  private started = false;
  /** The settings under which status.revision.invalid was found invalid (a change of them checks it again). */
  private invalidUnder: string | undefined;
  /** The inventory as last kept (undefined until read, or when there is none). */
  private inventory: Inventory | undefined;
  private inventoryRead = false;

  constructor(o: ReconcilerOptions) {
    this.o = o;
  }

  get status(): AgentStatus {
    return this.o.status;
  }

  /** `overrideSyncWindow`: this reconcile writes even outside the sync windows (an operator's request). */
  async run(trigger: Trigger, signal: AbortSignal, o: { overrideSyncWindow?: boolean } = {}): Promise<ReconcileRecord> {
    const started = new Date();
    const record: ReconcileRecord = {
      startedAt: started.toISOString(),
      finishedAt: '',
      durationMs: 0,
      trigger,
      result: 'success',
      planned: 0,
      applied: 0,
      errors: [],
    };
    if (o.overrideSyncWindow) record.syncWindowOverride = true;
    const { log, metrics, status } = this.o;
    try {
      await this.cycle(record, signal);
    } catch (e) {
      record.result = signal.aborted ? 'interrupted' : 'failed';
      record.errors.push(this.clean((e as Error).message));
      // The service could not be read: what the last reconcile found is stale, so unknown.
      if (!signal.aborted && (e instanceof NetworkError || (e as Error).cause instanceof NetworkError))
        status.serviceError = record.errors[record.errors.length - 1];
    }
    if (
      record.result === 'success' ||
      record.result === 'degraded' ||
      record.result === 'invalid' ||
      record.result === 'locked'
    )
      delete status.serviceError;
    if (record.result !== 'interrupted') this.setCondition(record);
    if (signal.aborted && record.result === 'success' && record.note !== 'nothing to apply')
      record.result = 'interrupted';
    const ended = new Date();
    record.finishedAt = ended.toISOString();
    record.durationMs = ended.getTime() - started.getTime();
    metrics.reconciles.inc({ result: record.result });
    metrics.reconcileSeconds.observe({ result: record.result }, record.durationMs / 1000);
    metrics.lastReconcile.set(ended.getTime() / 1000);
    if (record.result === 'success') metrics.lastSuccess.set(ended.getTime() / 1000);
    // Kept in the state folder; a file that cannot be written is reported, never what stops reconciles.
    const history = await this.o.history.record(record, (line) => log.warn(line));
    // Shown together: a reader that sees this reconcile counted sees it in the history too.
    status.lastReconcile = record;
    status.reconciles += 1;
    status.history = history;
    const fields = {
      trigger,
      revision: short(record.revision),
      result: record.result,
      planned: record.planned,
      applied: record.applied,
      ms: record.durationMs,
    };
    if (record.result === 'success') log.info(`reconciled${record.note ? `: ${record.note}` : ''}`, fields);
    else log.warn(`reconcile ${record.result}: ${record.errors.join(' | ') || record.note || ''}`, fields);
    return record;
  }

  /** A commit's subject line (read from git once, then kept). */
  private async subjectOf(revision: string): Promise<string> {
    let subject = this.subjects.get(revision);
    if (subject === undefined) this.subjects.set(revision, (subject = await this.o.source.subject(revision)));
    return subject;
  }

  /** Checks the revision out and loads its configuration; on success it is the last good one (kept across restarts). */
  private async load(
    revision: string,
    signal: AbortSignal,
  ): Promise<{ revision: string; cfg: LoadedConfig; configDir: string }> {
    const { source, status } = this.o;
    // Before anything of the revision is read or checked out: whose it is.
    if (this.o.verifyCommits) await this.verify(revision);
    await this.checkTree(revision);
    await source.checkout(revision, signal);
    if (!this.approvedByCommit.has(revision)) {
      const message = await source.message(revision);
      this.subjects.set(revision, message.split('\n')[0] ?? '');
      this.approvedByCommit.set(revision, /^kms-sync:\s*approve-deletes\s*$/im.test(message));
    }
    const configDir = path.join(source.dir, this.o.path || '.');
    if (!existsSync(configDir)) throw new Error(`${this.o.path}: no such folder in revision ${short(revision)}`);
    await this.refuseLinkedPath(configDir);
    const warn = (line: string) => this.o.log.warn(`configuration: ${line}`, { revision: short(revision) });
    await testPoint('config-load');
    const limits = this.o.limits ?? DEFAULT_CONFIG_LIMITS;
    // Files only inside the checkout, and no symbolic link at all (a commit on the watched branch must not make the agent read a host file).
    const files = { root: source.dir, refuseLinks: true };
    // Errors name files by their path in the repository (kms/clients.yaml:10:27), whatever the agent's working directory.
    // The operator's policy (never the checkout's); store files resolve under STATE/store.
    const policed = { operatorPolicy: this.o.policy, storeRoot: this.o.storeDir, shownFrom: source.dir };
    const cfg = await loadConfig(
      this.o.cdktf
        ? { file: [], env: [], cdktf: configDir, ...sizeFlags(limits), ...policed }
        : { file: [configDir], env: [], files, ...sizeFlags(limits), ...policed },
      undefined,
      warn,
    );
    // An emptied configuration (a `git rm -r`, a wrong --path) is a mistake far more often than a
    // wish: it never becomes the last good revision unless the operator said so.
    if (!this.o.allowEmpty && cfg.desired.envs.length === 0 && cfg.desired.projects.length === 0) {
      throw new Error(
        `${this.o.path || '.'}: the configuration of revision ${short(revision)} defines no project or environment (emptied, or a wrong --path?): it is not reconciled, and the last good revision stays. If an empty configuration is meant, run the agent with --allow-empty (it then reconciles nothing: what earlier revisions created is left as it is)`,
      );
    }
    this.lastGood = { revision, cfg, configDir };
    status.revision.lastGood = revision;
    if (this.o.lastGoodFile) await atomicWriteFile(this.o.lastGoodFile, `${revision}\n`);
    return this.lastGood;
  }

  /** Refuses a revision not signed by a key of the allowed signers file (UnverifiedRevisionError). */
  private async verify(revision: string): Promise<void> {
    const file = this.o.verifyCommits!;
    const { verdict, key, signer } = await this.o.source.signature(revision, file);
    if (verdict === 'G') {
      this.o.log.info(`revision ${short(revision)} signed by ${signer} (${key})`);
      return;
    }
    const rev = `revision ${short(revision)}`;
    const why: Record<string, string> = {
      N: `${rev} is not signed: with --verify-commits only commits signed by a key of ${file} are reconciled (git commit -S with gpg.format ssh)`,
      U: `${rev} is signed by a key that is not in ${file} (${key}): not trusted, not reconciled`,
      B: `${rev} has a bad signature (the commit is not what its key signed): not reconciled`,
      X: `${rev} has a signature that has expired: not reconciled`,
      Y: `${rev} is signed by a key that has expired (${key}): not reconciled`,
      R: `${rev} is signed by a revoked key (${key}): not reconciled`,
    };
    throw new UnverifiedRevisionError(
      why[verdict] ??
        `${rev}: its signature cannot be checked (git's verdict ${JSON.stringify(verdict)}: an OpenPGP signature, or ssh-keygen missing): only ssh signatures by keys of ${file} are accepted; not reconciled`,
    );
  }

  /**
   * Before the checkout, from git's tree: no symbolic link under the configuration's folder (the
   * folder itself included) and no configuration file over the size limits, so a huge or linked
   * file is refused without being written out or read.
   */
  private async checkTree(revision: string): Promise<void> {
    const limits = this.o.limits ?? DEFAULT_CONFIG_LIMITS;
    const problems: string[] = [];
    let total = 0;
    const folder = (this.o.path || '.').replace(/\/+$/, '');
    for (const e of await this.o.source.tree(revision, this.o.path)) {
      const hidden = e.path.split('/').some((part) => part.startsWith('.') || part === 'node_modules');
      // Links the loader would read (configuration files, the ignore file), or the folder itself;
      // a link elsewhere in the tree (a README, a hidden folder) is nothing the agent reads.
      const read =
        e.path === folder ||
        e.path === `${folder}/.kmsignore` ||
        (!hidden && !this.o.cdktf && CONFIG_NAME.test(e.path)) ||
        (this.o.cdktf && !hidden);
      if (e.mode === '120000' && read) {
        problems.push(
          `${e.path}: is a symbolic link: the agent follows no links in its configuration (commit the file itself), and it is not read`,
        );
      } else if (!this.o.cdktf && !hidden && /\.ya?ml$/i.test(e.path)) {
        if (e.size > limits.fileBytes)
          problems.push(
            `${e.path}: the file is larger than the limit of ${formatSize(limits.fileBytes)} per configuration file (${formatSize(e.size)}); raise it with --max-file-size or KMS_SYNC_MAX_FILE_SIZE if it is meant to be this large`,
          );
        total += e.size;
      }
    }
    if (total > limits.totalBytes)
      problems.push(
        `${this.o.path || '.'}: the configuration's files together are larger than the limit of ${formatSize(limits.totalBytes)} (${formatSize(total)}; --max-config-size or KMS_SYNC_MAX_CONFIG_SIZE)`,
      );
    if (problems.length) throw new Error(problems.slice(0, 20).join('\n'));
  }

  /** The configuration's folder (every component below the checkout) is no symbolic link. */
  private async refuseLinkedPath(configDir: string): Promise<void> {
    let at = this.o.source.dir;
    for (const part of path
      .relative(at, configDir)
      .split(path.sep)
      .filter((p) => p && p !== '.')) {
      at = path.join(at, part);
      if ((await lstat(at).catch(() => undefined))?.isSymbolicLink()) {
        throw new Error(
          `${path.relative(this.o.source.dir, at)}: is a symbolic link: the agent follows no links in its configuration path, and it is not read`,
        );
      }
    }
    const ignore = path.join(configDir, '.kmsignore');
    if ((await lstat(ignore).catch(() => undefined))?.isSymbolicLink())
      throw new Error(`${path.relative(this.o.source.dir, ignore)}: is a symbolic link, and it is not read`);
  }

  private settings(): string {
    const limits = this.o.limits ?? DEFAULT_CONFIG_LIMITS;
    // The allowed signers by content: a key added to the file (a ConfigMap updated) lets a refused revision be checked again.
    const signers = this.o.verifyCommits
      ? createHash('sha256').update(readFileSyncOrEmpty(this.o.verifyCommits)).digest('hex')
      : null;
    return JSON.stringify([
      this.o.path,
      this.o.cdktf,
      limits.fileBytes,
      limits.totalBytes,
      Boolean(this.o.allowEmpty),
      ...(signers ? [signers] : []),
    ]);
  }

  private async readLoading(): Promise<LoadingRecord | undefined> {
    if (!this.o.loadingFile) return undefined;
    try {
      const v = JSON.parse(await readFile(this.o.loadingFile, 'utf8')) as LoadingRecord;
      return typeof v.revision === 'string' && typeof v.settings === 'string' && typeof v.attempts === 'number'
        ? v
        : undefined;
    } catch {
      return undefined;
    }
  }

  private async writeLoading(record: LoadingRecord | undefined): Promise<void> {
    if (!this.o.loadingFile) return;
    if (!record) await rm(this.o.loadingFile, { force: true });
    // On disk before the load starts: a restart after a kill during the load finds it.
    else await atomicWriteFile(this.o.loadingFile, `${JSON.stringify(record)}\n`);
  }

  /** After a restart on an invalid or unreachable head: the last good revision recorded in the state folder. */
  private async restoreLastGood(
    signal: AbortSignal,
  ): Promise<{ revision: string; cfg: LoadedConfig; configDir: string } | undefined> {
    if (!this.o.lastGoodFile) return undefined;
    const revision = (await readFile(this.o.lastGoodFile, 'utf8').catch(() => '')).trim();
    if (!/^[0-9a-f]{40,64}$/.test(revision)) return undefined;
    try {
      return await this.load(revision, signal);
    } catch (e) {
      this.o.log.warn(
        `the last good revision ${short(revision)} could not be restored: ${this.clean((e as Error).message)}`,
      );
      return undefined;
    }
  }

  /** Error text with the checkout's absolute path cut to the path inside the repository. */
  private clean(text: string): string {
    const dir = this.o.source.dir.replace(/\/+$/, '');
    // Long values cut as the CLI cuts them (a 16 MB value is not kept in the status, the page and every log line).
    return cutLongValues(text.split(`${dir}/`).join('').split(dir).join('.'));
  }

  private async cycle(record: ReconcileRecord, signal: AbortSignal): Promise<void> {
    const { source, status, metrics, log } = this.o;
    if (!this.started && this.o.syncedFile) {
      const synced = (await readFile(this.o.syncedFile, 'utf8').catch(() => '')).trim();
      if (/^[0-9a-f]{40,64}$/.test(synced)) {
        status.revision.synced = synced;
        metrics.setRevision(metrics.syncedRevision, synced);
      }
    }
    this.started = true;
    // 1. The source: a repository it cannot reach keeps the last good revision.
    let revision: string;
    try {
      revision = await source.fetch(signal);
      delete status.sourceError;
    } catch (e) {
      status.sourceError = this.clean((e as Error).message);
      record.errors.push(status.sourceError);
      record.result = 'source_error';
      // Drift is still watched against the last good revision.
      const good = this.lastGood ?? (await this.restoreLastGood(signal));
      if (!good) return;
      revision = good.revision;
    }
    record.revision = revision;
    if (status.revision.fetched !== revision && record.result !== 'source_error') {
      status.revision.fetched = revision;
      metrics.setRevision(metrics.fetchedRevision, revision);
    }

    // 2. Its configuration: an invalid one is reported and never applied.
    let good = this.lastGood;
    if (status.revision.invalid?.revision === revision && this.invalidUnder === this.settings()) {
      // Known to be invalid: reported again, not loaded again.
      record.result = 'invalid';
      record.errors.push(...status.revision.invalid.errors);
    } else if (!good || good.revision !== revision) {
      const before = await this.readLoading();
      const settings = this.settings();
      const known = before?.revision === revision && before.settings === settings ? before : undefined;
      if (known?.errors || (known && known.attempts >= LOAD_ATTEMPTS)) {
        // Found invalid before a restart, or its loads were killed (out of memory?) every time: not loaded again.
        const errors = known.errors ?? [
          `the agent was killed ${known.attempts} times while loading revision ${short(revision)} (out of memory on a huge or hostile configuration?); it is not loaded again: push a fixed revision`,
        ];
        if (!known.errors) await this.writeLoading({ ...known, errors });
        status.revision.invalid = { revision, errors, ...(known.unverified ? { unverified: true } : {}) };
        this.invalidUnder = settings;
        record.result = 'invalid';
        record.errors.push(...errors);
      } else {
        await this.writeLoading({ revision, settings, attempts: (known?.attempts ?? 0) + 1 });
        try {
          good = await this.load(revision, signal);
          delete status.revision.invalid;
          await this.writeLoading(undefined);
        } catch (e) {
          if (signal.aborted) {
            await this.writeLoading(known);
            throw e;
          }
          const errors = this.clean((e as Error).message)
            .split('\n')
            .filter((l) => l.trim() && !/^configuration is not valid:?$/.test(l.trim()));
          const unverified = e instanceof UnverifiedRevisionError;
          await this.writeLoading({ revision, settings, attempts: 0, errors, ...(unverified ? { unverified } : {}) });
          status.revision.invalid = { revision, errors, ...(unverified ? { unverified } : {}) };
          this.invalidUnder = settings;
          record.result = 'invalid';
          record.errors.push(...errors);
        }
      }
    }
    if (record.result !== 'success' && !good) good = await this.restoreLastGood(signal);
    // The subject of the revision this record is about: an invalid one's own, not the last good one's.
    if (record.result === 'invalid') record.subject = await this.subjectOf(revision);
    if (!good) return;
    if (record.result === 'invalid')
      record.note = `revision ${short(revision)} is not valid; reconciling against the last good one, ${short(good.revision)}`;
    else record.subject = await this.subjectOf(good.revision);
    if (record.result === 'success') record.revision = good.revision;
    if (signal.aborted) return;

    // 3. Under the run lock: recovery, live read, plan, and what the mode applies.
    const owner = await this.owner(good.cfg.desired, good.configDir);
    // Detect never writes: no run lock (its record in the service is a write, needs a write
    // credential and contends with CI). Recovery then runs only under the local lock, when a
    // journal is there, and only reads the service (planFor).
    if (this.o.mode === 'detect') {
      await this.underLock(record, good, owner, signal, false);
      return;
    }
    const lockStart = Date.now();
    const incarnation = this.o.incarnation?.();
    let lock;
    try {
      lock = await acquireRunLock({
        api: this.o.conn.api,
        owner,
        envs: good.cfg.desired.envs.map((e) => e.projectEnv),
        baseDir: this.o.storeDir,
        timeoutMs: this.o.lockTimeoutMs ?? 30_000,
        signal,
        ...(incarnation ? { incarnation } : {}),
        onWait: (m) => {
          metrics.lockContended.inc();
          log.info(m);
        },
      });
    } catch (e) {
      if (e instanceof RunLockedError) {
        record.result = 'locked';
        record.errors.push(e.message);
        return;
      }
      throw e;
    } finally {
      metrics.lockWaitSeconds.observe((Date.now() - lockStart) / 1000);
    }
    try {
      await this.underLock(record, good, owner, signal);
    } finally {
      await lock.release();
    }
  }

  private async underLock(
    record: ReconcileRecord,
    good: { revision: string; cfg: LoadedConfig; configDir: string },
    owner: string,
    signal: AbortSignal,
    runLocked = true,
  ): Promise<void> {
    const { mode, status, metrics, log } = this.o;
    // Every lock under the state folder (store files, the journal) breaks what an earlier start of this agent left.
    const incarnation = this.o.incarnation?.();
    const ignoreFile = path.join(good.configDir, '.kmsignore');
    const ignore = existsSync(ignoreFile) ? await loadIgnoreRules(ignoreFile) : noIgnoreRules();
    const inventory = await this.readInventory(owner);
    const plan = async () =>
      planFor(this.o.conn, good.cfg.desired, {
        inventory: new InventoryIndex(inventory?.entries ?? []),
        policy: this.o.policy,
        prune: Boolean(this.o.pruneUnmanaged),
        baseDir: this.o.storeDir,
        runLocked,
        owner,
        leaving: good.cfg.leaving,
        ignore,
        allowEmpty: Boolean(this.o.allowEmpty),
        ...(incarnation ? { incarnation } : {}),
        notice: (line) => log.info(line),
        ...(this.o.now ? { now: this.o.now() } : {}),
      });
    let planned = await plan();
    await testPoint('agent-planned');
    // Flux's contract and the deletion guard (plan/deletion-guard.ts): what left the configuration
    // is deleted only with --prune; more deletes than --max-deletes wait for an approval.
    // An approval through the API covers the deletes it named, no more (a larger set held later needs its own).
    const guard = (p: Plan): GuardedPlan => {
      const policy = {
        pruneRemoved: this.o.prune,
        maxDeletes: this.o.maxDeletes ?? DEFAULT_MAX_DELETES,
        live: planned.live.state,
      };
      const g = guardDeletes(p, { ...policy, approved: Boolean(this.approvedByCommit.get(good.revision)) });
      if (
        g.held.length === 0 ||
        !this.o.approvals?.covers(
          good.revision,
          g.held.map((op) => op.address),
        )
      )
        return g;
      return guardDeletes(p, { ...policy, approved: true });
    };
    let guarded = guard(planned.plan);
    record.planned = planned.plan.operations.length;
    const blocked = describeBlocked(planned.plan);
    const newRevision = status.revision.synced !== good.revision;
    const fresh = record.result === 'success'; // not an invalid revision or an unreachable source
    let ops: Operation[] = [];
    if (mode === 'self-heal' || (mode === 'sync' && newRevision && fresh)) ops = guarded.plan.operations;
    else if (mode === 'sync') ops = guarded.plan.operations.filter((op) => DUE.has(op.actionReason));
    const inWindow = windowOpen(this.o.windows ?? [], this.o.now?.() ?? new Date());
    // An operator's override (Argo CD's manual sync in a deny window) opens a closed window for this reconcile only, on record.
    const open = inWindow || record.syncWindowOverride === true;
    if (!inWindow && open && mode !== 'detect')
      log.warn(
        'outside the sync window(s): writing anyway, for this reconcile, as an operator asked (POST /api/reconcile with overrideSyncWindow)',
        { revision: short(good.revision) },
      );
    if (inWindow) delete record.syncWindowOverride;
    status.agent.syncWindowOpen = open;
    metrics.syncWindowOpen.set(open ? 1 : 0);
    if (!open && ops.length > 0) {
      record.note = `outside the sync window(s): ${ops.length} operation(s) planned, not applied`;
      ops = [];
    }
    if (blocked) {
      record.result = 'failed';
      record.errors.push(blocked);
      ops = [];
    }
    // Security changes (stores, recipients, ${env:} reads, owner) are applied with the revision
    // that brings them; a recipient added to a store that holds keys only when the operator allowed it.
    const security = planned.plan.security ?? [];
    const applying = mode !== 'detect' && open && fresh && !blocked && (mode === 'self-heal' || newRevision);
    if (security.length)
      log.info(
        `security changes in revision ${short(good.revision)}: ${security.map(describeSecurityChange).join('; ')}`,
      );
    const refusal = applying ? newRecipientRefusal(planned.plan, this.o.policy) : undefined;
    if (refusal) {
      record.result = 'failed';
      record.errors.push(...refusal.split('\n').filter((l) => l.trim()));
      ops = [];
    }
    let result: ApplyResult | undefined;
    if (ops.length > 0 && signal.aborted) {
      // Stopped between the plan and the apply: nothing of the revision was applied, so it is not
      // synced (in sync mode the next start would otherwise take it as applied and never apply it).
      record.result = 'interrupted';
    } else if (ops.length > 0) {
      const subset: Plan =
        ops === planned.plan.operations
          ? planned.plan
          : { ...planned.plan, operations: ops, summary: summarize(ops, planned.plan.unmanaged) };
      if (guarded.held.length && mode !== 'detect')
        log.warn(
          `deletes held: ${guarded.heldReason}; applying revision ${short(good.revision)} without its ${guarded.held.length} delete(s) until approved (POST /api/approve-deletes, a "kms-sync: approve-deletes" line in the commit message, or a higher --max-deletes)`,
          { revision: short(good.revision) },
        );
      log.info(`applying ${ops.length} operation(s) of revision ${short(good.revision)}`, { mode });
      // What of it undoes a change made outside kms-sync: recorded as heals once applied.
      const healing = new Set(ops.filter((op) => isHeal(op, newRevision && fresh)));
      result = await applyJournaled({
        api: this.o.conn.api,
        plan: subset,
        capture: planned.capture,
        ownerDir: this.o.storeDir,
        parallelism: this.o.parallelism,
        signal,
        onWarning: (line) => log.warn(line),
      });
      this.recordApply(record, result, good.revision);
      await this.recordHeals(
        record,
        result.done.filter((op) => healing.has(op)),
        good.revision,
      );
      if (result.interrupted) record.result = 'interrupted';
      else if (result.failed.length > 0 || result.stopReason) {
        record.result = 'failed';
        record.errors.push(
          ...result.failed.slice(0, 20).map((f) => `${f.op.address}: ${f.error}`),
          ...(result.stopReason ? [result.stopReason] : []),
        );
      }
      if (applying && !refusal && record.result === 'success')
        await settleSecurityChanges(planned.registry, subset, this.o.storeDir);
      // What is left after the apply is the drift to report.
      if (!signal.aborted) {
        planned = await plan();
        guarded = guard(planned.plan);
      }
    } else if (ops.length === 0 && applying && !refusal && record.result === 'success' && security.length) {
      await settleSecurityChanges(planned.registry, planned.plan, this.o.storeDir);
      record.note = `recorded ${security.length} security change(s)`;
      planned = await plan();
      guarded = guard(planned.plan);
    } else if (ops.length === 0 && mode !== 'detect' && record.result === 'success' && open) {
      record.note = guarded.plan.operations.length
        ? `${guarded.plan.operations.length} difference(s) reported, not applied (${mode})`
        : 'nothing to apply';
    }
    this.reportDeletes(guarded, good.revision);
    // The revision is synced once everything its plan had is applied (or, in detect, nothing
    // differs), but for what requires pruning (Flux: left in place, reported); not while the guard
    // holds its deletes, so that an approval applies them.
    const synced =
      fresh &&
      record.result === 'success' &&
      newRevision &&
      guarded.held.length === 0 &&
      ((mode !== 'detect' && open) || guarded.plan.operations.length === 0);
    if (synced) {
      // Its deletes ran: an approval of them is used up (and one of an older revision is moot).
      await this.o.approvals?.clear();
      await testPoint('revision-synced');
      if (this.o.syncedFile) await atomicWriteFile(this.o.syncedFile, `${good.revision}\n`);
      // Published once the file is written, with no await before report() below: a reader (the API,
      // the page, the metrics) that sees the revision synced sees its environments, drift and
      // expiries too, never the previous ones (or none at the first reconcile).
      status.revision.synced = good.revision;
      metrics.setRevision(metrics.syncedRevision, good.revision);
    }
    this.report(classifyDrift(guarded.plan, ignore), planned.live.state, good.cfg.desired);
    if (planned.inventory && !signal.aborted) {
      await this.keepInventory(inventory, planned.inventory, good, planned.plan, owner);
      // The service's copy too, as the CLI's apply keeps it (engine/inventory.ts), under the run lock
      // (never in detect, which writes nothing): a CLI run of the same owner knows what it holds.
      if (runLocked && open)
        for (const line of await keepServiceInventory(
          this.o.conn.api,
          owner,
          planned.inventory,
          planned.serviceInventory ?? new Map(),
          this.o.now?.() ?? new Date(),
        ))
          log.warn(this.clean(line));
    }
    await this.checkJournal(record, planned.capture.journal, planned.plan.warnings);
  }

  /** The inventory kept in the state folder, if it is this owner's (another owner id starts a new one). */
  private async readInventory(owner: string): Promise<Inventory | undefined> {
    if (!this.o.inventoryFile) return undefined;
    if (!this.inventoryRead || (this.inventory && this.inventory.owner !== owner)) {
      this.inventory = await readInventory(this.o.inventoryFile, owner, (line) => this.o.log.warn(this.clean(line)));
      this.inventoryRead = true;
      if (this.inventory) this.showInventory(this.inventory);
    }
    return this.inventory;
  }

  /** The inventory after this reconcile: kept (when it changed), shown in the status and the metrics. */
  private async keepInventory(
    before: Inventory | undefined,
    scan: InventoryScan,
    good: { revision: string; cfg: LoadedConfig },
    plan: Plan,
    owner: string,
  ): Promise<void> {
    if (!this.o.inventoryFile) return;
    const next = await keepInventory(this.o.inventoryFile, scan, good.cfg.desired, plan, owner, {
      now: this.o.now?.() ?? new Date(),
      revision: good.revision,
      ...(before ? { before } : {}),
    });
    if (next === before) return;
    this.inventory = next;
    this.showInventory(next);
  }

  private showInventory(inv: Inventory): void {
    const byKind: Record<string, number> = {};
    for (const e of inv.entries) byKind[e.kind] = (byKind[e.kind] ?? 0) + 1;
    this.o.status.inventory = {
      updatedAt: inv.updatedAt,
      ...(inv.revision ? { revision: inv.revision } : {}),
      count: inv.entries.length,
      byKind,
      entries: inv.entries.slice(0, INVENTORY_SHOWN),
    };
    this.o.metrics.inventoryItems.reset();
    for (const [kind, n] of Object.entries(byKind)) this.o.metrics.inventoryItems.set({ kind }, n);
  }

  /**
   * Keys waiting in the journal (their store could not be written: its lock timed out, it is
   * down) are issued and not stored: the reconcile is no success until they are (degraded).
   */
  private async checkJournal(
    record: ReconcileRecord,
    journal: { pendingIds(): Promise<string[]> },
    warnings: readonly string[],
  ): Promise<void> {
    const waiting = (await journal.pendingIds().catch(() => [])).length;
    this.o.status.journalKeysWaiting = waiting;
    this.o.metrics.journalKeysWaiting.set(waiting);
    if (waiting === 0 || record.result !== 'success') return;
    record.result = 'degraded';
    const why = warnings.find((w) => w.includes('stay in the journal'));
    record.errors.push(
      `${waiting} key(s) wait in the journal for their secret store${why ? `: ${this.clean(why)}` : ''}; they are stored at the next reconcile that can write the store`,
    );
  }

  /** The heals of an apply: recorded (state folder), counted, on the timeline and in the log. */
  private async recordHeals(record: ReconcileRecord, healed: Operation[], revision: string): Promise<void> {
    if (healed.length === 0) return;
    const { status, metrics, log } = this.o;
    const at = this.o.now?.() ?? new Date();
    const entries = this.o.heals ? await this.o.heals.record(healed, revision, at) : [];
    record.heals = entries.map((e) => e.id);
    if (this.o.heals) status.heals = this.o.heals.entries;
    for (const op of healed) {
      metrics.heals.inc({ kind: op.kind });
      log.warn(`healed ${op.address}: ${op.reason}`, { revision: short(revision) });
      status.timeline.unshift({
        at: at.toISOString(),
        kind: 'healed',
        address: op.address,
        projectEnv: op.projectEnv ?? '',
        revision,
      });
    }
    status.timeline.length = Math.min(status.timeline.length, TIMELINE_MAX);
  }

  /** The Ready condition (Flux's): True after a successful reconcile, Unknown while the service cannot be read, else False. */
  private setCondition(record: ReconcileRecord): void {
    const { status, metrics } = this.o;
    const [value, reason, message]: [ReadyCondition['status'], string, string] = status.serviceError
      ? ['Unknown', 'ServiceUnreachable', status.serviceError]
      : record.result === 'success'
        ? ['True', 'ReconciliationSucceeded', `applied revision ${short(record.revision) ?? '?'}`]
        : [
            'False',
            record.result === 'invalid' && status.revision.invalid?.unverified
              ? 'UnverifiedRevision'
              : ((
                  {
                    degraded: 'KeysWaitInJournal',
                    invalid: 'InvalidRevision',
                    source_error: 'SourceUnreachable',
                    locked: 'Locked',
                    failed: 'ReconciliationFailed',
                  } as Record<string, string>
                )[record.result] ?? 'ReconciliationFailed'),
            record.errors[0] ?? record.result,
          ];
    const changed = status.condition.status !== value || status.condition.reason !== reason;
    status.condition = {
      type: 'Ready',
      status: value,
      reason,
      message,
      lastTransitionTime: changed ? new Date().toISOString() : status.condition.lastTransitionTime,
    };
    for (const s of ['True', 'False', 'Unknown'] as const)
      metrics.condition.set({ type: 'Ready', status: s }, s === value ? 1 : 0);
  }

  /** What requires pruning and what the guard holds, into the status and the metrics. */
  private reportDeletes(g: GuardedPlan, revision: string): void {
    const { status, metrics } = this.o;
    const entry = (op: Operation) => ({
      address: op.address,
      kind: op.kind,
      projectEnv: op.projectEnv ?? null,
      reason: op.reason,
    });
    status.requiresPruning = g.requiresPruning.map(entry);
    if (g.held.length) status.heldDeletes = { revision, reason: g.heldReason ?? '', operations: g.held.map(entry) };
    else delete status.heldDeletes;
    metrics.requiresPruning.set(g.requiresPruning.length);
    metrics.deletesHeld.set(g.held.length);
  }

  /** Counts and timeline entries of what an apply did. */
  private recordApply(record: ReconcileRecord, result: ApplyResult, revision: string): void {
    const { metrics, status } = this.o;
    record.applied = result.done.length;
    for (const op of result.done) metrics.operations.inc({ action: op.action });
    // A record of every change: each applied operation with its address and the fields it changed
    // (values as the plan shows them, which never hold a key; the logger redacts credentials once more).
    for (const op of result.done) {
      this.o.log.info(`applied ${op.action} ${op.address}`, {
        revision: short(revision),
        reason: op.actionReason,
        fields: op.changes.length
          ? op.changes
              .map((c) => `${c.path}: ${JSON.stringify(c.before)} -> ${JSON.stringify(c.after)}`)
              .join('; ')
              .slice(0, 2000)
          : undefined,
      });
    }
    metrics.keysIssued.inc(result.keysStored.length);
    const at = new Date().toISOString();
    for (const op of result.done) {
      if (op.kind !== 'key' && !(op.kind === 'client' && op.action === 'create')) continue;
      const kind =
        op.action === 'rotate'
          ? 'rotated'
          : op.action === 'delete'
            ? 'revoked'
            : op.action === 'create'
              ? 'issued'
              : undefined;
      if (!kind) continue;
      status.timeline.unshift({ at, kind, address: op.address, projectEnv: op.projectEnv ?? '', revision });
    }
    status.timeline.length = Math.min(status.timeline.length, TIMELINE_MAX);
  }

  /** Drift, environments and key expiries of the last reconcile into the status and the metrics. */
  private report(drift: DriftReport, live: LiveState, desired: DesiredState): void {
    const { status, metrics } = this.o;
    const now = (this.o.now?.() ?? new Date()).getTime();
    status.drift = drift.items.map(
      (i): DriftEntry => ({
        category: i.category,
        address: i.address,
        kind: i.kind,
        projectEnv: i.projectEnv,
        detail: i.detail,
        action: i.action,
        fields: i.fields.map((f) => ({ path: f.path, before: f.before, after: f.after })),
      }),
    );
    const expiries: KeyExpiry[] = [];
    for (const c of live.clients) {
      for (const k of c.keys) {
        if (!k.expiresAt) continue;
        expiries.push({
          address: `key.${c.projectEnv}/${c.name}/${k.name}`,
          projectEnv: c.projectEnv,
          expiresAt: k.expiresAt,
          autoRotate: Boolean(k.autoRotate),
        });
      }
    }
    expiries.sort((a, b) => a.expiresAt.localeCompare(b.expiresAt));
    const within = (e: KeyExpiry, days: number) => {
      const t = Date.parse(e.expiresAt);
      return t >= now && t <= now + days * DAY;
    };
    const envNames = [
      ...new Set([...desired.envs.map((e) => e.projectEnv), ...live.envs.map((e) => e.projectEnv)]),
    ].sort();
    metrics.drift.reset();
    metrics.expiring.reset();
    metrics.envSynced.reset();
    status.environments = envNames.map((projectEnv): EnvStatus => {
      const items = drift.items.filter(
        (i) =>
          i.projectEnv === projectEnv ||
          (i.projectEnv === null && projectEnv.startsWith(`${i.address.split('.')[1] ?? ''}-`)),
      );
      const byCategory: EnvStatus['byCategory'] = {};
      for (const i of items) byCategory[i.category] = (byCategory[i.category] ?? 0) + 1;
      const env: EnvStatus = {
        projectEnv,
        synced: items.length === 0,
        drift: items.length,
        byCategory,
        expiring7d: expiries.filter((e) => e.projectEnv === projectEnv && within(e, 7)).length,
        expiring30d: expiries.filter((e) => e.projectEnv === projectEnv && within(e, 30)).length,
      };
      for (const [category, n] of Object.entries(byCategory))
        metrics.drift.set({ environment: projectEnv, category }, n);
      metrics.expiring.set({ environment: projectEnv, within: '7d' }, env.expiring7d);
      metrics.expiring.set({ environment: projectEnv, within: '30d' }, env.expiring30d);
      metrics.envSynced.set({ environment: projectEnv }, env.synced ? 1 : 0);
      return env;
    });
    status.keys = {
      expiring7d: expiries.filter((e) => within(e, 7)).length,
      expiring30d: expiries.filter((e) => within(e, 30)).length,
      expiries: expiries.slice(0, 500),
    };
  }

  /** The owner id: declared, else derived from the checkout (the repository's URL and the path), checked against the one recorded in the state folder. */
  private async owner(desired: DesiredState, configDir: string): Promise<string> {
    if (desired.owner) return desired.owner;
    const derived = await deriveOwner(configDir);
    const recorded = await readOwnerRecord(this.o.storeDir);
    if (recorded !== undefined && recorded !== derived) throw new OwnerMovedError(recorded, derived);
    return derived;
  }
}

/** The limits as the flags loadConfig reads. */
function sizeFlags(limits: ConfigLimits): { maxFileSize: string; maxConfigSize: string } {
  return { maxFileSize: String(limits.fileBytes), maxConfigSize: String(limits.totalBytes) };
}
