// What a configured provider works with: the API client, the secret stores and the key journal
// (the same classes `kms-sync apply` uses), an ApplyContext per change for the per-kind handlers
// of apply/, and the listings shared by every ReadResource of the process so that a refresh costs
// one paged listing per environment and kind, not one GET per resource.
import type { KmsClient, WireClient, WireEndpoint, WireProject, WireTemplate } from '../api/client.js';
import { ApiError } from '../api/http.js';
import { errorText, TemplateIds, type ApplyContext } from '../apply/context.js';
import type { JournaledKeyCapture } from '../apply/journaled-capture.js';
import type { CapturedKey, KeyCapture, StoredKeyReceipt } from '../apply/key-capture.js';
import type { OrphanKey } from '../apply/recover.js';
import {
  managedMetadata,
  writeOwnerRecord,
  type JsonObject,
  type OperatorPolicy,
  type StoreDeclaration,
} from '../model/index.js';
import {
  actingOwnership,
  isProtectedLive,
  mayChange,
  othersAlone,
  targetMetadata,
  type ContentOwnership,
  type Ownership,
} from '../model/ownership.js';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { isCi, localStoreFile, localStoreOptedIn, ALLOW_LOCAL_STORE_ENV } from '../secrets/ci-local-store.js';
import type { AppendOptions } from '../secrets/journal.js';
import type { StoreRegistry } from '../secrets/registry.js';
import type { SecurityChange } from '../plan/types.js';
import { DeletionGuard } from './deletion-guard.js';
import { openConnection } from '../engine/session.js';
import { DiagnosticError } from './diagnostics.js';
import { KEY_PREFIX_LENGTH, uuidOf } from './resources/state.js';

export interface ProviderConfig {
  url: string;
  apiKey: string;
  /** Owner id this configuration marks what it creates with (configured, else derived from where it lives). */
  owner: string;
  /** Where relative store URIs and the key journal resolve. */
  baseDir: string;
  stores: StoreDeclaration[];
  /** The operator's policy, from the environment (never the provider block, which the configuration holds). */
  policy: OperatorPolicy;
  /** Claim (and then change) what another configuration owns: the CLI's --take-ownership. */
  takeOwnership?: boolean;
}

/** What Terraform is about to do to an existing object (a key's create changes its client). */
export type ChangeAction = 'create' | 'update' | 'replace' | 'delete';

/** What one change did with raw keys: never the key, only where it went and its public prefix. */
export interface KeyLog {
  issued: { keyId: string; prefix: string; expiresAt: string | null; clientId: string }[];
  stored: StoredKeyReceipt[];
  notes: string[];
}

export class Engine {
  readonly api: KmsClient;
  readonly config: ProviderConfig;
  /** Which service this is (engine/session.ts): the secrets of the keys issued here record it. */
  private readonly sessionTarget: string;
  private readonly env: NodeJS.ProcessEnv;
  private readonly templates: TemplateIds;
  private secrets?: Promise<{ stores: StoreRegistry; capture: JournaledKeyCapture }>;
  private readonly listings = new Map<string, Promise<unknown>>();
  private readonly prepared = new Map<string, Promise<void>>();
  private readonly recovered = new Map<string, Promise<OrphanKey[]>>();
  /** Why no key may be issued any more in this process: the first secret-store write that failed. */
  private storeBroken: string | undefined;
  /** Unconfirmed keys (issued by a create, not yet seen in a Terraform state): key id → record id. */
  private unconfirmedIds?: Promise<Map<string, UnconfirmedEntry>>;
  /** This provider process, in the held-key marks it writes (model: one Terraform walk, one process). */
  readonly instance = randomUUID();
  /** Key ids Terraform showed it knows (a prior state held them), in this process. */
  readonly knownKeyIds = new Set<string>();
  /** Key ids a create of this process adopted: the current key of a resource, whatever older state still names them. */
  readonly adoptedKeyIds = new Set<string>();

  /** Orphans found by the recovery of each environment, revoked once a replacement of their name is stored. */
  orphansOf(projectEnv: string): Promise<OrphanKey[]> {
    return this.recovered.get(projectEnv) ?? Promise.resolve([]);
  }

