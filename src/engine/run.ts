// Shared wiring of the commands: configuration → scope → API client → live state → plan.
import { existsSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import type { JournaledKeyCapture } from '../apply/journaled-capture.js';
import { describeRecovery, recoverBeforePlan, type Recovery } from '../apply/recover.js';
import { acquireLock, type StateIncarnation } from '../secrets/fsutil.js';
import { defaultJournalPath } from '../secrets/journal.js';
import {
  ConfigError,
  formatDiagnostic,
  formatDiagnostics,
  loadDesiredState,
  loadDesiredStateStreamedOrWhole,
  NotStreamable,
  type LoadResult,
  type StreamedBodies,
  type StreamedLoad,
} from '../config/index.js';
import {
  readLiveState,
  readLiveStream,
  type LiveHead,
  type LiveReadResult,
  type LiveScope,
  type LiveStream,
} from '../live/read.js';
import { credentialKind, emptyLiveState, projectEnvOf, type DesiredState, type LiveState } from '../model/index.js';
import { buildPlan, sortOperations } from '../plan/diff.js';
import { mergePlans, type PlanPart } from '../plan/merge.js';
import { madePlain, type InventoryEntry, type InventoryIndex, type InventoryScan } from '../plan/inventory.js';
import type { ServiceInventory } from './inventory.js';
import { planDestroy } from '../plan/removal.js';
import { missingExternalProjects } from '../plan/external.js';
import { capacityProblems, describeCapacity } from '../plan/capacity.js';
import { applyIgnoreRules, type IgnoreRules } from '../plan/ignore.js';
import { summarize, WARNING_PHASE, type WarningOrder } from '../plan/types.js';
import { assessKeys, type SecretStatus } from '../plan/key-health.js';
import { noSecretNamesTaken, secretCollisions } from '../secrets/collisions.js';
import { checkSecretPresence, movedSecretWarnings, newPresenceCache, type PresenceCache } from '../secrets/presence.js';
import { StoreRegistry } from '../secrets/registry.js';
import { matchesAny, scopeDesired, unmatchedPatterns } from '../plan/scope.js';
import type { Plan } from '../plan/types.js';
import { readCdktfFlags, type CdktfFlags } from './cdktf-input.js';
import { UsageError } from './errors.js';
import { limitsOf, type LimitFlags } from './config-limits.js';
import type { FileRules } from '../config/paths.js';
import { frontEnd } from './front-end.js';
import { keyCaptureFor } from './key-path.js';
import { openConnection, type Connection } from './session.js';
import { safeUrl } from '../report/redact.js';
import { resolveOwner } from './owner.js';
import { PolicyError, readOperatorPolicy, type PolicyFlags } from '../config/policy.js';
import type { OperatorPolicy } from '../model/index.js';
import { storePolicyProblems } from '../secrets/store-policy.js';
import { journalIsTheBases, previousStoreFiles, securityChanges, type TrustBase } from '../apply/trust.js';
import { opWrites } from '../apply/execute.js';
import { serviceHoldings } from './inventory.js';
import { planOnThreads, planThreadCount, type EnvJob, type EnvResult, type PlanThreadHooks } from './plan-threads.js';
import {
  keepNamed,
  planEnvironment,
  planPart,
  rotation,
  secretQueries,
  storeContactRefused,
  takeEnvBodies,
  type AskPresence,
  type PartSettings,
  type PlannedPart,
} from './plan-env.js';

export interface GlobalOptions extends CdktfFlags, LimitFlags, PolicyInput {
  file: string[];
  env: string[];
  url?: string;
  parallelism: number;
  maxRps?: number;
}

export interface LoadedConfig {
  desired: DesiredState;
  /**
   * Environments of the projects in scope that are not in the configuration at all (whole, not
   * narrowed by --env) but match --env: they left it, and the plan removes them by ownership.
   */
  leaving: (projectEnv: string) => boolean;
  files: string[];
  /** Folder of the first -f argument: relative store paths and the journal live here. */
  baseDir: string;
  /** The live read started while the configuration loaded (ReadAhead), for planFor's `readAhead`. */
  live?: StartedRead;
  /** The operator's policy the configuration was checked against (model/policy.ts). */
  policy: OperatorPolicy;
  /**
   * Loaded environment by environment (loadConfig's `stream`): `desired` holds no clients and no
   * endpoints, planFor reads them from here (PlanOptions.bodies).
   */
  bodies?: StreamedBodies;
}

/** How a command reaches the operator policy: its flags (--policy, --allow-env, --allow-new-recipients), or one given (the agent's). */
export interface PolicyInput extends PolicyFlags {
  operatorPolicy?: OperatorPolicy;
  /** Where store files live (default: the configuration folder; the agent's STATE/store). */
  storeRoot?: string;
}

/** The operator policy of a command run against the configuration in `configRoot` (a UsageError when it cannot be read). */
export function policyFor(o: PolicyInput, configRoot: string | undefined): OperatorPolicy {
  if (o.operatorPolicy) return o.operatorPolicy;
  try {
    return readOperatorPolicy({ flags: o, env: process.env, ...(configRoot ? { configRoot } : {}) });
  } catch (e) {
    if (e instanceof PolicyError) throw new UsageError(e.message);
    throw e;
  }
}

/** Store declarations the policy refuses, as `file:line:column: stores[i].field: …` lines (empty when none). */
export function storePolicyDiagnostics(stores: DesiredState['stores'], policy: OperatorPolicy, root: string): string[] {
  const lines: string[] = [];
  for (const s of stores) {
    for (const problem of storePolicyProblems(s, policy, root)) {
      lines.push(
        formatDiagnostic(
          s.source
            ? {
                file: s.source.file,
                line: s.source.line,
                column: s.source.column,
                path: `${s.source.path}.${problem.field}`,
                message: problem.message,
              }
            : {
                file: '(saved plan)',
                line: 0,
                column: 0,
                path: `stores.${s.name}.${problem.field}`,
                message: problem.message,
              },
        ),
      );
    }
  }
  return lines;
}

/** The file read when no -f is given (like decK's kong.yaml): in the current folder or the nearest parent. */
export const DEFAULT_CONFIG_FILE = 'kms-sync.yaml';

export async function findDefaultConfig(from: string = process.cwd()): Promise<string | undefined> {
  for (let dir = path.resolve(from); ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, DEFAULT_CONFIG_FILE);
    if (
      await stat(candidate).then(
        (s) => s.isFile(),
        () => false,
      )
    )
      return candidate;
    if (path.dirname(dir) === dir) return undefined;
  }
}

/**
 * `warn` takes the configuration's warnings (the agent logs them in its own format); default: stderr.
 * `shownFrom`: the folder file names in errors and warnings are relative to (the agent: its
 * checkout, so they read as paths in the repository); default: the working directory.
 */