  /** Does the key journal exist? (StoreRegistry.journalPath(), without loading the store code.) */
  private journalExists(): boolean {
    return existsSync(path.join(this.config.baseDir, '.kms-sync', 'journal'));
  }

  /**
   * The recovery of an environment (DESIGN.md "Keys" 0 and 5): what an earlier run left in the
   * journal is flushed into its stores (a journaled key is a stored key) and its interrupted
   * requests become orphans. Once per environment and process, shared by creates and refreshes.
   */
  private recover(projectEnv: string): Promise<OrphanKey[]> {
    let recovery = this.recovered.get(projectEnv);
    if (!recovery) {
      recovery = (async () => {
        const { stores, capture } = await this.keyPath();
        const [{ recoverBeforePlan }, { journalIsTheBases, trustBaseFromEnvironment }] = await Promise.all([
          import('../apply/recover.js'),
          import('../apply/trust.js'),
        ]);
        // In a pull request's job, only the base revision's journal is acted on (engine/run.ts recoverUnderLock).
        if (!(await journalIsTheBases(this.config.baseDir, trustBaseFromEnvironment(this.env)))) return [];
        return (await recoverBeforePlan(this.api, capture, stores, new Set([projectEnv]))).orphans;
      })();
      this.recovered.set(projectEnv, recovery);
      recovery.catch(() => this.recovered.delete(projectEnv));
    }
    return recovery;
  }

  /**
   * Before a refresh decides anything about a key: the recovery of its environment, so that a key
   * a killed provider journaled but never stored is held when the read looks at the store. Free
   * (no store code loaded) when there is no journal. `journalClean`: no raw key is left in the
   * journal (a store that could not be written keeps them there), so a key the store does not
   * hold is held nowhere.
   */
  async recoverForRead(projectEnv: string): Promise<{ orphans: OrphanKey[]; journalClean: boolean }> {
    if (!this.recovered.has(projectEnv) && !this.journalExists()) return { orphans: [], journalClean: true };
    const orphans = await this.recover(projectEnv);
    if (!this.journalExists()) return { orphans, journalClean: true };
    const { capture } = await this.keyPath();
    return { orphans, journalClean: (await capture.journal.pendingIds()).length === 0 };
  }

  /**
   * recoverForRead for a read that names a key by its id alone (kms_key_secret by key_id), which
   * does not know the key's environment: the recovery of each environment the journal holds keys
   * of. A key a killed run journaled but never stored is then in its store, as for a read by address.
   */
  async recoverJournaledForRead(): Promise<void> {
    if (!this.journalExists()) return;
    const { capture } = await this.keyPath();
    const envs = new Set((await capture.journal.pending()).map((k) => k.meta.projectEnv));
    for (const projectEnv of envs) await this.recoverForRead(projectEnv);
  }