export async function loadConfig(
  o: Pick<GlobalOptions, 'file' | 'env'> &
    CdktfFlags &
    LimitFlags &
    PolicyInput & { files?: FileRules; shownFrom?: string; stream?: StreamedAttempt },
  readAhead?: ReadAhead,
  warn?: (line: string) => void,
): Promise<LoadedConfig> {
  performance.mark('kms:config-start'); // CDKTF: running the app (synth) is part of loading the configuration
  const limits = limitsOf(o);
  const cdktf = await readCdktfFlags(o, limits);
  if (o.file.length === 0 && !cdktf) {
    const found = await findDefaultConfig();
    if (!found)
      throw new UsageError(
        `no configuration given: use -f FILE_OR_FOLDER (repeatable) or --cdktf [DIR], or create ${DEFAULT_CONFIG_FILE} here (kms-sync init)`,
      );
    const shown = path.relative(process.cwd(), found) || found;
    if (path.dirname(found) !== process.cwd() && !o.stream?.whole)
      frontEnd().notice(`Using the configuration ${shown} (no -f given)\n`);
    o = { ...o, file: [shown] };
  }
  const first = o.file[0] !== undefined ? path.resolve(o.file[0]) : undefined;
  const baseDir =
    first === undefined
      ? cdktf!.baseDir
      : (await stat(first).then(
            (st) => st.isDirectory(),
            () => false,
          ))
        ? first
        : path.dirname(first);
  let policy: OperatorPolicy;
  try {
    policy = policyFor(o, baseDir);
  } catch (e) {
    readAhead?.abandon();
    throw e;
  }
  let loaded: LoadResult | StreamedLoad;
  let bodies: StreamedBodies | undefined;
  try {
    const options = {
      limits,
      policy,
      ...(o.files ? { files: o.files } : {}),
      ...(o.shownFrom ? { cwd: o.shownFrom } : {}),
      ...(cdktf ? { documents: cdktf.documents, diagnostics: cdktf.diagnostics } : {}),
      bodiesHere: (chars: number) => planThreadCount(chars) === 1,
      ...(readAhead
        ? {
            onParsed: (documents: unknown[], streamed?: { bytes: number }) =>
              readAhead.start(documents, baseDir, o.env, streamed !== undefined && planThreadCount(streamed.bytes) > 1),
          }
        : {}),
    };
    // Streamed only without a journal: recovery runs once, whatever the plan then finds.
    // (The files are read once: a configuration that cannot stream is loaded whole from the same texts.)
    loaded =
      o.stream && !o.stream.whole && !existsSync(defaultJournalPath(baseDir))
        ? await loadDesiredStateStreamedOrWhole(o.file, options)
        : await loadDesiredState(o.file, options);
    bodies = 'bodies' in loaded ? (loaded as StreamedLoad).bodies : undefined;
    if (o.stream && bodies) o.stream.bodies = bodies;
  } catch (e) {
    readAhead?.abandon();
    if (e instanceof ConfigError)
      throw new UsageError(`configuration is not valid:\n${formatDiagnostics(e.diagnostics)}`);
    throw e;
  }
  // What the operator policy refuses of the stores: at their file:line, before anything is contacted.
  const refused = storePolicyDiagnostics(loaded.state.stores, policy, o.storeRoot ?? baseDir);
  if (refused.length) {
    readAhead?.abandon();
    throw new UsageError(`configuration is not valid:\n${refused.join('\n')}`);
  }
  performance.mark('kms:config-end');
  if (warn) for (const w of loaded.warnings) warn(formatDiagnostic(w));
  else {
    if (loaded.warnings.length) frontEnd().clearProgress();
    for (const w of loaded.warnings) frontEnd().notice(`warning: ${formatDiagnostic(w)}\n`);
  }
  const unmatched = unmatchedPatterns(loaded.state, o.env);
  if (unmatched.length) {
    throw new UsageError(
      `--env ${unmatched.map((p) => JSON.stringify(p)).join(', ')} matches no environment of the configuration (known: ${loaded.state.envs.map((e) => e.projectEnv).join(', ') || 'none'})`,
    );
  }
  const configured = new Set(loaded.state.envs.map((e) => e.projectEnv));
  const leaving = (pe: string) => !configured.has(pe) && (o.env.length === 0 || matchesAny(pe, o.env));
  const desired = scopeDesired(loaded.state, o.env);
  const live = readAhead?.take(desired, configured);
  return {
    desired,
    leaving,
    files: loaded.files,
    baseDir,
    policy,
    ...(live ? { live } : {}),
    ...(bodies ? { bodies } : {}),
  };
}

/**
 * loadConfig's `stream`: load environment by environment when the configuration allows it (`bodies`
 * is then set), or, with `whole`, the second attempt of streamedOrWhole: loaded whole, and what the
 * first attempt said already (the configuration found, the inventory's warnings) is not said again.
 */
export interface StreamedAttempt {
  bodies?: StreamedBodies;
  whole?: true;
}

/**
 * Runs `attempt` with the configuration loaded environment by environment (loadConfig's `stream`),
 * and again with it loaded whole when that met what only the whole load says (NotStreamable): the
 * same output either way. Another error (the service unreachable, a capacity refused) stands only
 * when the environments not read yet hold no such problem, which a whole load would have said
 * first. For commands that write nothing before their output (plan).
 */
export async function streamedOrWhole<T>(attempt: (stream: StreamedAttempt) => Promise<T>): Promise<T> {
  const streamed: StreamedAttempt = {};
  try {
    return await attempt(streamed);
  } catch (e) {
    if (!(e instanceof NotStreamable)) {
      const rest = streamed.bodies?.finish().then(
        () => false,
        (f: unknown) => {
          if (f instanceof NotStreamable) return true;
          throw f;
        },
      );
      if (!(await rest)) throw e;
    }
    return attempt({ whole: true });
  }
}

export { credentialKind };

export type { Connection } from './session.js';

/** The API client from KMS_API_URL / --url and KMS_API_KEY (never a command-line flag). */
export function connect(
  o: Pick<GlobalOptions, 'url' | 'parallelism' | 'maxRps'>,
  env: NodeJS.ProcessEnv = process.env,
  onRetry?: (line: string) => void,
): Connection {
  const url = o.url ?? env.KMS_API_URL;
  if (!url) throw new UsageError('no service URL: set KMS_API_URL or pass --url (e.g. http://127.0.0.1:8080/api/v1)');
  const apiKey = env.KMS_API_KEY;
  if (!apiKey) throw new UsageError('no credentials: set KMS_API_KEY to a project key (sk_live_… or sk_test_…)');
  // Refused here, before it is sent anywhere: a value of another kind (a raw customer key, another
  // service's token, a pasted placeholder) must not travel to the service URL.
  if (!/^sk_(live|test)_\S+$/.test(apiKey.trim())) {
    throw new UsageError(
      'KMS_API_KEY is not a project key: project keys start with sk_live_ or sk_test_. Nothing was sent; check the variable (see docs/troubleshooting.md#authentication-failed)',
    );
  }
  try {
    new URL(url);
  } catch {
    throw new UsageError(`KMS_API_URL / --url is not a URL: ${JSON.stringify(url)}`);
  }
  const conn = openConnection(
    {
      url,
      apiKey,
      parallelism: o.parallelism,
      ...(o.maxRps ? { maxRps: o.maxRps } : {}),
      userAgent: 'kms-sync/0.1.0',
      ...(onRetry
        ? {
            onRetry: (r) =>
              onRetry(
                `retrying ${r.method} ${r.path} in ${Math.round(r.delayMs)} ms (attempt ${r.attempt}: ${r.reason})`,
              ),
          }
        : {}),
    },
    env,
  );
  // An interrupt before anything is written cuts this connection's reads (interrupts.ts).
  frontEnd().onStop(() => conn.api.http.stop());
  return conn;
}