  private readonly queues = new Map<string, Promise<void>>();
  private ownerRecorded: Promise<unknown> | undefined;
  /**
   * Runs `fn` once every earlier call with the same key has settled. Terraform applies
   * independent resources in parallel; the environments of one project must not be, because the
   * first creates the project and the last deletes it.
   */
  exclusive<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const run = (this.queues.get(key) ?? Promise.resolve()).then(fn);
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    this.queues.set(key, tail);
    void tail.then(() => {
      if (this.queues.get(key) === tail) this.queues.delete(key);
    });
    return run;
  }

  /** Projects a kms_project create recorded; the first kms_environment creates them (the API has no project without an environment). */
  readonly pendingProjects = new Map<string, { name: string; description?: string }>();

  /** The deletion guard of the deletes this process plans (deletion-guard.ts). */
  readonly deletions: DeletionGuard;

  constructor(config: ProviderConfig, env: NodeJS.ProcessEnv) {
    this.deletions = new DeletionGuard(env);
    this.config = config;
    // The engine layer's connection, as `kms-sync apply` opens it: the same client and service target.
    const conn = openConnection(
      { url: config.url, apiKey: config.apiKey, userAgent: 'terraform-provider-kms/0.1.0' },
      env,
    );
    this.api = conn.api;
    this.sessionTarget = conn.target;
    this.env = env;
    this.templates = new TemplateIds(this.api);
  }

  /**
   * The secret stores and the journal → store path of raw keys, loaded on the first key: a plan
   * or a refresh never loads the store backends.
   */
  keyPath(): Promise<{ stores: StoreRegistry; capture: JournaledKeyCapture }> {
    return (this.secrets ??= (async () => {
      // The engine layer's key path, as `kms-sync apply` lays it; secrets record the service target their key belongs to.
      const { keyCaptureFor } = await import('../engine/key-path.js');
      const { registry, capture } = keyCaptureFor(this.config.stores, this.config.baseDir, this.config.policy, {
        target: this.target(),
        env: this.env,
      });
      return { stores: registry, capture };
    })());
  }

  // ---------------------------------------------------------------- ownership (model/ownership.ts, as `plan`)
  /** Metadata written on create: the configured map, the ownership and protection markers, the applied digest. */
  managedMetadata(metadata: JsonObject | undefined, isProtected: boolean, applied: string): JsonObject {
    return managedMetadata(metadata, isProtected, this.config.owner, applied);
  }

  /** How this configuration sees a live object's ownership (take_ownership claims another's, as --take-ownership). */
  ownership(metadata: JsonObject | undefined): Ownership {
    return actingOwnership(metadata, this.config.owner, this.config.takeOwnership);
  }

  /**
   * Metadata of an update, as `plan` computes it: the markers as found on an object someone else
   * made, this configuration's owner and the digest of what it applies on one kms-sync made (a
   * legacy one is claimed), the protection marker following `protected`.
   */
  updatedMetadata(user: JsonObject, isProtected: boolean, live: JsonObject | undefined, applied: string): JsonObject {
    return targetMetadata(user, isProtected, live ?? {}, this.config.owner, applied);
  }

  /**
   * The rule both engines follow (DESIGN.md "Ownership and deletes"): another configuration's
   * object is never updated, replaced or deleted (unless take_ownership), nor are keys issued,
   * changed or revoked on its clients; a live object marked protected is never deleted or
   * replaced. Throws the diagnostic; returns the ownership the change acts on.
   */
  checkChange(
    what: { type: string; address: string; of?: string },
    metadata: JsonObject | undefined,
    action: ChangeAction,
  ): Ownership {
    const o = this.ownership(metadata);
    if (!mayChange(o) && action === 'create' && !what.of) {
      throw new DiagnosticError(
        'Owned by another configuration',
        `${what.type} ${what.address} already exists and is owned by configuration '${o.owner}' (its metadata kms-sync/owner), not by this one ('${this.config.owner}'), ` +
          'so terraform-provider-kms does not create a second one of that identity. To manage it from this configuration, import it ' +
          `(an import block, or terraform import <address> ${what.address}) and set take_ownership = true in the provider "kms" block; or remove it from this configuration.`,
      );
    }
    if (!mayChange(o)) {
      const verb = what.of
        ? `${action === 'create' ? 'issue' : action === 'delete' ? 'revoke' : action} ${what.type} ${what.address} of ${what.of}`
        : `${action} ${what.type} ${what.address}`;
      const owned = what.of ?? `${what.type} ${what.address}`;
      throw new DiagnosticError(
        'Owned by another configuration',
        `${owned} is owned by configuration '${o.owner}' (its metadata kms-sync/owner), not by this one ('${this.config.owner}'), so terraform-provider-kms does not ${verb}. ` +
          'To manage it from this configuration, set take_ownership = true in the provider "kms" block (the apply then marks it with this configuration\'s owner id, ' +
          'as kms-sync --take-ownership does); or declare the same owner as that configuration; or stop tracking it here without changing it: terraform state rm <address>.',
      );
    }
    if ((action === 'delete' || action === 'replace') && !what.of && isProtectedLive(metadata)) {
      throw new DiagnosticError(
        'Protected resource',
        `${what.type} ${what.address} is marked protected in the service (metadata kms-sync/protected): kms-sync never deletes or replaces it. Set protected = false and apply first.`,
      );
    }
    return o;
  }

  /**
   * The same rule for what carries no metadata (environments, templates, projects), whose owner
   * follows from what they hold or what uses them (model/ownership.ts `ownershipByContents`): a
   * create of one that exists adopts it only when it is this configuration's, and is refused
   * otherwise (another configuration's, or nobody's known: import it); one that only another
   * configuration's objects hold or use is never updated, replaced or deleted (unless
   * take_ownership); one this configuration's objects hold or use too may change.
   */
  checkContents(
    what: { type: string; address: string; importId: string },
    o: ContentOwnership,
    action: ChangeAction,
  ): void {
    if (o.kind === 'other' && (action === 'create' || othersAlone(o))) {
      const verb = action === 'create' ? 'create it again (it exists)' : action;
      throw new DiagnosticError(
        'Owned by another configuration',
        `${what.type} ${what.address} holds ${o.address}, which is owned by configuration '${o.owner}' (its metadata kms-sync/owner), not by this one ('${this.config.owner}'): ` +
          `it is that configuration's, so terraform-provider-kms does not ${verb}. ` +
          (action === 'create'
            ? 'Reference it by its id instead of declaring it here (e.g. project_env = "<project>-<type>"), or, to manage it from this configuration, import it ' +
              `(an import block, or terraform import <address> ${what.importId}) and set take_ownership = true in the provider "kms" block.`
            : 'To manage it from this configuration, set take_ownership = true in the provider "kms" block; or stop tracking it here without changing it: terraform state rm <address>.'),
      );
    }
    if (o.kind === 'unknown' && action === 'create') {
      throw new DiagnosticError(
        'Already exists',
        `${what.type} ${what.address} already exists in the service and nothing in it shows it is this configuration's ('${this.config.owner}'), ` +
          `so terraform-provider-kms does not take it over by creating it. Import it to manage it here: terraform import <address> ${what.importId} (or an import block).`,
      );
    }
  }

  /**
   * Before the first key of an environment is issued: flush what an earlier run left in the
   * journal, turn its interrupted requests into orphans (revoked once their replacement is
   * stored), and check the key's store is writable. Once per process each.
   */
  async prepareIssue(projectEnv: string, store: string | undefined, secretName?: string): Promise<OrphanKey[]> {
    this.assertCanIssue();
    const { stores, capture } = await this.keyPath();
    await this.refuseLocalStoreInCi(stores, store);
    // A journal that cannot be flushed is reported by `prepare` below, which then refuses to issue.
    const orphans = await this.recover(projectEnv);
    const name = store ?? '';
    let check = this.prepared.get(name);
    if (!check) {
      check = capture.prepare([store]);
      this.prepared.set(name, check);
      check.catch(() => this.prepared.delete(name));
    }
    await check;
    // The secret it writes must not hold another service target's key (checked before issuing).
    if (secretName !== undefined)
      await capture.checkTargets([{ ...(store !== undefined ? { store } : {}), secretName }]);
    return orphans;
  }

  /**
   * Once a store write has failed in this process, no key is issued any more (as `kms-sync apply`
   * stops issuing): the keys already issued are safe in the journal, and each further key would
   * only join them there.
   */
  assertCanIssue(): void {
    if (this.storeBroken === undefined) return;
    throw new DiagnosticError(
      'No key issued: the secret store failed earlier in this apply',
      `an earlier secret-store write of this apply failed (${this.storeBroken}), so terraform-provider-kms issues no further key. ` +
        'The keys already issued are safe in the journal; `kms-sync secrets flush` or the next apply writes them to the store once it is writable again.',
    );
  }

  /** Marks the store broken for the rest of the process (the first failure is the one reported). */
  storeFailed(why: string): void {
    this.storeBroken ??= why;
  }

  /**
   * In CI a local store file goes away with the runner unless the workflow commits it: refuse to
   * issue into one unless KMS_SYNC_ALLOW_LOCAL_STORE=1 says the workflow keeps it.
   */
  private async refuseLocalStoreInCi(stores: StoreRegistry, name: string | undefined): Promise<void> {
    if (!isCi(this.env) || localStoreOptedIn(this.env)) return;
    const store = await stores.get(name);
    const file = localStoreFile(store);
    if (file === undefined) return;
    throw new DiagnosticError(
      'Refusing to issue keys into a local store file in CI',
      `CI is set and the keys would go to the local file ${file}, which this runner takes with it when the job ends. ` +
        'Either declare a remote secret_store in the provider block (vault://, aws-sm://, ...), or add a workflow step that commits and pushes ' +
        `the store file after the apply and set ${ALLOW_LOCAL_STORE_ENV}=1.`,
      ['secret_store'],
    );
  }

  // ---------------------------------------------------------------- unconfirmed keys
  /** The key id → record map of unconfirmed keys, read from the journal once per process. */
  private unconfirmedMap(): Promise<Map<string, UnconfirmedEntry>> {
    return (this.unconfirmedIds ??= (async () => {
      const m = new Map<string, UnconfirmedEntry>();
      if (!this.journalExists()) return m;
      const { capture } = await this.keyPath();
      const stale: string[] = [];
      for (const r of await capture.journal.unconfirmed()) {
        // A held-key mark lives from a plan to its apply: an old one is stale (no longer a sign of this run's lost state).
        if (r.heldBy !== undefined && Date.now() - Date.parse(r.createdAt) > HELD_MARK_TTL_MS) {
          stale.push(r.id);
          continue;
        }
        for (const id of r.keyIds) m.set(id, { record: r.id, ...(r.heldBy !== undefined ? { heldBy: r.heldBy } : {}) });
      }
      if (stale.length) await capture.resolve({ resolve: stale }).catch(() => undefined);
      return m;
    })());
  }

  /**
   * Key ids a create may adopt: issued by a provider create that Terraform has not shown it knows
   * yet, or found held by another process's plan with no state naming them (a live view, not a
   * copy). A held key this process marked itself is not among them.
   */
  async unconfirmedKeys(): Promise<{ has(keyId: string): boolean }> {
    const m = await this.unconfirmedMap();
    return {
      has: (keyId) => {
        const r = m.get(keyId);
        return r !== undefined && r.heldBy !== this.instance;
      },
    };
  }

  /**
   * A plan found `keyIds` held in the store, live and named by no state Terraform showed: recorded
   * (plaintext ids, no raw key) so that the create Terraform's apply runs (another provider
   * process) adopts the key instead of issuing a second one. Never fails the plan: without the
   * record the create issues a new key and ends the held one once the new one is stored.
   */
  async markHeld(rec: {
    projectEnv: string;
    clientId: string;
    client: string;
    keyIds: string[];
    keyNames: string[];
  }): Promise<boolean> {
    const m = await this.unconfirmedMap();
    const keyIds = rec.keyIds.filter((id) => !m.has(id) && !this.knownKeyIds.has(id));
    if (keyIds.length === 0) return false;
    const { newUnconfirmedId } = await import('../secrets/journal.js');
    const id = newUnconfirmedId();
    for (const k of keyIds) m.set(k, { record: id, heldBy: this.instance });
    try {
      const { capture } = await this.keyPath();
      await capture.resolve({
        unconfirmed: [{ ...rec, keyIds, keyNames: rec.keyNames, id, type: 'unconfirmed', heldBy: this.instance }],
      });
      return true;
    } catch {
      for (const k of keyIds) if (m.get(k)?.record === id) m.delete(k);
      return false;
    }
  }

  /**
   * Terraform sent a state holding `keyId`: it knows that key, so its unconfirmed record (if any)
   * is cleared. Cheap when there is nothing to clear (no journal file: no read at all).
   */
  async confirm(keyId: string): Promise<void> {
    this.knownKeyIds.add(keyId);
    const m = await this.unconfirmedMap();
    if (!m.has(keyId)) return;
    await this.forgetUnconfirmed([keyId]);
  }

  /** Clears the records of these keys (confirmed by Terraform, or revoked). */
  async forgetUnconfirmed(keyIds: string[]): Promise<void> {
    const m = await this.unconfirmedMap();
    const records = [...new Set(keyIds.map((id) => m.get(id)?.record).filter((r): r is string => r !== undefined))];
    if (records.length === 0) return;
    for (const [id, r] of [...m]) if (records.includes(r.record)) m.delete(id);
    const { capture } = await this.keyPath();
    await capture.resolve({ resolve: records });
    // The last record gone: the journal file goes too when nothing else in it is live.
    if (m.size === 0) await capture.compact();
  }

  /** The key id the secret `secretName` of a store holds (its listed metadata), when the backend lists it. */
  async heldKeyId(store: string | undefined, secretName: string): Promise<string | undefined> {
    const { stores } = await this.keyPath();
    const s = await stores.get(store);
    if (!s.list) return undefined;
    const name = s.secretName(secretName);
    return (await s.list()).find((l) => l.name === name)?.meta?.keyId;
  }

  /**
   * Runs one change through the apply handlers with a context of its own; resolves once every
   * raw key it issued has settled in its store. `storeError`: a store write failed after the key
   * was journaled (the key is safe there). A key that could be saved nowhere was revoked by the
   * handler, which then rejects with a KeyStoreFailure saying so.
   */
  async change<T>(
    store: string | undefined,
    projectEnv: string,
    fn: (ctx: ApplyContext, log: KeyLog) => Promise<T>,
    opts: { unconfirmed?: boolean; secretName?: string } = {},
  ): Promise<{ value: T; log: KeyLog; storeError?: string }> {
    const log: KeyLog = { issued: [], stored: [], notes: [] };
    const unconfirmed = opts.unconfirmed === true;
    let innerCapture: JournaledKeyCapture | undefined;
    const capture = async () => (innerCapture ??= (await this.keyPath()).capture);
    const tracked: Promise<StoredKeyReceipt[]>[] = [];
    const keys: KeyCapture = {
      prepare: async (s) => (await capture()).prepare(s),
      intend: async (i) => (await capture()).intend(i),
      resolve: async (o) => (await capture()).resolve(o),
      capture: async (captured: CapturedKey[], opts) => {
        // The raw value is looked at here only for its public prefix; it goes on to the journal.
        for (const k of captured) {
          log.issued.push({
            keyId: k.meta.keyId,
            prefix: k.value.slice(0, KEY_PREFIX_LENGTH),
            expiresAt: k.meta.expiresAt ?? null,
            clientId: k.clientId,
          });
        }
        let append: AppendOptions | undefined = opts;
        if (unconfirmed && captured.length) {
          // Recorded as unconfirmed in the same durable write as the raw keys: a Terraform killed
          // before it saved the state leaves a key the next create adopts instead of re-issuing.
          const { newUnconfirmedId } = await import('../secrets/journal.js');
          const records = [...groupClients(captured)].map(([clientId, ks]) => ({
            id: newUnconfirmedId(),
            type: 'unconfirmed' as const,
            projectEnv: ks[0]!.meta.projectEnv,
            clientId,
            client: ks[0]!.meta.client,
            keyIds: ks.map((k) => k.meta.keyId),
            keyNames: ks.map((k) => k.meta.key),
          }));
          append = { ...(opts ?? {}), unconfirmed: [...(opts?.unconfirmed ?? []), ...records] };
          const m = await this.unconfirmedMap();
          const handle = await (await capture()).capture(captured, append);
          for (const r of records) for (const id of r.keyIds) m.set(id, { record: r.id });
          return handle;
        }
        return (await capture()).capture(captured, append);
      },
    };
    const ctx: ApplyContext = {
      api: this.api,
      keys,
      now: () => new Date(),
      templates: this.templates,
      beforeIssue: async () => {
        await this.prepareIssue(projectEnv, store, opts.secretName);
      },
      track: (stored) => {
        tracked.push(stored);
      },
      recovered: (note) => log.notes.push(note),
    };
    let value: T;
    try {
      value = await fn(ctx, log);
    } catch (e) {
      const { KeyStoreFailure } = await import('../apply/key-capture.js');
      if (e instanceof KeyStoreFailure) this.storeFailed(errorText(e));
      throw e;
    }
    // What this process wrote carries its owner id: recorded once, so that a later run notices if it moves.
    this.ownerRecorded ??= writeOwnerRecord(this.config.baseDir, this.config.owner).catch(() => undefined);
    await this.settleSecurity().catch((e) =>
      log.notes.push(
        `the security changes of the secret stores were not settled (a removed recipient's store not re-keyed): ${errorText(e)}`,
      ),
    );
    const settled = await Promise.allSettled(tracked);
    for (const s of settled) if (s.status === 'fulfilled') log.stored.push(...s.value);
    const failed = settled.find((s) => s.status === 'rejected');
    if (failed) this.storeFailed(errorText((failed as PromiseRejectedResult).reason));
    return { value, log, ...(failed ? { storeError: errorText((failed as PromiseRejectedResult).reason) } : {}) };
  }

  // ---------------------------------------------------------------- shared listings
  /**
   * One listing per (kind, scope) per process, shared by every caller. A failed listing is not
   * kept, so the next caller asks again.
   */
  private listing<T>(kind: string, scope: string, load: () => Promise<T>): Promise<T> {
    const key = `${kind}\u0000${scope}`;
    let p = this.listings.get(key) as Promise<T> | undefined;
    if (!p) {
      p = load();
      this.listings.set(key, p);
      p.catch(() => this.listings.delete(key));
    }
    return p;
  }

  /** After a write, later reads of that scope must see it. */
  forget(kind: 'project' | 'template' | 'client' | 'endpoint', scope = ''): void {
    this.listings.delete(`${kind}\u0000${scope}`);
    if (kind === 'client') this.listings.delete(`client-by-name\u0000${scope}`);
    if (kind === 'project')
      for (const k of [...this.listings.keys()]) if (k.startsWith('project-full\u0000')) this.listings.delete(k);
  }

  projects(): Promise<Map<string, WireProject>> {
    return this.listing('project', '', async () => new Map((await this.api.listProjects()).map((p) => [p.slug, p])));
  }

  /** A project with its environments' details (URL, templates): one GET per project, shared by its environments. */
  projectFull(slug: string, anyEnv: string): Promise<WireProject | undefined> {
    return this.listing('project-full', slug, async () => {
      try {
        return await this.api.getProject(anyEnv);
      } catch (e) {
        if (e instanceof ApiError && e.status === 404) return undefined;
        throw e;
      }
    });
  }

  templatesOf(projectEnv: string): Promise<Map<string, WireTemplate>> {
    return this.listing(
      'template',
      projectEnv,
      async () =>
        new Map((await this.missingEnvIsEmpty(() => this.api.listTemplates(projectEnv))).map((t) => [t.name, t])),
    );
  }

  /** Every live client of an environment, as listed: two clients may share a name (DESIGN.md "Identities"). */
  clientListOf(projectEnv: string): Promise<WireClient[]> {
    return this.listing('client', projectEnv, () => this.missingEnvIsEmpty(() => this.api.listClients(projectEnv)));
  }

  /** The live clients of an environment by name (the last of a shared name; refuseDuplicateClient says when there are more). */
  clientsOf(projectEnv: string): Promise<Map<string, WireClient>> {
    return this.listing('client-by-name', projectEnv, async () => {
      const list = await this.clientListOf(projectEnv);
      const byName = new Map<string, WireClient>();
      const dups = new Map<string, string[]>();
      for (const c of list) {
        const first = byName.get(c.name);
        if (first) dups.set(c.name, [...(dups.get(c.name) ?? [uuidOf(first)]), uuidOf(c)]);
        byName.set(c.name, c);
      }
      this.clientDuplicates.set(projectEnv, dups);
      return byName;
    });
  }

  /** Client names two or more live clients of an environment share (from its last listing): name → their ids. */
  private readonly clientDuplicates = new Map<string, Map<string, string[]>>();

  /**
   * DESIGN.md "Identities": two live clients with one identity are reported, never guessed at.
   * Throws when the last listing of the environment (or `found`, a fresh read) holds more than one
   * client named `name`.
   */
  refuseDuplicateClient(projectEnv: string, name: string, found?: WireClient[]): void {
    const ids =
      found && found.length > 1
        ? found.map(uuidOf)
        : found
          ? undefined
          : this.clientDuplicates.get(projectEnv)?.get(name);
    if (!ids) return;
    throw new DiagnosticError(
      'Duplicate clients',
      `${ids.length} live clients of ${projectEnv} are named ${name} (${ids.join(', ')}): terraform-provider-kms does not guess which one is this resource's, and changes none of them. ` +
        'Delete the extra ones in the service (keeping the one whose keys are in use), then run terraform again.',
    );
  }

  endpointsOf(projectEnv: string): Promise<Map<string, WireEndpoint>> {
    return this.listing(
      'endpoint',
      projectEnv,
      async () =>
        new Map(
          (await this.missingEnvIsEmpty(() => this.api.listEndpoints(projectEnv))).map((e) => [
            `${e.method.toUpperCase()}:${e.path}`,
            e,
          ]),
        ),
    );
  }

  /**
   * Clients (endpoints) of an environment as this process first listed them, for the ownership
   * rule when planning: kept across this process's own writes, which never make another
   * configuration's object (Terraform plans each resource again during an apply, and re-listing
   * after every write would cost a listing per resource). Apply checks again on fresh reads.
   */
  clientOwners(projectEnv: string): Promise<Map<string, WireClient>> {
    return this.listing('client-owners', projectEnv, () => this.clientsOf(projectEnv));
  }

  endpointOwners(projectEnv: string): Promise<Map<string, WireEndpoint>> {
    return this.listing('endpoint-owners', projectEnv, () => this.endpointsOf(projectEnv));
  }

  /** An environment that no longer exists has nothing in it (its resources are gone, not an error). */
  private async missingEnvIsEmpty<T>(list: () => Promise<T[]>): Promise<T[]> {
    try {
      return await list();
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return [];
      throw e;
    }
  }

  // ---------------------------------------------------------------- security changes (apply/trust.ts, as `plan` shows them)
  private security?: Promise<{ changes: SecurityChange[]; lines: string[] }>;
  private securitySettled?: Promise<void>;

  /**
   * The security changes of the provider block's stores since the last apply that wrote (stores new
   * or changed, recipients a store file lacks or still holds though the block dropped them), one
   * escaped line each; once per process. Nothing without secret_store blocks.
   */
  async securityChanges(): Promise<string[]> {
    if (this.config.stores.length === 0) return [];
    return (await this.securityFound()).lines;
  }

  private securityFound(): Promise<{ changes: SecurityChange[]; lines: string[] }> {
    return (this.security ??= (async () => {
      const [{ securityChanges, trustBaseFromEnvironment }, { describeSecurityChange }, { printable }, { stores }] =
        await Promise.all([
          import('../apply/trust.js'),
          import('../plan/types.js'),
          import('../model/printable.js'),
          this.keyPath(),
        ]);
      // In a pull request's CI job, compared with the base branch's records (the checkout's are the pull request's).
      const base = trustBaseFromEnvironment(this.env);
      const { changes } = await securityChanges(
        stores,
        { stores: this.config.stores },
        this.config.owner,
        this.config.baseDir,
        this.target(),
        base,
      );
      // The provider's operator setting is its environment's (no flags).
      return {
        changes,
        lines: changes.map((c) =>
          printable(describeSecurityChange(c)).replace('--allow-new-recipients', 'KMS_SYNC_ALLOW_NEW_RECIPIENTS=1'),
        ),
      };
    })());
  }

  /** The service target (model/target.ts) its secrets and records belong to. */
  private target(): string {
    return this.sessionTarget;
  }

  /** After the first write of an apply: stores whose block dropped recipients re-keyed, the stores recorded (once per process). */
  private settleSecurity(): Promise<void> {
    if (this.config.stores.length === 0) return Promise.resolve();
    return (this.securitySettled ??= (async () => {
      const [{ changes }, { rekeyForRemovedRecipients, writeTrustRecord }, { stores }] = await Promise.all([
        this.securityFound(),
        import('../apply/trust.js'),
        this.keyPath(),
      ]);
      await rekeyForRemovedRecipients(stores, changes);
      await writeTrustRecord(this.config.baseDir, { stores: this.config.stores }, this.target());
    })());
  }

  /** Journal writes in progress (raw keys on their way): waited for, briefly, before the process exits. */
  async drain(ms = 5000): Promise<void> {
    if (!this.secrets) return;
    await (await this.secrets).capture.drain(ms);
  }

  async close(): Promise<void> {
    await this.api.close();
  }
}

/** An unconfirmed-key record as the engine holds it: its journal id, and who marked it if it is a held-key mark. */
interface UnconfirmedEntry {
  record: string;
  heldBy?: string;
}

/** How long a held-key mark stays a reason to adopt (a plan and the apply of it). */
const HELD_MARK_TTL_MS = 24 * 3_600_000;

function groupClients(keys: CapturedKey[]): Map<string, CapturedKey[]> {
  const m = new Map<string, CapturedKey[]>();
  for (const k of keys) m.set(k.clientId, [...(m.get(k.clientId) ?? []), k]);
  return m;
}