/** What a live read is scoped by (readLive's arguments), as one comparable string. */
function readScopeKey(projects: Iterable<string>, envs: Iterable<string>, configured: Iterable<string>): string {
  return JSON.stringify([[...projects].sort(), [...envs].sort(), [...configured].sort()]);
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const listOf = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/**
 * A plan's live read, started as soon as the configuration is parsed: the environments it defines
 * are known then, and the read (mostly waiting on the service) runs while the rest of the
 * configuration is checked and built (loadDesiredState's onParsed), instead of after it (the
 * waiting overlaps; the read's own CPU shares the thread with the load). Used only when it cannot differ from the read
 * planFor would make: its scope must equal the loaded configuration's (any doubt, such as an
 * invalid document, and planFor reads again), and no journal may wait for recovery, which comes
 * before any read (DESIGN.md "Keys"). Only for commands that take no run lock (plan, drift): a
 * read made before waiting for the lock could be stale.
 */
export class ReadAhead {
  readonly conn: Connection;
  private readonly fingerprints: boolean;
  private started: { key: string; stream: LiveStream; envsElsewhere: boolean } | undefined;

  constructor(conn: Connection, fingerprints: boolean) {
    this.conn = conn;
    this.fingerprints = fingerprints;
  }

  /**
   * Starts the read for the environments the parsed documents define (narrowed by --env);
   * `envsElsewhere`: only the projects, the environments being read by worker threads (plan-threads.ts).
   */
  start(documents: unknown[], baseDir: string, patterns: readonly string[], envsElsewhere = false): void {
    if (existsSync(defaultJournalPath(baseDir))) return;
    // The same selection as the builder and scopeDesired make: a project with "name", an environment with "url".
    const projects = new Set<string>();
    const configured = new Map<string, string>();
    for (const doc of documents) {
      if (!isRecord(doc)) continue;
      for (const p of listOf(doc.projects)) {
        if (!isRecord(p) || typeof p.slug !== 'string') continue;
        if ('name' in p) projects.add(p.slug);
        for (const e of listOf(p.environments)) {
          if (isRecord(e) && typeof e.type === 'string' && 'url' in e)
            configured.set(projectEnvOf(p.slug, e.type), p.slug);
        }
      }
    }
    let envs = [...configured.keys()];
    let inScope = [...projects];
    if (patterns.length > 0) {
      envs = envs.filter((pe) => matchesAny(pe, patterns));
      const kept = new Set(envs.map((pe) => configured.get(pe)));
      inScope = inScope.filter((slug) => kept.has(slug));
    }
    if (envs.length === 0 && inScope.length === 0) return;
    const leaving = (pe: string) => !configured.has(pe) && (patterns.length === 0 || matchesAny(pe, patterns));
    performance.mark('kms:read-start');
    this.conn.api.pagesAhead = { done: 0, lists: [] };
    const stream = readLiveStream(
      this.conn.api,
      { projects: inScope, envs, alsoRead: leaving },
      { fingerprints: this.fingerprints, envsElsewhere },
    );
    this.started = { key: readScopeKey(inScope, envs, configured.keys()), stream, envsElsewhere };
  }

  /** The configuration did not load: the read is not wanted, and its progress line goes. */
  abandon(): void {
    this.started?.stream.close();
    this.started = undefined;
    this.conn.api.pagesAhead = undefined;
  }

  /** The read started, when its scope is exactly the one planFor would read. */
  take(desired: DesiredState, configured: Iterable<string>): StartedRead | undefined {
    const started = this.started;
    this.started = undefined;
    if (!started) return undefined;
    if (
      started.key !==
      readScopeKey(
        desired.projects.map((p) => p.slug),
        desired.envs.map((e) => e.projectEnv),
        configured,
      )
    ) {
      started.stream.close();
      this.conn.api.pagesAhead = undefined;
      return undefined;
    }
    return { stream: started.stream, envsElsewhere: started.envsElsewhere };
  }
}

/**
 * A ReadAhead on a new connection; none when the connection settings are wrong, which connect()
 * then reports after the configuration's own errors, as without it.
 */
export function readAheadFor(
  o: Pick<GlobalOptions, 'url' | 'parallelism' | 'maxRps'>,
  fingerprints: boolean,
  onRetry?: (line: string) => void,
): ReadAhead | undefined {
  try {
    return new ReadAhead(connect(o, process.env, onRetry), fingerprints);
  } catch {
    return undefined;
  }
}

/** loadConfig with a read ahead; its connection is closed when the configuration does not load. */
export async function loadConfigReadingAhead(
  o: GlobalOptions & { stream?: StreamedAttempt },
  ahead: ReadAhead | undefined,
): Promise<LoadedConfig> {
  try {
    return await loadConfig(o, ahead);
  } catch (e) {
    // The read started ahead is abandoned silently: cut, not retried, no "retrying GET …" lines.
    ahead?.conn.api.http.stop();
    await ahead?.conn.api.close();
    throw e;
  }
}

export function readLive(
  conn: Connection,
  desired: DesiredState,
  fingerprints: boolean,
  leaving?: (pe: string) => boolean,
): Promise<LiveReadResult> {
  return readScope(
    conn,
    {
      projects: desired.projects.map((p) => p.slug),
      envs: desired.envs.map((e) => e.projectEnv),
      ...(leaving ? { alsoRead: leaving } : {}),
    },
    fingerprints,
  );
}

/** A live read started ahead of planFor (ReadAhead). */
export interface StartedRead {
  stream: LiveStream;
  /** Only the head is read (readLiveStream's envsElsewhere): the environments are read by worker threads. */
  envsElsewhere?: boolean;
}

/** The streamed live read of a configuration's scope (planFor). */
function openScope(
  conn: Connection,
  desired: DesiredState,
  fingerprints: boolean,
  leaving?: (pe: string) => boolean,
  envsElsewhere = false,
): LiveStream {
  return readLiveStream(
    conn.api,
    {
      projects: desired.projects.map((p) => p.slug),
      envs: desired.envs.map((e) => e.projectEnv),
      ...(leaving ? { alsoRead: leaving } : {}),
    },
    { fingerprints, envsElsewhere },
  );
}

/** The live read of a scope, with the terminal's progress line and the profile's read phase. */
async function readScope(
  conn: Connection,
  scope: LiveScope,
  fingerprints: boolean,
  signal?: AbortSignal,
): Promise<LiveReadResult> {
  performance.mark('kms:read-start');
  const live = await frontEnd().withProgress(conn.api, () => readLiveState(conn.api, scope, { fingerprints }), signal);
  performance.mark('kms:read-end');
  return live;
}

export interface PlanOptions {
  prune: boolean;
  /** The operator's policy (LoadedConfig.policy): stores are opened under it. */
  policy: OperatorPolicy;
  /** Folder of the configuration: where relative store paths resolve. */
  baseDir: string;
  /** Check that every managed key's secret is in its store (default true). */
  secretCheck?: boolean;
  /** `kms-sync rotate`: address globs of keys to rotate now, and whether to revoke the old ones at once. */
  force?: string[];
  revokeOld?: boolean;
  now?: Date;
  /** The plan will be saved (`--out`): record a fingerprint of every live object read. */
  forSaving?: boolean;
  /** Rotate keys whose secret kms-sync does not hold (default: report only). */
  rotateMissingSecrets?: boolean;
  /** Where recovery notes go (default: stderr). */
  notice?: (line: string) => void;
  /** Claim resources another configuration owns when this one names them. */
  takeOwnership?: boolean;
  /** The caller holds the run lock (apply, rotate): recovery needs no lock of its own. */
  runLocked?: boolean;
  /** The owner id, when the caller resolved it already. */
  owner?: string;
  /** Environments that left the configuration (LoadedConfig.leaving): removed by ownership. */
  leaving?: (projectEnv: string) => boolean;
  /** `.kmsignore` rules: resources they ignore are never deleted (plan/ignore.ts). */
  ignore?: IgnoreRules;
  /** Plan even when the configuration puts nothing in scope (`--allow-empty`). */
  allowEmpty?: boolean;
  /** Refuse a plan that fills a template past its client maximum (default true; drift only reports). */
  checkCapacity?: boolean;
  /** The live read ReadAhead started (LoadedConfig.live): used unless recovery had a journal to read. */
  readAhead?: StartedRead;
  /** `--shard`: the shard this run is (the configuration is already narrowed to it: engine/shard.ts), and which projects' own operations are its. */
  shard?: { index: number; count: number; files: readonly string[]; ownsProject: (slug: string) => boolean };
  /** The caller owns the state folder baseDir is in (the agent): locks its earlier incarnations left are broken (StoreRegistryOptions.incarnation). */
  incarnation?: StateIncarnation;
  /** A git revision (a pull request's base) whose records the security changes are compared with, instead of the checkout's (apply/trust.ts). */
  trustBase?: TrustBase;
  /**
   * The configuration's inventory (plan/inventory.ts): what it holds is ours even with its markers
   * stripped, and the plan returns what it found owned (`inventory`), for the inventory's next state.
   */
  inventory?: InventoryIndex;
  /**
   * The caller writes no inventory (plan): what the plan finds owned is not collected (for a fleet,
   * an entry per client and endpoint kept to the end); `inventory` then only marks what it holds.
   */
  ownedScan?: false;
  /**
   * The clients and endpoints of a configuration loaded environment by environment
   * (LoadedConfig.bodies): each environment's are read as it is planned. NotStreamable when one
   * holds what only the whole load says (the caller loads the whole: streamedOrWhole).
   */
  bodies?: StreamedBodies;
  /** Each part's plan as it is made (apply environment by environment: engine/stream-apply.ts). */
  parts?: PartVisitor;
  /**
   * The recovery a first pass made (planFor's `recovery`): a second pass plans from it instead of
   * recovering again, since the first consumed the journal (its keys flushed, its orphans found)
   * and a plan without them would strand what they name.
   */
  recovered?: Recovery;
}

/** One part of a plan made environment by environment: the projects' own (no projectEnv), then each environment's. */
export interface PlanPartSeen {
  projectEnv?: string;
  /** The part's plan, ignore rules applied (what applying it would do). */
  plan: Plan;
  /** The live state it was made from. */
  live: LiveState;
}

/**
 * Sees each part of a plan as planFor makes it, before the next environment is read. While
 * `retain()` is true the whole plan is kept and returned as without a visitor; once it is false,
 * the parts' operations are let go (kept: warnings, findings, unmanaged resources) and the plan
 * returned has none: the visitor holds what it needs of them.
 */
export interface PartVisitor {
  visit(part: PlanPartSeen): Promise<void>;
  retain(): boolean;
  /** false: no progress line, and nothing after the environments (security changes, store checks): a second pass. */
  tail?: false;
}

/** Refuses a configuration in which two keys would write one secret (one key would be lost). */
export async function checkSecretNames(desired: DesiredState, baseDir: string, policy: OperatorPolicy): Promise<void> {
  performance.mark('kms:names-start');
  const problems = await secretCollisions(
    desired,
    new StoreRegistry({ declarations: desired.stores, baseDir, policy }),
  );
  performance.mark('kms:names-end');
  const invalid = problems.filter((p) => p.kind !== 'collision').map((p) => p.text);
  const collide = problems.filter((p) => p.kind === 'collision').map((p) => `  - ${p.text}`);
  if (invalid.length)
    throw new UsageError(
      `configuration is not valid:\n${[...invalid, ...(collide.length ? ['secret names collide:', ...collide] : [])].join('\n')}`,
    );
  if (collide.length) throw new UsageError(`secret names collide:\n${collide.join('\n')}`);
}

/**
 * Recovery reads and rewrites the journal, which a running apply of the same configuration is
 * writing: it runs under the run lock (held by apply/rotate already; taken here, without waiting,
 * for plan and drift). When another run holds it, recovery is left to that run.
 */
async function recoverUnderLock(
  conn: Connection,
  capture: JournaledKeyCapture,
  registry: StoreRegistry,
  desired: DesiredState,
  o: PlanOptions,
): Promise<Recovery> {
  const envs = new Set(desired.envs.map((e) => e.projectEnv));
  const hasJournal = () =>
    stat(capture.journal.path).then(
      () => true,
      () => false,
    );
  // A pull request's plan (a trust base) acts only on the base revision's journal: one the change
  // wrote would revoke live keys and write values of its own into the stores (the security changes say so).
  if (o.trustBase && (await hasJournal()) && !(await journalIsTheBases(o.baseDir, o.trustBase)))
    return {
      flushed: [],
      orphans: [],
      warnings: [
        `the key journal ${capture.journal.path} is not the base revision's (this change edits it, or the base cannot be read): this plan does not act on it`,
      ],
    };
  if (o.runLocked) return recoverBeforePlan(conn.api, capture, registry, envs);
  if (!(await hasJournal())) return { flushed: [], orphans: [], warnings: [] };
  let lock;
  try {
    lock = await acquireLock(path.join(o.baseDir, '.kms-sync', 'run.lock'), {
      timeoutMs: 0,
      ...(o.incarnation ? { incarnation: o.incarnation } : {}),
    });
  } catch {
    return {
      flushed: [],
      orphans: [],
      warnings: [
        'another kms-sync run of this configuration is active: the keys it journaled are recovered by that run (or the next apply), not by this plan',
      ],
    };
  }
  try {
    return await recoverBeforePlan(conn.api, capture, registry, envs);
  } finally {
    await lock.release();
  }
}

/**
 * A plan's start: the secret names checked, and the stores and key capture that recovery (DESIGN.md
 * "Keys" 0: journaled keys reach their stores, orphans are found) and apply work through.
 */
async function checkedCapture(conn: Connection, desired: DesiredState, o: PlanOptions) {
  await checkSecretNames(desired, o.baseDir, o.policy);
  const notice = o.notice ?? ((line: string) => frontEnd().notice(`${line}\n`));
  const { registry, capture } = keyCaptureFor(desired.stores, o.baseDir, o.policy, {
    notice,
    target: conn.target,
    ...(o.incarnation ? { incarnation: o.incarnation } : {}),
  });
  return { notice, registry, capture };
}

/** What every planning command does first: check names, recover the journal, read the live state. */
async function preparePlan(conn: Connection, desired: DesiredState, o: PlanOptions) {
  const { notice, registry, capture } = await checkedCapture(conn, desired, o);
  const recovery = await recoverUnderLock(conn, capture, registry, desired, o);
  for (const line of describeRecovery(recovery)) notice(line);
  const live = await readLive(conn, desired, Boolean(o.forSaving), o.leaving);
  const owner = o.owner ?? (await resolveOwner(desired, o.baseDir)).owner;
  const target: Plan['target'] = {
    // Shown and saved: without user info, query or fragment (they may carry credentials).
    url: safeUrl(conn.url),
    credential: conn.credential,
    projects: desired.projects.map((p) => p.slug),
    owner,
    envs: [...new Set([...desired.envs.map((e) => e.projectEnv), ...live.state.envs.map((e) => e.projectEnv)])].sort(),
  };
  return { registry, capture, recovery, live, owner, target };
}

/**
 * The plan of a configuration, environment by environment (DESIGN.md "engine/"): the projects
 * first, then each environment read, planned and let go before the next ones are read (the live
 * read streams, live/read.ts readLiveStream), and the environments' plans merged into the plan of
 * the whole (plan/merge.ts), the one planForWhole makes. The live state returned keeps the
 * projects, environments and templates, and of the clients and endpoints only those the plan
 * names or whose keys expire (what drift's usage context and the agent's status need).
 */
export async function planFor(
  conn: Connection,
  desired: DesiredState,
  o: PlanOptions,
): Promise<{
  plan: Plan;
  live: LiveReadResult;
  capture: JournaledKeyCapture;
  registry: StoreRegistry;
  inventory?: InventoryScan;
  /** What the service held of this owner's inventory, per environment read (engine/inventory.ts keepServiceInventory). */
  serviceInventory?: Map<string, ServiceInventory>;
  /** What recovery found before the plan (for a second pass: PlanOptions.recovered). */
  recovery: Recovery;
}> {
  // A shard may hold nothing of a small fleet: its plan is empty, not an error.
  if (desired.envs.length === 0 && desired.projects.length === 0 && !o.allowEmpty && !o.shard) {
    throw new UsageError(
      'nothing in scope: the configuration defines no project or environment, so nothing would be read or changed (an empty or wrong -f?); pass --allow-empty to plan anyway',
    );
  }
  const { notice, registry, capture } = await checkedCapture(conn, desired, o);
  // A read started ahead was started with no journal; one that appeared since (a concurrent run)
  // means recovery may change the live state, so the read comes after it as usual.
  const journaled = await stat(capture.journal.path).then(
    () => true,
    () => false,
  );
  const recovery = o.recovered ?? (await recoverUnderLock(conn, capture, registry, desired, o));
  if (!o.recovered) for (const line of describeRecovery(recovery)) notice(line);
  // Whole environments on worker threads (plan-threads.ts): a large streamed configuration's plan.
  const threads = o.bodies && !o.parts ? planThreadCount(o.bodies.bytes) : 1;
  const envsElsewhere = threads > 1;
  if (o.readAhead && (journaled || Boolean(o.readAhead.envsElsewhere) !== envsElsewhere)) {
    o.readAhead.stream.close();
    conn.api.pagesAhead = undefined;
  }
  const ahead =
    o.readAhead && !journaled && Boolean(o.readAhead.envsElsewhere) === envsElsewhere ? o.readAhead : undefined;
  if (!ahead) performance.mark('kms:read-start');
  const stream = ahead?.stream ?? openScope(conn, desired, Boolean(o.forSaving), o.leaving, envsElsewhere);
  try {
    const owner = o.owner ?? (await resolveOwner(desired, o.baseDir)).owner;
    const streamed = () => planStreamed(conn, desired, o, { stream, owner, registry, capture, recovery, threads });
    const planned = o.parts?.tail === false ? await streamed() : await frontEnd().withProgress(conn.api, streamed);
    return { ...planned, capture, registry, recovery };
  } finally {
    stream.close();
  }
}

async function planStreamed(
  conn: Connection,
  desired: DesiredState,
  o: PlanOptions,
  run: {
    stream: LiveStream;
    owner: string;
    registry: StoreRegistry;
    capture: JournaledKeyCapture;
    recovery: Recovery;
    /** Worker threads that plan the environments (1: this thread). */
    threads: number;
  },
): Promise<{
  plan: Plan;
  live: LiveReadResult;
  inventory?: InventoryScan;
  serviceInventory?: Map<string, ServiceInventory>;
}> {
  const { stream, owner, registry, recovery } = run;
  const head = await stream.head;
  const missing = missingExternalProjects(desired, head);
  if (missing.length) throw new UsageError(missing.join('\n'));
  const now = o.now ?? new Date();
  const target: Plan['target'] = {
    // Shown and saved: without user info, query or fragment (they may carry credentials).
    url: safeUrl(conn.url),
    credential: conn.credential,
    projects: desired.projects.map((p) => p.slug),
    owner,
    envs: [...new Set([...desired.envs.map((e) => e.projectEnv), ...head.envs.map((e) => e.projectEnv)])].sort(),
  };
  const secretCheck = o.secretCheck !== false;
  if (secretCheck) storeContactRefused(registry, undefined, process.env); // a KMS_SYNC_PLAN_STORES typo fails every plan, not only those with keys
  const presence = newPresenceCache(await previousStores(desired, registry, o.baseDir, o.trustBase));
  const refusedWarnings: string[] = [];
  const presenceWarnings: string[] = [];
  const parts: PlanPart[] = [];
  const kept = emptyLiveState();
  kept.projects = head.projects;
  kept.envs = head.envs;
  const duplicates: LiveReadResult['duplicates'][] = [];
  const overCapacity: ReturnType<typeof capacityProblems> = [];
  // Only ever given the entries of parts' scans (ownedEntries here, or its structured clone from a worker thread).
  const owned: InventoryEntry[] = madePlain([]);
  const serviceRead = new Map<string, ServiceInventory>();
  // Apply environment by environment (o.parts): the operations parts no longer keep, for the store checks.
  const writes: ReturnType<typeof opWrites>[] = [];
  let retaining = true;
  /** A part without its operations (o.parts stopped retaining them), its ignore rules' notes kept. */
  const stripped = (part: PlanPart): PlanPart => {
    const shown = o.ignore ? applyIgnoreRules(part.plan, o.ignore) : part.plan;
    writes.push(shown.operations.flatMap(opWrites));
    return {
      plan: { ...shown, operations: [], summary: summarize([], shown.unmanaged) },
      warningOrder: [
        ...part.warningOrder,
        ...shown.warnings
          .slice(part.plan.warnings.length)
          .map((w): WarningOrder => [WARNING_PHASE.ignore, w.slice(0, w.indexOf(':'))]),
      ],
    };
  };

  const settings: PartSettings = {
    prune: o.prune,
    ...(o.takeOwnership ? { takeOwnership: true } : {}),
    ...rotation(o),
    now,
    target,
    checkCapacity: o.checkCapacity !== false,
    secretCheck,
    registry,
    ...(o.inventory ? { inventory: o.inventory } : {}),
    ownedScan: o.ownedScan !== false,
  };
  // The stores are asked here, part after part: they share the presence cache.
  const askPresence: AskPresence = async (queries) =>
    queries.length ? checkSecretPresence(registry, queries, conn.target, presence) : { results: [], warnings: [] };
  /** What the run collects of a part planned (here or on a worker thread). */
  const collect = (planned: PlannedPart) => {
    overCapacity.push(...planned.overCapacity);
    for (const [pe, held] of planned.serviceRead) serviceRead.set(pe, held);
    for (const e of planned.owned) owned.push(e);
    for (const why of planned.refused) if (!refusedWarnings.includes(why)) refusedWarnings.push(why);
    presenceWarnings.push(...planned.presenceWarnings);
  };
  /** A part planned on this thread: collected, seen by o.parts, and kept. */
  const tookPart = async (projectEnv: string | undefined, planned: PlannedPart, l: LiveState) => {
    collect(planned);
    const { part } = planned;
    if (o.parts) {
      await o.parts.visit({
        ...(projectEnv !== undefined ? { projectEnv } : {}),
        plan: o.ignore ? applyIgnoreRules(part.plan, o.ignore) : part.plan,
        live: l,
      });
      if (retaining && !o.parts.retain()) {
        retaining = false;
        parts.splice(0, parts.length, ...parts.map(stripped));
      }
    }
    parts.push(retaining ? part : stripped(part));
  };

  // The environments: the configuration's and those read (environments that left it), in order.
  const byEnv = new Map<
    string,
    { templates: DesiredState['templates']; clients: DesiredState['clients']; endpoints: DesiredState['endpoints'] }
  >();
  const slot = (pe: string) => {
    let x = byEnv.get(pe);
    if (!x) byEnv.set(pe, (x = { templates: [], clients: [], endpoints: [] }));
    return x;
  };
  for (const t of desired.templates) slot(t.projectEnv).templates.push(t);
  for (const c of desired.clients) slot(c.projectEnv).clients.push(c);
  for (const e of desired.endpoints) slot(e.projectEnv).endpoints.push(e);
  const desiredEnvs = new Map(desired.envs.map((e) => [e.projectEnv, e]));
  const envOrder = [...new Set([...desiredEnvs.keys(), ...head.envs.map((e) => e.projectEnv)])].sort(cmp);
  const envPes = new Set(envOrder);

  // The projects: their own operations and warnings (the environments are planned below).
  const projectOnly: DesiredState = {
    ...desired,
    projects: o.shard ? desired.projects.filter((p) => o.shard!.ownsProject(p.slug)) : desired.projects,
    envs: [],
    templates: [],
    clients: [],
    endpoints: [],
  };
  const projectLive: LiveState = { ...emptyLiveState(), projects: head.projects };
  const projectPart = await planPart(
    settings,
    {
      desired: projectOnly,
      live: { state: projectLive, duplicates: [], fingerprints: head.fingerprints },
      orphans: recovery.orphans.filter((x) => !envPes.has(x.projectEnv)),
      keyOf: (w) => /^project\.([^:]+):/.exec(w)?.[1] ?? '',
    },
    askPresence,
  );
  await tookPart(undefined, projectPart, projectLive);

  // A streamed configuration: each environment's clients and endpoints as it comes, their secret
  // names checked as checkSecretNames checks the whole (any problem: the whole is loaded instead).
  const bodies = o.bodies;
  const names = bodies
    ? {
        registry: new StoreRegistry({ declarations: desired.stores, baseDir: o.baseDir, policy: o.policy }),
        seen: noSecretNamesTaken(),
      }
    : undefined;
  if (run.threads > 1 && bodies) {
    await planEnvsOnThreads(conn, o, {
      threads: run.threads,
      bodies,
      head,
      envOrder,
      inDesired: (pe) => desiredEnvs.has(pe),
      orphans: (pe) => recovery.orphans.filter((x) => x.projectEnv === pe),
      target,
      now,
      presence: async (queries) => {
        const checked = await askPresence(queries);
        return { results: [...checked.results], warnings: checked.warnings };
      },
      take: (r, hasLive) => {
        if (hasLive) {
          duplicates.push(r.duplicates ?? []);
          kept.templates.push(...r.kept!.templates);
          kept.clients.push(...r.kept!.clients);
          kept.endpoints.push(...r.kept!.endpoints);
        }
        // The worker marked what it held in its own copy of the inventory.
        for (const [, held] of r.planned!.serviceRead) o.inventory?.hold(serviceHoldings(held));
        collect(r.planned!);
        parts.push(r.planned!.part);
      },
    });
  }
  const reads = stream.envs();
  for (const pe of run.threads > 1 && bodies ? [] : envOrder) {
    const here = byEnv.get(pe);
    const { planned, live } = await planEnvironment(
      settings,
      {
        pe,
        desired,
        envDef: desiredEnvs.get(pe),
        templates: here?.templates ?? [],
        orphans: recovery.orphans.filter((x) => x.projectEnv === pe),
        take: async () =>
          bodies && names
            ? takeEnvBodies(bodies, pe, { desired, ...names })
            : { clients: here?.clients ?? [], endpoints: here?.endpoints ?? [] },
        read: async () => {
          if (!head.envs.some((e) => e.projectEnv === pe)) return undefined;
          const r = await reads.next();
          if (r.done || r.value.env.projectEnv !== pe)
            throw new Error(
              `the live read yielded ${r.done ? 'nothing' : r.value.env.projectEnv} where ${pe} was expected`,
            );
          return r.value;
        },
      },
      askPresence,
    );
    await tookPart(pe, planned, live ? live.state : emptyLiveState());
    if (live) {
      duplicates.push(live.duplicates);
      if (retaining) keepNamed(kept, live.state, planned.part.plan);
      else kept.templates.push(...live.state.templates);
    }
  }
  // The environments out of scope are checked too, as a whole load checks them.
  const envReferences = bodies ? await bodies.finish() : desired.envReferences;
  performance.mark('kms:read-end');
  // A second pass (o.parts.tail false) applied its parts already: the first pass said this.
  if (overCapacity.length && o.parts?.tail !== false)
    throw new UsageError(overCapacity.map(describeCapacity).join('\n'));
  performance.mark('kms:plan-start');
  const { plan: merged, warningOrder } = mergePlans(parts);
  if (o.parts?.tail === false) {
    performance.mark('kms:plan-end');
    return { plan: merged, live: { state: kept, duplicates: [], fingerprints: {}, projectEnvs: head.projectEnvs } };
  }
  const storeWarnings = secretCheck
    ? [
        ...movedSecretWarnings(presence),
        ...(await storeRefusals(run.capture, [...merged.operations.flatMap(opWrites), ...writes.flat()], registry)),
      ]
    : [];
  merged.warnings.push(...recovery.warnings, ...refusedWarnings, ...presenceWarnings, ...storeWarnings);
  warningOrder.push(...recovery.warnings.map((): WarningOrder => [WARNING_PHASE.recovery, '']));
  warningOrder.push(
    ...[...refusedWarnings, ...presenceWarnings, ...storeWarnings].map((): WarningOrder => [WARNING_PHASE.secrets, '']),
  );
  const security = await securityChanges(
    registry,
    { ...desired, ...(envReferences ? { envReferences } : {}) },
    owner,
    o.baseDir,
    conn.target,
    o.trustBase,
  );
  if (security.changes.length) merged.security = security.changes;
  if (security.base) merged.trustBase = security.base;
  if (envReferences?.length) merged.envReferences = envReferences;
  const plan = o.ignore ? applyIgnoreRules(merged, o.ignore) : merged;
  // The ignore rules' notes, one per operation, in operation order.
  for (const w of plan.warnings.slice(warningOrder.length))
    warningOrder.push([WARNING_PHASE.ignore, w.slice(0, w.indexOf(':'))]);
  if (o.shard) plan.shard = { index: o.shard.index, count: o.shard.count, files: [...o.shard.files], warningOrder };
  const mergedDuplicates = duplicates.flat();
  mergedDuplicates.sort(
    (a, b) => Number(b.address.startsWith('template.')) - Number(a.address.startsWith('template.')),
  );
  performance.mark('kms:plan-end');
  return {
    plan,
    live: { state: kept, duplicates: mergedDuplicates, fingerprints: plan.fingerprints, projectEnvs: head.projectEnvs },
    ...(o.inventory
      ? {
          ...(o.ownedScan !== false
            ? {
                inventory: {
                  owned,
                  envsRead: head.envs.map((e) => e.projectEnv),
                  ...(o.shard ? { partial: true } : {}),
                },
              }
            : {}),
          serviceInventory: serviceRead,
        }
      : {}),
  };
}

/**
 * planStreamed's environments on worker threads (plan-threads.ts): each environment's blocks
 * handed over in order, then those out of the plan's scope, checked there as StreamedBodies.finish
 * checks them; `take` gets each planned environment's result in order. The secret names each
 * environment takes are checked against the others' here, as checkSecretNames does: any problem
 * loads the whole (NotStreamable).
 */
async function planEnvsOnThreads(
  conn: Connection,
  o: PlanOptions,
  x: {
    threads: number;
    bodies: StreamedBodies;
    head: LiveHead;
    envOrder: string[];
    inDesired: (pe: string) => boolean;
    orphans: (pe: string) => Recovery['orphans'];
    target: Plan['target'];
    now: Date;
    presence: PlanThreadHooks['presence'];
    take: (r: EnvResult, hasLive: boolean) => void;
  },
): Promise<void> {
  const liveEnvs = new Map(x.head.envs.map((e) => [e.projectEnv, e]));
  const skeleton = x.bodies.portable();
  const planned = new Set(x.envOrder);
  const rest = x.bodies.remaining().filter((pe) => !planned.has(pe));
  const policed = x.bodies.envPoliced;
  function* jobs(): Generator<EnvJob> {
    let i = 0;
    for (const pe of x.envOrder) {
      const env = liveEnvs.get(pe);
      yield {
        i: i++,
        pe,
        parts: x.bodies.handOver(pe),
        inDesired: x.inDesired(pe),
        ...(env ? { live: { env, embedded: x.head.embedded?.[pe] } } : {}),
        orphans: x.orphans(pe),
      };
    }
    for (const pe of rest)
      yield { i: i++, pe, parts: x.bodies.handOver(pe), checkOnly: true, inDesired: false, orphans: [] };
  }
  const taken = new Map<string, Set<string>>();
  const selfNamedIn = new Set<string>();
  performance.mark('kms:threads-start'); // the profile's threadsMs: the environments planned on worker threads
  await planOnThreads(
    x.threads,
    (k) => ({
      skeleton,
      envVars: x.bodies.envVars,
      ...(policed ? { envPolicy: o.policy } : {}),
      policy: o.policy,
      baseDir: o.baseDir,
      http: conn.api.http.shareOf(k, x.threads),
      pages: conn.api.onPageRead !== undefined,
      plan: {
        prune: o.prune,
        ...(o.takeOwnership ? { takeOwnership: true } : {}),
        ...rotation(o),
        now: x.now.toISOString(),
        target: x.target,
        checkCapacity: o.checkCapacity !== false,
        secretCheck: o.secretCheck !== false,
        fingerprints: Boolean(o.forSaving),
        ...(o.inventory ? { inventory: o.inventory.portable() } : {}),
        ownedScan: o.ownedScan !== false,
      },
    }),
    jobs(),
    (job, r) => {
      x.bodies.noteEnvRead(r.envRead);
      for (const [store, names] of r.names.taken) {
        let inStore = taken.get(store);
        if (!inStore) taken.set(store, (inStore = new Set()));
        for (const n of names) {
          if (inStore.has(n)) throw new NotStreamable('a secret name needs checking whole');
          inStore.add(n);
        }
      }
      for (const store of r.names.selfNamedIn) selfNamedIn.add(store);
      if ([...taken.keys()].some((store) => selfNamedIn.has(store)))
        throw new NotStreamable('a secret name needs checking whole');
      if (!job.checkOnly) x.take(r, job.live !== undefined);
    },
    {
      presence: x.presence,
      retried: (info) => conn.api.http.retried(info),
      pageRead: (e) => conn.api.onPageRead?.(e),
    },
    (stop) => frontEnd().onStop(stop),
  );
  performance.mark('kms:threads-end');
}

/** The configuration's plan as one live read of everything in scope, then one diff: planFor's result, with the fleet in memory (tests compare the two). */
export async function planForWhole(
  conn: Connection,
  desired: DesiredState,
  o: PlanOptions,
): Promise<{ plan: Plan; live: LiveReadResult; capture: JournaledKeyCapture; registry: StoreRegistry }> {
  if (desired.envs.length === 0 && desired.projects.length === 0 && !o.allowEmpty) {
    throw new UsageError(
      'nothing in scope: the configuration defines no project or environment, so nothing would be read or changed (an empty or wrong -f?); pass --allow-empty to plan anyway',
    );
  }
  const { registry, capture, recovery, live, owner, target } = await preparePlan(conn, desired, o);
  const missing = missingExternalProjects(desired, live.state);
  if (missing.length) throw new UsageError(missing.join('\n'));
  const presence = newPresenceCache(await previousStores(desired, registry, o.baseDir, o.trustBase));
  performance.mark('kms:plan-start');
  const now = o.now ?? new Date();
  const base = buildPlan({
    desired,
    live,
    prune: o.prune,
    now,
    target,
    ...(o.takeOwnership ? { takeOwnership: true } : {}),
  });
  // Before any write, and before the report: a plan the service would refuse part-way is refused whole.
  const over = o.checkCapacity === false ? [] : capacityProblems(base, live.state);
  if (over.length) throw new UsageError(over.map(describeCapacity).join('\n'));
  let secrets = new Map<string, SecretStatus>();
  const warnings: string[] = [];
  if (o.secretCheck !== false) {
    storeContactRefused(registry, undefined, process.env); // a KMS_SYNC_PLAN_STORES typo fails every plan, not only those with keys
    const queries = secretQueries(desired, live.state, owner, registry, warnings);
    if (queries.length) {
      const checked = await checkSecretPresence(registry, queries, conn.target, presence);
      secrets = checked.results;
      warnings.push(...checked.warnings);
    }
  }
  const plan = assessKeys({
    plan: base,
    desired,
    live: live.state,
    secrets,
    now,
    orphans: recovery.orphans,
    ...rotation(o),
  });
  if (o.secretCheck !== false)
    warnings.push(
      ...movedSecretWarnings(presence),
      ...(await storeRefusals(capture, plan.operations.flatMap(opWrites), registry)),
    );
  plan.warnings.push(...recovery.warnings, ...warnings);
  const security = await securityChanges(registry, desired, owner, o.baseDir, conn.target, o.trustBase);
  if (security.changes.length) plan.security = security.changes;
  if (security.base) plan.trustBase = security.base;
  if (desired.envReferences?.length) plan.envReferences = desired.envReferences;
  performance.mark('kms:plan-end');
  return { plan: o.ignore ? applyIgnoreRules(plan, o.ignore) : plan, live, capture, registry };
}

/** The store files a secret missing from its store is looked for in (apply/trust.ts previousStoreFiles). */
async function previousStores(
  desired: DesiredState,
  registry: StoreRegistry,
  dir: string,
  trustBase: TrustBase | undefined,
): Promise<PresenceCache['previous']> {
  return previousStoreFiles(dir, [registry.uriOf(undefined), ...desired.stores.map((s) => s.uri)], trustBase);
}

/**
 * What apply would refuse before its first write (journaled-capture.ts checkTargets: a store whose
 * secrets hold another service's keys), said by the plan, in text, JSON and Markdown alike.
 */
async function storeRefusals(
  capture: JournaledKeyCapture,
  writes: ReturnType<typeof opWrites>,
  registry: StoreRegistry,
): Promise<string[]> {
  const refused = (store: string | undefined) => storeContactRefused(registry, store, process.env) !== undefined;
  // A store that cannot be opened or listed is reported by the presence check (or by apply).
  const found = await capture.targetConflicts(writes, refused).catch(() => []);
  return found.map((why) => `apply will refuse to issue keys: ${why}`);
}

/** `kms-sync destroy`: everything this configuration owns in its environments (plan/removal.ts). */
export async function destroyPlanFor(
  conn: Connection,
  desired: DesiredState,
  o: PlanOptions,
): Promise<{ plan: Plan; live: LiveState }> {
  const { recovery, live, owner, target } = await preparePlan(conn, desired, o);
  const r = planDestroy(desired, live.state, owner);
  const ops = sortOperations(r.ops);
  const unmanaged = r.unmanaged.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
  const plan: Plan = {
    formatVersion: 1,
    generatedAt: (o.now ?? new Date()).toISOString(),
    target,
    options: { prune: false },
    operations: ops,
    unmanaged,
    keyFindings: [],
    warnings: [...recovery.warnings, ...r.warnings],
    summary: summarize(ops, unmanaged),
    stores: desired.stores.map(({ source: _s, ...x }) => x),
    fingerprints: live.fingerprints,
  };
  return { plan, live: live.state };
}
