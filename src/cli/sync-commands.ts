// validate, init, plan, apply, export: parse flags, call the layers, pick a renderer, set the exit code.
import { existsSync } from 'node:fs';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline/promises';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { JournaledKeyCapture } from '../apply/journaled-capture.js';
import type { ApplyResult } from '../apply/execute.js';
import { applyJournaled } from '../apply/journaled-run.js';
import {
  desiredStateToYaml,
  initConfig,
  SCHEMA_COPY_NAME,
  schemaFilePath,
  schemaReferenceFor,
  starterFor,
  writeSchemaCopy,
  type SchemaReference,
  NotStreamable,
} from '../config/index.js';
import { readLiveState } from '../live/read.js';
import { redactCredentials } from '../model/redact.js';
import { cut, printable } from '../model/printable.js';
import { withReadProgress } from './read-progress.js';
import {
  address,
  deriveOwner,
  emptyDesiredState,
  parseTtl,
  type DesiredState,
  type LiveState,
} from '../model/index.js';
import { closest } from '../config/suggest.js';
import { describeBlocked, hasChanges, summarize, type Plan } from '../plan/types.js';
import { DEFAULT_MAX_DELETES, guardDeletes } from '../plan/deletion-guard.js';
import type { OperatorPolicy } from '../model/index.js';
import {
  newRecipientRefusal,
  settleSecurityChanges,
  trustBaseFromEnvironment,
  type TrustBase,
} from '../apply/trust.js';
import { colorEnabled, renderPlanJson, renderPlanMarkdown, renderPlanText } from '../report/index.js';
import { classifyDrift } from '../plan/drift.js';
import { matchesAny } from '../plan/scope.js';
import { noIgnoreRules } from '../plan/ignore.js';
import { StoreRegistry } from '../secrets/registry.js';
import { atomicWriteFile, ensureDir } from '../secrets/fsutil.js';
import { safeUrl } from '../report/redact.js';
import { shardConfig } from '../engine/shard.js';
import { validateConfig } from '../engine/validate.js';
import { runConfigLocked, withRunLock } from '../engine/locked-run.js';
import {
  connect,
  destroyPlanFor,
  loadConfigReadingAhead,
  planFor,
  policyFor,
  readAheadFor,
  storePolicyDiagnostics,
  streamedOrWhole,
  type Connection,
  type StreamedAttempt,
  type GlobalOptions,
  type PartVisitor,
  type PlanOptions,
  type PolicyInput,
} from '../engine/run.js';
import { commitRequired, guardLocalStoreInCi, guardLocalStoresInCi } from './ci-guard.js';
import { ApplyPass, FleetTally, holdOperationsFrom, type StreamedOutcome } from '../engine/stream-apply.js';
import { ExitWith, UsageError } from './errors.js';
import { EXIT } from './exit-codes.js';
import { enterApply, interruptCause, interruptExitCode, interruptSignal, triggerInterrupt } from './interrupts.js';
import { resolveOwner } from '../engine/owner.js';
import {
  cliInventory,
  cliInventoryFile,
  keepDestroyInventory,
  keepRunInventory,
  savedPlanInventory,
} from '../engine/inventory.js';
import { err, flushOutput, out } from './output.js';
import { liveToDesired, referencePartialProjects } from './export-live.js';
import { addReportOptions, emitPlanReport, reportFormat, loadIgnoreRules, type ReportFlags } from './report-output.js';
import { addCdktfOptions, usesCdktf, writeCdktfExport } from './cdktf-input.js';
import { addLimitOptions } from './config-limits.js';
import { jsonReporter, renderPlanCompact, textReporter, type ApplyReporter } from './apply-output.js';
import { SAVED_PLAN_KIND, savedPlanFromFile, savedPlanToFile, type SavedPlan } from './saved-plan.js';

// InvalidArgumentError: commander names the flag in the message (option '--parallelism <n>' argument …).
const positiveInt = (v: string) => {
  if (!/^[1-9]\d*$/.test(v)) throw new InvalidArgumentError(`expected a positive integer, got ${JSON.stringify(v)}`);
  return Number(v);
};
const collect = (v: string, prev: string[]) => [...prev, v];
const maxDeletesArg = (v: string) => {
  if (!/^\d+$/.test(v)) throw new InvalidArgumentError(`expected a whole number of deletes, got ${JSON.stringify(v)}`);
  return Number(v);
};

/** The operator policy's flags (model/policy.ts): what a configuration may reach. */
export function addPolicyOptions(cmd: Command): Command {
  return cmd
    .option(
      '--policy <file>',
      'operator policy file (YAML/JSON, outside the configuration folder): what the configuration may reach (default: $KMS_SYNC_POLICY)',
    )
    .option(
      '--allow-env <name>',
      'let ${env:NAME} read this variable (repeatable; NAME_* for a prefix; also KMS_SYNC_ENV_ALLOW)',
      collect,
      [],
    );
}

/** Flags shared by every command that reads configuration and/or talks to the service. */
function withCommon(
  cmd: Command,
  opts: { config?: boolean; service?: boolean; readOnly?: boolean } = { config: true, service: true },
): Command {
  if (opts.config !== false)
    addPolicyOptions(
      addLimitOptions(
        addCdktfOptions(
          cmd.option(
            '-f, --file <path>',
            'configuration file or folder (repeatable; default: kms-sync.yaml here or in the nearest parent folder)',
            collect,
            [],
          ),
        ),
      ),
    );
  cmd.option('--env <slug>', 'limit to these environments (repeatable, globs allowed)', collect, []);
  if (opts.service !== false) {
    cmd
      .option('--url <url>', 'service base URL ending in /api/v1 (default: $KMS_API_URL)')
      .option(
        '--parallelism <n>',
        opts.readOnly
          ? 'read requests in flight at once are 4x this (this command only reads)'
          : 'write requests in flight at once (reads use 4x as many)',
        positiveInt,
        8,
      )
      .option('--max-rps <n>', 'client-side rate limit, requests per second', positiveInt);
  }
  return cmd;
}

function retryLogger(): (line: string) => void {
  return (line) => err(`${line}\n`);
}

async function writeSavedPlan(file: string, saved: SavedPlan) {
  // Like Terraform's -out, into a folder that may not exist yet. Folders made here are 0700 and the
  // plan 0600 whatever the umask; it is written to a temp file with a random name opened with
  // O_EXCL (never one another user pre-created in a shared folder), then renamed over the target.
  // No credential kms-sync knows is written into a plan file (model/redact.ts), whatever carried it in.
  await ensureDir(path.dirname(path.resolve(file)));
  await atomicWriteFile(path.resolve(file), redactCredentials(JSON.stringify(savedPlanToFile(saved), null, 1)) + '\n');
}

async function readSavedPlan(file: string): Promise<SavedPlan> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(file, 'utf8'));
  } catch (e) {
    throw new UsageError(`${file}: not a readable saved plan (${(e as Error).message})`);
  }
  return savedPlanFromFile(parsed, file);
}

/** The local store files a plan's keys go to (relative to the configuration folder), and whether each exists now. */
async function localStoreFiles(
  plan: Plan,
  baseDir: string,
  policy: OperatorPolicy,
): Promise<{ file: string; existed: boolean }[]> {
  const registry = new StoreRegistry({ declarations: plan.stores, baseDir, policy });
  const names = new Set<string | undefined>([undefined, ...plan.stores.map((s) => s.name)]);
  const out: { file: string; existed: boolean }[] = [];
  for (const name of names) {
    const store = await registry.get(name).catch(() => undefined);
    const file = (store as { path?: string } | undefined)?.path;
    if (store?.kind !== 'sops-file' || !file) continue;
    out.push({
      file: path.relative(baseDir, file).split(path.sep).join('/'),
      existed: await stat(file).then(
        () => true,
        () => false,
      ),
    });
  }
  return out;
}

/**
 * Where a saved plan's stores and journal live now: its configuration folder resolved against the
 * current working directory (CI plans and applies in different workspace paths), else the
 * absolute folder it was made in. A store file that existed at plan time must exist now: writing
 * keys into a new, empty one would hide them from every later plan.
 */
async function savedPlanBaseDir(planfile: string, saved: SavedPlan): Promise<string> {
  const isDir = (d: string) =>
    stat(d).then(
      (s) => s.isDirectory(),
      () => false,
    );
  const candidates = [...(saved.configDir ? [path.resolve(saved.configDir)] : []), saved.baseDir];
  let baseDir: string | undefined;
  for (const c of candidates)
    if (await isDir(c)) {
      baseDir = c;
      break;
    }
  if (!baseDir) {
    throw new UsageError(
      `${planfile} was made for the configuration folder ${saved.configDir ?? saved.baseDir}, which is not here (${process.cwd()}); run kms-sync apply from the folder where you ran kms-sync plan`,
    );
  }
  for (const s of saved.localStores ?? []) {
    const file = path.resolve(baseDir, s.file);
    if (
      s.existed &&
      !(await stat(file).then(
        () => true,
        () => false,
      ))
    ) {
      throw new UsageError(
        `the secret store ${file} existed when ${planfile} was made and is missing now; applying would create a new, empty store and the keys in the old one would no longer be found. Restore it, or run from the right folder`,
      );
    }
  }
  return baseDir;
}

/** Lists what moved between the live state a saved plan read and the live state now. */
export function staleness(saved: Record<string, string>, now: Record<string, string>): string[] {
  const moved: string[] = [];
  for (const [addr, fp] of Object.entries(saved)) {
    if (!(addr in now)) moved.push(`${addr.split('#')[0]} was deleted`);
    else if (now[addr] !== fp) moved.push(`${addr.split('#')[0]} changed`);
  }
  for (const addr of Object.keys(now)) if (!(addr in saved)) moved.push(`${addr.split('#')[0]} appeared`);
  return moved.sort();
}

/**
 * Asks on the terminal whenever stdin is one, even when stdout is piped (`apply | tee log`) or
 * carries JSON: the question then goes to stderr, which is still the terminal.
 */
async function confirm(
  plan: Plan,
  o: { autoApprove?: boolean; yes?: boolean; json?: boolean },
  what: 'apply' | 'destroy' = 'apply',
): Promise<boolean> {
  if (o.autoApprove || o.yes) return true;
  if (!process.stdin.isTTY) {
    throw new UsageError(
      'refusing to apply without confirmation: stdin is not a terminal to ask on. Review the plan and pass --auto-approve (or --yes) in CI, or apply a saved plan',
    );
  }
  // The plan first: the question is written by readline, past the output queue.
  flushOutput();
  const rl = createInterface({
    input: process.stdin,
    output: process.stdout.isTTY && !o.json ? process.stdout : process.stderr,
  });
  // The terminal is in raw mode while it asks: Ctrl-C reaches readline, not the process.
  rl.on('SIGINT', () => triggerInterrupt({ kind: 'signal', signal: 'SIGINT' }));
  const ask = { signal: interruptSignal };
  try {
    if (plan.target.credential === 'live') {
      const expected = plan.target.envs.join(',');
      const answer = await rl.question(
        `\nThis applies to PRODUCTION credentials (sk_live_). Type the environment slug(s) to confirm (${expected}): `,
        ask,
      );
      // Commas, spaces or both between the slugs (the header lists them as "a, b"); any order.
      const typed = new Set(answer.split(/[\s,]+/).filter(Boolean));
      const missing = plan.target.envs.filter((e) => !typed.has(e));
      const extra = [...typed].filter((t) => !plan.target.envs.includes(t));
      if (missing.length === 0 && extra.length === 0) return true;
      const say = process.stdout.isTTY && !o.json ? out : err;
      say(
        `The answer must name every environment slug of this run (${plan.target.envs.join(', ')})${missing.length ? `; missing: ${missing.join(', ')}` : ''}${extra.length ? `; not in this run: ${extra.map((x) => printable(cut(x, 80))).join(', ')}` : ''}.\n`,
      );
      return false;
    }
    const answer = await rl.question(
      what === 'destroy'
        ? `\nThis deletes everything listed above (owner ${plan.target.owner}). Do you really want to destroy? Only "yes" will be accepted: `
        : '\nDo you want to perform these actions? Only "yes" will be accepted: ',
      ask,
    );
    return answer.trim() === 'yes';
  } finally {
    rl.close();
  }
}

/**
 * A plan whose desired changes another configuration's ownership blocks is never "No changes":
 * after the report, the run stops with exit 1 naming what is blocked and the two ways out.
 */
function stopOnBlocked(plan: Plan): void {
  const why = describeBlocked(plan);
  if (!why) return;
  err(`\nError: ${why}\n`);
  throw new ExitWith(EXIT.error);
}

/** `--trust-base`, else the CI's base revision of a pull or merge request (apply/trust.ts). */
function trustBaseOption(flag: string | undefined): { trustBase?: TrustBase } {
  const base = flag?.trim() ? { ref: flag.trim() } : trustBaseFromEnvironment(process.env);
  return base ? { trustBase: base } : {};
}

/**
 * Refuses a plan that adds a recipient to a store already holding secrets, unless the operator
 * allowed it: that recipient could decrypt every key issued before (DESIGN.md "Trust boundary").
 */
export function refuseNewRecipients(plan: Plan, policy: OperatorPolicy): void {
  const refusal = newRecipientRefusal(plan, policy);
  if (refusal) throw new UsageError(refusal);
}

export async function runApply(
  conn: Connection,
  plan: Plan,
  baseDir: string,
  o: {
    parallelism: number;
    policy: OperatorPolicy;
    allowLocalStoreInCi?: boolean;
    reporter?: ApplyReporter;
    onResult?: (r: ApplyResult) => void;
  },
): Promise<number> {
  const reporter = o.reporter ?? textReporter(() => plan.operations.length);
  const { registry, localInCi, capture, leaveApply } = await openApply(conn, plan, baseDir, { ...o, reporter });
  let result: ApplyResult;
  try {
    result = await applyJournaled({
      api: conn.api,
      plan,
      capture,
      ownerDir: baseDir,
      parallelism: o.parallelism,
      onEvent: (e) => reporter.onEvent(e),
      signal: interruptSignal,
      onWarning: (line) => err(`warning: ${line}\n`),
    });
  } finally {
    leaveApply();
  }
  o.onResult?.(result);
  return finishApply(result, { registry, plan, baseDir, reporter, localInCi });
}

/**
 * What an apply opens before its first write: the recipients' check, the stores, the CI's
 * local-store check (of the keys per store a fleet's first pass counted, or of the plan's), the
 * journal's key capture, and the interrupt hooks.
 */
async function openApply(
  conn: Connection,
  plan: Plan,
  baseDir: string,
  o: {
    policy: OperatorPolicy;
    allowLocalStoreInCi?: boolean;
    reporter: ApplyReporter;
    keysPerStore?: ReadonlyMap<string | undefined, number>;
  },
) {
  refuseNewRecipients(plan, o.policy);
  const registry = new StoreRegistry({
    declarations: plan.stores,
    baseDir,
    policy: o.policy,
    onNotice: (m) => err(`${m}\n`),
  });
  // Before the journal, the store checks and any key-issuing request (ci-guard.ts).
  const guard = { allow: Boolean(o.allowLocalStoreInCi), env: process.env };
  const localInCi = o.keysPerStore
    ? await guardLocalStoresInCi(o.keysPerStore, registry, guard)
    : await guardLocalStoreInCi(plan, registry, guard);
  const capture = new JournaledKeyCapture(registry, undefined, { target: conn.target });
  // From here an interrupt (Ctrl-C, SIGTERM, a closed output) lets the requests in flight finish
  // and journal their keys, and starts no new one (interrupts.ts); a second one exits at once,
  // after the journal writes under way. Requests cut off in flight are found by the next run (intents).
  const leaveApply = enterApply({
    inFlight: () => o.reporter.inFlight(),
    drain: () => capture.drain(3000),
    cutShort: () => o.reporter.cutShort(),
  });
  return { registry, localInCi, capture, leaveApply };
}

/** The end of an apply: its security changes settled when complete, its summary, its exit code. */
async function finishApply(
  result: ApplyResult,
  a: {
    registry: StoreRegistry;
    plan: Plan;
    baseDir: string;
    reporter: ApplyReporter;
    localInCi: Awaited<ReturnType<typeof guardLocalStoreInCi>>;
  },
): Promise<number> {
  const { registry, plan, baseDir, reporter, localInCi } = a;
  // In CI, the last lines name the local store files (and journal) this runner holds the new keys in.
  const commit = commitRequired(localInCi, result, registry.journalPath(), process.env);
  if (result.failed.length === 0 && !result.stopReason) {
    await settleSecurityChanges(registry, plan, baseDir);
    reporter.finish(result, 'complete', EXIT.ok, commit);
    return EXIT.ok;
  }
  // Exit 3 whenever the service may have changed: something done or recovered, or a write whose
  // outcome is unknown. Interrupted before any write: the interrupt's own code (130 for Ctrl-C).
  const wrote = result.done.length > 0 || result.recoveries.length > 0 || result.failed.some((f) => f.unknown);
  const code = wrote ? EXIT.partial : result.interrupted && interruptCause() ? interruptExitCode() : EXIT.error;
  // Nothing written and not interrupted: refused (a store check, a failed first write), not part-way.
  reporter.finish(result, result.interrupted ? 'interrupted' : wrote ? 'partial' : 'refused', code, commit);
  return code;
}

/**
 * runApply for a fleet whose plan is too large to hold whole (engine/stream-apply.ts): `plan` is
 * the first pass's (its totals, warnings and security changes, no operations); `planAgain` makes
 * the second pass, which applies each environment's part through the journal as it is planned.
 */
export async function runApplyStreamed(
  conn: Connection,
  plan: Plan,
  baseDir: string,
  o: {
    parallelism: number;
    policy: OperatorPolicy;
    allowLocalStoreInCi?: boolean;
    reporter: ApplyReporter;
    tally: FleetTally;
    holdRemovals: boolean;
    planAgain: (visitor: PartVisitor) => Promise<unknown>;
    onOutcome?: (o: StreamedOutcome) => void;
  },
): Promise<number> {
  const { reporter } = o;
  const { registry, localInCi, capture, leaveApply } = await openApply(conn, plan, baseDir, {
    ...o,
    keysPerStore: o.tally.keysPerStore,
  });
  const pass = new ApplyPass(o.tally, {
    holdRemovals: o.holdRemovals,
    applyStep: (part) =>
      applyJournaled({
        api: conn.api,
        plan: part,
        capture,
        ownerDir: baseDir,
        parallelism: o.parallelism,
        onEvent: (e) => reporter.onEvent(e),
        signal: interruptSignal,
        onWarning: (line) => err(`warning: ${line}\n`),
      }),
  });
  let outcome: StreamedOutcome;
  try {
    outcome = await pass.run(
      () => o.planAgain(pass),
      () => interruptSignal.aborted,
    );
  } finally {
    leaveApply();
  }
  const result = outcome.result;
  if (outcome.notReached > 0)
    result.stopReason = `${result.stopReason ?? 'the run stopped'}; ${outcome.notReached} part(s) of the plan after it were not applied (the next apply plans them again)`;
  o.onOutcome?.(outcome);
  return finishApply(result, { registry, plan, baseDir, reporter, localInCi });
}

/**
 * `--key` takes key addresses (`key.ENV/CLIENT/KEY`, globs allowed): one without its kind prefix,
 * or the address of another kind, is refused with the address meant.
 */
export function checkKeyAddress(k: string): void {
  if (k.startsWith('key.')) return;
  const kind = /^(project|env|template|client|endpoint)\.(.*)$/.exec(k);
  if (kind?.[1] === 'client') {
    throw new UsageError(
      `--key ${k}: that is a client's address; --key takes key addresses. Did you mean --key "key.${kind[2]}/*" (every key of that client)?`,
    );
  }
  if (kind)
    throw new UsageError(
      `--key ${k}: that is the address of a${kind[1] === 'env' || kind[1] === 'endpoint' ? 'n' : ''} ${kind[1]}; --key takes key addresses such as key.ENV/CLIENT/KEY`,
    );
  if (k.split('/').length === 3)
    throw new UsageError(
      `--key ${k}: key addresses start with "key.": did you mean --key ${k.includes('*') || k.includes('?') ? `"key.${k}"` : `key.${k}`}?`,
    );
  throw new UsageError(
    `--key ${k}: expected a key address such as key.ENV/CLIENT/KEY (globs allowed: "key.ENV/*/primary")`,
  );
}

/** `--lock-timeout`: a duration like 30s or 5m (0s: fail at once when another run holds the lock). */
function lockTimeoutMs(v: string | undefined): number {
  if (v === undefined || /^0+[smhdw]?$/.test(v.trim())) return 0;
  try {
    return parseTtl(v);
  } catch {
    throw new UsageError(`--lock-timeout: expected a duration such as 30s or 5m, got ${JSON.stringify(v)}`);
  }
}

/** The run lock's flags (--lock-timeout, --no-lock) for engine/locked-run.ts, with this terminal's interrupt and retry lines. */
function lockOf(o: LockFlags) {
  return {
    timeoutMs: lockTimeoutMs(o.lockTimeout),
    ...(o.lock === false ? { lock: false } : {}),
    signal: interruptSignal,
    onRetry: retryLogger(),
  };
}

interface LockFlags {
  lockTimeout?: string;
  lock?: boolean;
}

/** `--shard K/N` (engine/shard.ts): plan, apply, rotate and drift. */
export const addShardOption = (cmd: Command) =>
  cmd.option(
    '--shard <K/N>',
    "run only the K-th of N shards of the environments (a stable hash; a project the configuration defines stays whole with its environments); N alone takes K from JOB_COMPLETION_INDEX (Kubernetes Indexed Jobs). Join the shards' plans with kms-sync report merge",
  );

const addLockOptions = (cmd: Command) =>
  cmd
    .option(
      '--lock-timeout <duration>',
      'wait this long for another run of this configuration to finish (default 0s: fail at once)',
    )
    .option('--no-lock', 'do not take the run lock (only when nothing else can run this configuration)');

/** A configuration printed on stdout whose $schema copy is not there yet: say how to make it. */
function schemaCopyHint(reference: SchemaReference) {
  if (reference.copyTo && !existsSync(reference.copyTo)) {
    err(
      `Its $schema line points at ./${SCHEMA_COPY_NAME}: write it with kms-sync schema > ${SCHEMA_COPY_NAME} (or npm install kms-sync in this project).\n`,
    );
  }
}

/** The options of `kms-sync plan`. */
type PlanCommandOptions = GlobalOptions &
  ReportFlags & {
    compact?: boolean;
    prune?: boolean;
    json?: boolean;
    out?: string;
    detailedExitcode?: boolean;
    secretCheck: boolean;
    rotateMissingSecrets?: boolean;
    takeOwnership?: boolean;
    ignoreFile?: string;
    allowEmpty?: boolean;
    maxDeletes: number;
    shard?: string;
    trustBase?: string;
  };

/** `kms-sync plan`, its configuration loaded environment by environment when `stream` is given. */
async function planCommand(o: PlanCommandOptions, stream: StreamedAttempt | undefined): Promise<void> {
  // A shard's scope needs the project list first: no read ahead of the whole configuration.
  const ahead = o.shard === undefined ? readAheadFor(o, Boolean(o.out), retryLogger()) : undefined;
  const loaded = await loadConfigReadingAhead(stream ? { ...o, stream } : o, ahead);
  const conn = ahead?.conn ?? connect(o, process.env, retryLogger());
  try {
    const { cfg, shard } = shardConfig(loaded, o.shard, o.file);
    const { owner } = await resolveOwner(cfg.desired, cfg.baseDir);
    const { index } = await cliInventory(cfg.baseDir, owner, conn.sealKey, (line) => {
      if (!stream?.whole) err(`warning: ${line}\n`);
    });
    const { plan, live } = await planFor(conn, cfg.desired, {
      ...(cfg.live ? { readAhead: cfg.live } : {}),
      ...(loaded.bodies ? { bodies: loaded.bodies } : {}),
      ...(shard ? { shard } : {}),
      policy: cfg.policy,
      prune: Boolean(o.prune),
      baseDir: cfg.baseDir,
      secretCheck: o.secretCheck,
      forSaving: Boolean(o.out),
      rotateMissingSecrets: Boolean(o.rotateMissingSecrets),
      takeOwnership: Boolean(o.takeOwnership),
      leaving: cfg.leaving,
      ignore: await loadIgnoreRules(o.ignoreFile, cfg.baseDir),
      allowEmpty: Boolean(o.allowEmpty),
      ...trustBaseOption(o.trustBase),
      owner,
      inventory: index,
      ownedScan: false,
    });
    const guarded = guardDeletes(plan, { pruneRemoved: true, maxDeletes: o.maxDeletes, live: live.state });
    if (guarded.held.length)
      plan.warnings.push(
        `apply will hold the ${guarded.held.length} deletes of this plan (${guarded.heldReason}): run it with --max-deletes ${guarded.held.length} to approve them`,
      );
    await emitPlanReport(plan, { ...o, baseDir: cfg.baseDir });
    if (o.out) {
      await writeSavedPlan(o.out, {
        kind: SAVED_PLAN_KIND,
        baseDir: cfg.baseDir,
        configDir: path.relative(process.cwd(), cfg.baseDir).split(path.sep).join('/') || '.',
        localStores: await localStoreFiles(plan, cfg.baseDir, cfg.policy),
        ...(cfg.desired.settings ? { settings: cfg.desired.settings } : {}),
        files: cfg.files,
        plan,
      });
      if (!o.json && (o.format ?? 'text') === 'text')
        out(`\nSaved the plan to ${o.out}. Apply exactly this plan with: kms-sync apply ${o.out}\n`);
    }
    stopOnBlocked(plan);
    if (o.detailedExitcode && hasChanges(plan)) throw new ExitWith(EXIT.changes);
  } catch (e) {
    // Loaded whole next (streamedOrWhole): the reads of this attempt are cut, not retried, and say nothing.
    if (e instanceof NotStreamable) conn.api.http.stop();
    throw e;
  } finally {
    await conn.api.close();
  }
}

export function registerSyncCommands(program: Command) {
  addLimitOptions(
    addCdktfOptions(
      program
        .command('validate')
        .description(
          'check configuration files offline (no credentials, no network): syntax, schema, references, duplicates',
        )
        .option(
          '-f, --file <path>',
          'configuration file or folder (repeatable; default: kms-sync.yaml here or in the nearest parent folder)',
          collect,
          [],
        ),
    ),
  )
    .option('--env <slug>', 'limit to these environments (repeatable, globs allowed)', collect, [])
    .option(
      '--policy <file>',
      'operator policy file (YAML/JSON, outside the configuration folder): what the configuration may reach (default: $KMS_SYNC_POLICY)',
    )
    .option(
      '--allow-env <name>',
      'let ${env:NAME} read this variable (repeatable; NAME_* for a prefix; also KMS_SYNC_ENV_ALLOW)',
      collect,
      [],
    )
    .action(
      async (
        o: Pick<GlobalOptions, 'file' | 'env' | 'cdktf' | 'cdktfOut' | 'stack' | 'maxFileSize' | 'maxConfigSize'> &
          PolicyInput,
      ) => {
        // Environment by environment, as plan; KMS_SYNC_CONFIG_WHOLE=1: loaded whole, as before.
        const n = await validateConfig(o, process.env.KMS_SYNC_CONFIG_WHOLE === '1');
        out(
          `Configuration valid: ${n.files} file(s), ${n.projects} project(s), ${n.envs} environment(s), ` +
            `${n.templates} template(s), ${n.clients} client(s), ${n.keys} key(s), ${n.endpoints} endpoint(s).\n`,
        );
      },
    );

  program
    .command('init')
    .description('write a starter configuration that references the JSON Schema (editor completion)')
    .argument('[file]', 'file to create, or - to print it on stdout', 'kms-sync.yaml')
    .addHelpText(
      'after',
      `
The $schema line points at kms-sync in the project's node_modules when it is installed there,
else at a copy of the schema written beside the file (${SCHEMA_COPY_NAME}): both work on every
machine that checks the project out. kms-sync schema prints the schema.`,
    )
    .action(async (file: string) => {
      if (file === '-') {
        // The same text the file form would write in this folder, $schema line included.
        const { reference, content } = starterFor('kms-sync.yaml', { owner: await deriveOwner(process.cwd()) });
        out(content);
        schemaCopyHint(reference);
        return;
      }
      const r = await initConfig(file);
      if (r.schemaCopy && r.schemaCopy.outcome !== 'unchanged') {
        out(
          `${r.schemaCopy.outcome === 'written' ? 'Wrote' : 'Updated'} ${path.relative(process.cwd(), r.schemaCopy.file) || r.schemaCopy.file} (the JSON Schema its $schema line points at; commit it with the configuration).\n`,
        );
      }
      if (r.gitignore.outcome !== 'unchanged')
        out(
          `${r.gitignore.outcome === 'written' ? 'Wrote' : 'Added core dumps to'} ${path.relative(process.cwd(), r.gitignore.file) || r.gitignore.file} (a core dump of a killed run can hold raw keys).\n`,
        );
      out(`Wrote ${path.relative(process.cwd(), r.file) || r.file}. Edit it, then run: kms-sync validate -f ${file}\n`);
    });

  program
    .command('schema')
    .description('print the JSON Schema of the configuration format (for editors and linters)')
    .action(async () => {
      out(await readFile(schemaFilePath(), 'utf8'));
    });

  addShardOption(
    addReportOptions(
      withCommon(program.command('plan').description('show what apply would change in the live service')),
    ),
  )
    .option('--prune', 'also delete unmanaged resources in scope (never protected ones)')
    .option('--json', 'print the plan as JSON (schemas/kms-sync-plan.schema.json)')
    .option('--out <file>', 'save the plan, to apply exactly with kms-sync apply FILE')
    .option('--compact', 'counts per action, kind and environment instead of every resource (plans of thousands)')
    .option('--detailed-exitcode', 'exit 2 when there are changes, 0 when none')
    .option('--no-secret-check', 'do not check that every managed key has its secret in its store')
    .option('--rotate-missing-secrets', 'rotate keys whose secret kms-sync does not hold (default: report them only)')
    .option('--take-ownership', 'manage resources this configuration names that another configuration owns')
    .option(
      '--ignore-file <file>',
      'ignore rules: resources they name are never deleted (default: .kmsignore beside the configuration, if present)',
    )
    .option('--allow-empty', 'plan even when the configuration puts no environment in scope')
    .option(
      '--max-deletes <n>',
      'the deletion guard apply will use: the plan warns when apply would hold its deletes',
      maxDeletesArg,
      DEFAULT_MAX_DELETES,
    )
    .option(
      '--trust-base <ref>',
      "compare the security changes with the records (.kms-sync/trust.json, owner) of this git revision, not the checkout's, which a pull request can edit (default in CI: the pull/merge request's base branch; also KMS_SYNC_TRUST_BASE)",
    )
    .action(async (o: PlanCommandOptions) => {
      reportFormat(o);
      // Environment by environment (a shard reads only its environments' clients; its scope comes
      // from the skeleton): loaded whole again when a problem or warning has to be said as a whole
      // load says it. KMS_SYNC_CONFIG_WHOLE=1: loaded whole, as before (a way out, and for comparisons).
      const byEnv = process.env.KMS_SYNC_CONFIG_WHOLE !== '1';
      await streamedOrWhole((stream) => planCommand(o, byEnv ? stream : undefined));
    });

  addShardOption(
    addLockOptions(
      withCommon(
        program.command('apply').description('plan, confirm, then make the live service match the configuration'),
      ),
    ),
  )
    .argument('[planfile]', 'a plan saved with kms-sync plan --out; applied exactly, refused when the live state moved')
    .option('--prune', 'also delete unmanaged resources in scope (never protected ones)')
    .option('--compact', 'counts per action, kind and environment instead of every resource (plans of thousands)')
    .option('--auto-approve', 'skip the confirmation (CI)')
    .option('-y, --yes', 'same as --auto-approve')
    .option(
      '--allow-local-store',
      'in CI, allow issuing keys into a local store file (commit and push it after the run; also KMS_SYNC_ALLOW_LOCAL_STORE=1 or settings.allowLocalStoreInCi)',
    )
    .option(
      '--json',
      'machine-readable output: a JSON-lines event stream on stdout (schemas/kms-sync-apply-events.schema.json); human text goes to stderr',
    )
    .option('--no-secret-check', 'do not check that every managed key has its secret in its store')
    .option('--rotate-missing-secrets', 'rotate keys whose secret kms-sync does not hold (default: report them only)')
    .option('--take-ownership', 'manage resources this configuration names that another configuration owns')
    .option(
      '--ignore-file <file>',
      'ignore rules: resources they name are never deleted (default: .kmsignore beside the configuration, if present)',
    )
    .option('--allow-empty', 'apply even when the configuration puts no environment in scope')
    .option(
      '--max-deletes <n>',
      'deletion guard: a plan that would delete or revoke more than this (or any key of a protected client) is applied without its deletes, which are held (exit 1) until run again with a higher --max-deletes',
      maxDeletesArg,
      DEFAULT_MAX_DELETES,
    )
    .option(
      '--allow-new-recipients',
      'add age recipients to secret stores that already hold keys (they can decrypt those keys; also KMS_SYNC_ALLOW_NEW_RECIPIENTS=1)',
    )
    .action(
      async (
        planfile: string | undefined,
        o: GlobalOptions &
          LockFlags & {
            compact?: boolean;
            prune?: boolean;
            autoApprove?: boolean;
            yes?: boolean;
            json?: boolean;
            secretCheck: boolean;
            allowLocalStore?: boolean;
            rotateMissingSecrets?: boolean;
            takeOwnership?: boolean;
            ignoreFile?: string;
            allowEmpty?: boolean;
            maxDeletes: number;
            shard?: string;
          },
      ) => {
        if (o.json && o.compact)
          throw new UsageError('--json and --compact ask for two different outputs: use one of them');
        const reporter: ApplyReporter = o.json
          ? jsonReporter('apply')
          : textReporter(() => 0, { compact: Boolean(o.compact) });
        const applyIt = async (
          conn: Connection,
          full: Plan,
          baseDir: string,
          saved: boolean,
          settings: DesiredState['settings'],
          policy: OperatorPolicy,
          live?: LiveState,
          onResult?: (r: ApplyResult) => void,
          streamed?: {
            tally: FleetTally;
            planAgain: (visitor: PartVisitor) => Promise<unknown>;
            onOutcome: (o: StreamedOutcome) => void;
          },
        ) => {
          if (reporter.json && describeBlocked(full)) reporter.finish(undefined, 'blocked', EXIT.error);
          stopOnBlocked(full);
          // The deletion guard (plan/deletion-guard.ts): removal deletes, as Terraform, but not more than
          // --max-deletes at once; over the whole fleet when it is applied environment by environment.
          let plan: Plan;
          let held: string[];
          let heldReason: string | undefined;
          if (streamed) {
            heldReason = streamed.tally.heldReason({ maxDeletes: o.maxDeletes });
            held = heldReason ? streamed.tally.removals : [];
            plan = { ...full, summary: { ...full.summary, delete: full.summary.delete - held.length } };
          } else {
            const guarded = guardDeletes(full, {
              pruneRemoved: true,
              maxDeletes: o.maxDeletes,
              ...(live ? { live } : {}),
            });
            plan = guarded.plan;
            held = guarded.held.map((op) => op.address);
            heldReason = guarded.heldReason;
          }
          const operationCount = streamed ? streamed.tally.operations - held.length : plan.operations.length;
          if (held.length) {
            // Held deletes and nothing else: the run applies nothing, and says so (not "the rest").
            const rest =
              operationCount === 0 && !hasChanges(plan)
                ? 'Nothing else is planned: nothing is applied.'
                : 'The rest of the plan is applied.';
            reporter.say(
              `\nDeletes held: ${heldReason}. These ${held.length} are not applied:\n${held
                .slice(0, 20)
                .map((a) => `  - ${a}`)
                .join(
                  '\n',
                )}${held.length > 20 ? '\n  - …' : ''}\n${rest} To approve the deletes, run again with --max-deletes ${held.length}.\n`,
            );
          }
          const heldExit = () => {
            if (held.length) throw new ExitWith(EXIT.error);
          };
          if (operationCount === 0 && !hasChanges(plan)) {
            heldExit();
            if (saved) reporter.say('Nothing to do.\n');
            if (reporter.json) reporter.finish(undefined, 'nothing_to_do', EXIT.ok);
            return;
          }
          refuseNewRecipients(plan, policy);
          if (!saved && !(await confirm(plan, o))) {
            reporter.say('Apply cancelled.\n');
            if (reporter.json) reporter.finish(undefined, 'cancelled', EXIT.error);
            throw new ExitWith(EXIT.error);
          }
          if (operationCount === 0) {
            // Only security changes (a store, a recipient, an ${env:} read): recorded, recipients added.
            await settleSecurityChanges(
              new StoreRegistry({ declarations: plan.stores, baseDir, policy, onNotice: (m) => err(`${m}\n`) }),
              plan,
              baseDir,
            );
            reporter.say(`Recorded ${plan.security?.length ?? 0} security change(s); no resource changed.\n`);
            heldExit();
            if (reporter.json) reporter.finish(undefined, 'nothing_to_do', EXIT.ok);
            return;
          }
          const progress = o.json ? reporter : textReporter(() => operationCount, { compact: Boolean(o.compact) });
          const allowLocalStoreInCi = Boolean(o.allowLocalStore || settings?.allowLocalStoreInCi);
          const code = streamed
            ? await runApplyStreamed(conn, plan, baseDir, {
                parallelism: o.parallelism,
                policy,
                allowLocalStoreInCi,
                reporter: progress,
                tally: streamed.tally,
                holdRemovals: held.length > 0,
                planAgain: streamed.planAgain,
                onOutcome: streamed.onOutcome,
              })
            : await runApply(conn, plan, baseDir, {
                parallelism: o.parallelism,
                policy,
                ...(onResult ? { onResult } : {}),
                allowLocalStoreInCi,
                reporter: progress,
              });
          if (code !== EXIT.ok) throw new ExitWith(code);
          heldExit();
        };
        if (planfile) {
          // A saved plan is applied exactly: flags that would shape a new plan have no effect, so they are refused.
          const shaping = [
            o.file.length ? '-f/--file' : '',
            o.env.length ? '--env' : '',
            o.prune ? '--prune' : '',
            o.takeOwnership ? '--take-ownership' : '',
            o.rotateMissingSecrets ? '--rotate-missing-secrets' : '',
            o.ignoreFile ? '--ignore-file' : '',
            o.secretCheck === false ? '--no-secret-check' : '',
            usesCdktf(o) || o.stack?.length ? '--cdktf/--cdktf-out/--stack' : '',
            o.allowEmpty ? '--allow-empty' : '',
            o.shard !== undefined ? '--shard' : '',
          ].filter(Boolean);
          if (shaping.length) {
            throw new UsageError(
              `${shaping.join(', ')} cannot be used with a saved plan (${planfile}): it is applied exactly as planned. Pass them to kms-sync plan --out instead, or drop the plan file to plan afresh`,
            );
          }
          const saved = await readSavedPlan(planfile);
          // The policy of this apply (flags, environment, policy file), never anything the plan file says.
          const policy = policyFor(o, saved.configDir ? path.resolve(saved.configDir) : saved.baseDir);
          const refusedStores = storePolicyDiagnostics(
            saved.plan.stores,
            policy,
            saved.configDir ? path.resolve(saved.configDir) : saved.baseDir,
          );
          if (refusedStores.length)
            throw new UsageError(`${planfile}: the operator policy refuses its stores:\n${refusedStores.join('\n')}`);
          // The service comes from KMS_API_URL / --url, never from the file: an edited plan must not
          // choose where the project key goes. A plan made for another service is refused.
          if (!(o.url ?? process.env.KMS_API_URL)) {
            throw new UsageError(
              `no service URL: set KMS_API_URL or pass --url to the service ${planfile} was made for (${safeUrl(saved.plan.target.url)}); the URL in a saved plan is only checked, never used`,
            );
          }
          const conn = connect(o, process.env, retryLogger());
          try {
            if (safeUrl(conn.url) !== safeUrl(saved.plan.target.url)) {
              throw new UsageError(
                `${planfile} was made for ${safeUrl(saved.plan.target.url)}, but KMS_API_URL / --url names ${safeUrl(conn.url)}; nothing was sent. Apply it against the service it was planned for, or plan again`,
              );
            }
            const baseDir = await savedPlanBaseDir(planfile, saved);
            const owner = saved.plan.target.owner ?? (await resolveOwner(emptyDesiredState(), baseDir)).owner;
            await withRunLock(conn, { owner, envs: saved.plan.target.envs, baseDir, ...lockOf(o) }, async () => {
              // Checked under the lock: nothing can move between this read and the writes.
              const live = await withReadProgress(conn.api, () =>
                readLiveState(conn.api, { projects: saved.plan.target.projects, envs: saved.plan.target.envs }),
              );
              const moved = staleness(saved.plan.fingerprints, live.fingerprints);
              if (moved.length) {
                throw new UsageError(
                  `${planfile} is stale: the live state changed since it was planned (${moved.length} difference(s)):\n` +
                    moved
                      .slice(0, 20)
                      .map((m) => `  - ${m}`)
                      .join('\n') +
                    (moved.length > 20 ? '\n  - …' : '') +
                    '\nRun kms-sync plan again.',
                );
              }
              reporter.plan(
                saved.plan,
                `\nApplying the saved plan ${planfile} (${saved.plan.operations.length} operation(s)).\n`,
              );
              const inventory = await savedPlanInventory(conn, baseDir, owner, live.state, (line) =>
                err(`warning: ${line}\n`),
              );
              let result: ApplyResult | undefined;
              try {
                await applyIt(conn, saved.plan, baseDir, true, saved.settings, policy, live.state, (r) => {
                  result = r;
                });
              } finally {
                // The inventory (engine/inventory.ts), as after any apply; its digests stay as they were.
                for (const line of await keepRunInventory(conn, {
                  owner,
                  ...inventory,
                  ...(result ? { result } : {}),
                  plan: saved.plan,
                  desired: undefined,
                }))
                  err(`warning: ${line}\n`);
              }
            });
          } finally {
            await conn.api.close();
          }
          return;
        }
        await runConfigLocked(o, lockOf(o), async ({ conn, cfg, shard, owner }) => {
          const inventory = await cliInventory(cfg.baseDir, owner, conn.sealKey, (line) => err(`warning: ${line}\n`));
          const planOptions: PlanOptions = {
            ...(shard ? { shard } : {}),
            policy: cfg.policy,
            prune: Boolean(o.prune),
            baseDir: cfg.baseDir,
            secretCheck: o.secretCheck,
            rotateMissingSecrets: Boolean(o.rotateMissingSecrets),
            takeOwnership: Boolean(o.takeOwnership),
            runLocked: true,
            owner,
            leaving: cfg.leaving,
            ignore: await loadIgnoreRules(o.ignoreFile, cfg.baseDir),
            allowEmpty: Boolean(o.allowEmpty),
            inventory: inventory.index,
            // Both passes of a large fleet plan for the same moment (keys' expiry, rotations due).
            now: new Date(),
          };
          // A plan of more than KMS_SYNC_APPLY_HOLD_OPERATIONS operations is not held whole: it is
          // listed as it is made, confirmed from its totals, and applied environment by environment
          // (engine/stream-apply.ts); below that, the plan is held and applied as one.
          const tally = new FleetTally({
            hold: holdOperationsFrom(process.env),
            pruneRemoved: true,
            onStreaming: (parts) => {
              if (!o.json && !o.compact)
                reporter.say(
                  '\nkms-sync will perform the following actions (listed environment by environment: the plan is applied that way):\n\n',
                );
              for (const part of parts) reporter.planned(part.plan.operations);
            },
            onPart: (part) => reporter.planned(part.plan.operations),
          });
          const {
            plan,
            live,
            inventory: scan,
            serviceInventory,
            recovery,
          } = await planFor(conn, cfg.desired, { ...planOptions, parts: tally });
          let result: ApplyResult | undefined;
          let complete = false;
          // The second pass began: from then on parts may be applied, and the first pass's scan is not the live state.
          let applying = false;
          if (tally.streaming) {
            const whole = { ...plan, summary: { ...tally.summary, unmanaged: plan.summary.unmanaged } };
            if (o.json) reporter.plan(whole);
            else reporter.say(renderPlanCompact(whole, tally.table));
            try {
              await applyIt(conn, whole, cfg.baseDir, false, cfg.desired.settings, cfg.policy, undefined, undefined, {
                tally,
                // The second pass plans from the first's recovery: that one consumed the journal.
                planAgain: (visitor) => {
                  applying = true;
                  return planFor(conn, cfg.desired, { ...planOptions, parts: visitor, recovered: recovery });
                },
                onOutcome: (x) => {
                  result = x.result;
                  complete = x.result.failed.length === 0 && !x.result.stopReason;
                },
              });
            } finally {
              // The inventory (engine/inventory.ts) after a complete run, or one that applied
              // nothing (held deletes only, cancelled: the first pass read every environment, as
              // a whole apply's read does). A run stopped part-way has not read or planned every
              // environment again, and leaves the one before it (ownership markers still say
              // what is ours; the next apply records it).
              if (scan && (complete || !applying))
                for (const line of await keepRunInventory(conn, {
                  owner,
                  scan,
                  serviceRead: serviceInventory,
                  ...(result ? { result } : {}),
                  plan: { ...plan, operations: [] },
                  desired: cfg.desired,
                  file: inventory.file,
                  known: inventory.known,
                }))
                  err(`warning: ${line}\n`);
              else if (scan)
                err(
                  `warning: the inventory ${inventory.file} was left as it was (the run stopped part-way); the next complete apply writes it\n`,
                );
            }
            return;
          }
          reporter.plan(plan);
          try {
            await applyIt(conn, plan, cfg.baseDir, false, cfg.desired.settings, cfg.policy, live.state, (r) => {
              result = r;
            });
          } finally {
            // The inventory (engine/inventory.ts), under the run lock: in the service, per
            // environment, and sealed beside the journal; a shard keeps its environments' part.
            if (scan)
              for (const line of await keepRunInventory(conn, {
                owner,
                scan,
                serviceRead: serviceInventory,
                ...(result ? { result } : {}),
                plan,
                desired: cfg.desired,
                file: inventory.file,
                known: inventory.known,
              }))
                err(`warning: ${line}\n`);
          }
        });
      },
    );

  addShardOption(
    addLockOptions(
      withCommon(
        program
          .command('rotate')
          .description('rotate selected keys now: issue and store a new key, then retire the old one'),
      ),
    ),
  )
    .requiredOption(
      '--key <address>',
      'key address or glob, e.g. key.acme-production/globex/primary or "key.acme-*/globex/*" (repeatable, required)',
      (v: string, prev: string[] | undefined) => [...(prev ?? []), v],
    )
    .option('--compact', 'counts per action, kind and environment instead of every resource (plans of thousands)')
    .option(
      '--revoke-old',
      'revoke each old key as soon as its replacement is stored (default: keep it for the rotation overlap, or until it expires)',
    )
    .option('--auto-approve', 'skip the confirmation (CI)')
    .option('-y, --yes', 'same as --auto-approve')
    .option(
      '--allow-local-store',
      'in CI, allow issuing keys into a local store file (commit and push it after the run; also KMS_SYNC_ALLOW_LOCAL_STORE=1 or settings.allowLocalStoreInCi)',
    )
    .option(
      '--json',
      'machine-readable output: a JSON-lines event stream on stdout (schemas/kms-sync-apply-events.schema.json)',
    )
    .option(
      '--allow-new-recipients',
      'add age recipients to secret stores that already hold keys (they can decrypt those keys; also KMS_SYNC_ALLOW_NEW_RECIPIENTS=1)',
    )
    .action(
      async (
        o: GlobalOptions &
          LockFlags & {
            compact?: boolean;
            key: string[];
            revokeOld?: boolean;
            autoApprove?: boolean;
            yes?: boolean;
            allowLocalStore?: boolean;
            json?: boolean;
            shard?: string;
          },
      ) => {
        for (const k of o.key) checkKeyAddress(k);
        // Environment by environment, as plan (nothing is written before the plan is made): loaded
        // whole again when a problem or warning has to be said as a whole load says it.
        const byEnv = process.env.KMS_SYNC_CONFIG_WHOLE !== '1';
        await streamedOrWhole((stream) =>
          runConfigLocked(byEnv ? { ...o, stream } : o, lockOf(o), async ({ conn, cfg, shard, owner }) => {
            const { plan: full } = await planFor(conn, cfg.desired, {
              ...(cfg.bodies ? { bodies: cfg.bodies } : {}),
              ...(shard ? { shard } : {}),
              policy: cfg.policy,
              prune: false,
              baseDir: cfg.baseDir,
              secretCheck: false,
              force: o.key,
              runLocked: true,
              owner,
              ...(o.revokeOld ? { revokeOld: true } : {}),
            });
            // Only the rotations asked for (and the revocations that go with them), nothing else.
            const rotated = new Set(
              full.operations.filter((op) => op.actionReason === 'rotate_forced').map((op) => op.address),
            );
            if (rotated.size === 0 && shard) {
              // The keys asked for are in other shards: this one has nothing to do.
              out(
                `No key of --key ${o.key.join(', ')} is in shard ${shard.index + 1}/${shard.count}; nothing to rotate here.\n`,
              );
              return;
            }
            if (rotated.size === 0) {
              // An exact address with a typo: the configured key address closest to it (every client's
              // keys: a configuration loaded environment by environment is loaded whole for them).
              if (cfg.bodies) throw new NotStreamable('the closest key address needs every client');
              const known = cfg.desired.clients.flatMap((c) =>
                c.keys.map((k) => address.key(c.projectEnv, c.name, k.name)),
              );
              const meant = o.key
                .filter((k) => !/[*?]/.test(k))
                .map((k) => closest(k, known))
                .find((x) => x !== undefined && !o.key.includes(x));
              throw new UsageError(
                `--key ${o.key.join(', ')} matches no existing managed key${meant ? `: did you mean --key ${meant}?` : ''}`,
              );
            }
            // Orphans found by the recovery are re-issued and revoked here too: never left live.
            const operations = full.operations.filter(
              (op) =>
                (rotated.has(op.address) &&
                  (op.action === 'rotate' ||
                    op.actionReason === 'delete_rotated_out' ||
                    op.actionReason === 'expire_rotated_out')) ||
                op.actionReason === 'reissue_lost_key' ||
                op.actionReason === 'revoke_orphan',
            );
            const plan: Plan = {
              ...full,
              operations,
              unmanaged: [],
              keyFindings: [],
              warnings: [],
              summary: summarize(operations, []),
            };
            const reporter = o.json
              ? jsonReporter('rotate')
              : textReporter(() => plan.operations.length, { compact: Boolean(o.compact) });
            reporter.plan(plan);
            if (!(await confirm(plan, o))) {
              reporter.say('Rotation cancelled.\n');
              if (reporter.json) reporter.finish(undefined, 'cancelled', EXIT.error);
              throw new ExitWith(EXIT.error);
            }
            const code = await runApply(conn, plan, cfg.baseDir, {
              parallelism: o.parallelism,
              policy: cfg.policy,
              allowLocalStoreInCi: Boolean(o.allowLocalStore || cfg.desired.settings?.allowLocalStoreInCi),
              reporter,
            });
            if (code !== EXIT.ok) throw new ExitWith(code);
          }),
        );
      },
    );

  addLockOptions(
    withCommon(
      program
        .command('destroy')
        .description(
          'delete everything this configuration owns in its environments: its clients and endpoints, then the environments and projects it defines once nothing else is left in them',
        ),
    ),
  )
    .option('--auto-approve', 'skip the confirmation (CI)')
    .option('-y, --yes', 'same as --auto-approve')
    .option('--compact', 'counts per action, kind and environment instead of every resource (plans of thousands)')
    .action(async (o: GlobalOptions & LockFlags & { compact?: boolean; autoApprove?: boolean; yes?: boolean }) => {
      await runConfigLocked(o, lockOf(o), async ({ conn, cfg, owner }) => {
        const { plan, live } = await destroyPlanFor(conn, cfg.desired, {
          policy: cfg.policy,
          prune: false,
          baseDir: cfg.baseDir,
          runLocked: true,
          owner,
        });
        out(o.compact ? renderPlanCompact(plan) : renderPlanText(plan, { color: colorEnabled(process.stdout) }));
        if (plan.operations.length === 0) {
          out('Nothing of this configuration is left to destroy.\n');
          return;
        }
        if (!(await confirm(plan, o, 'destroy'))) {
          out('Destroy cancelled.\n');
          throw new ExitWith(EXIT.error);
        }
        let result: ApplyResult | undefined;
        let code: number;
        try {
          code = await runApply(conn, plan, cfg.baseDir, {
            parallelism: o.parallelism,
            policy: cfg.policy,
            onResult: (r) => {
              result = r;
            },
            reporter: textReporter(() => plan.operations.length, { compact: Boolean(o.compact), command: 'destroy' }),
          });
        } finally {
          // The ownership inventory (engine/inventory.ts) keeps only what is left, as after an apply.
          for (const line of await keepDestroyInventory(conn, {
            owner,
            desired: cfg.desired,
            state: live,
            ...(result ? { result } : {}),
            plan,
            file: cliInventoryFile(cfg.baseDir),
          }))
            err(`warning: ${line}\n`);
        }
        if (code !== EXIT.ok) throw new ExitWith(code);
      });
    });

  program
    .command('show')
    .description('show a plan saved with kms-sync plan --out, without contacting the service')
    .argument('<planfile>', 'the saved plan')
    .option('--json', 'the plan as JSON (schemas/kms-sync-plan.schema.json)')
    .addOption(new Option('--format <format>', 'text, json or markdown').choices(['text', 'json', 'markdown']))
    .option('--compact', 'counts per action, kind and environment instead of every resource (plans of thousands)')
    .action(async (planfile: string, o: ReportFlags & { json?: boolean; compact?: boolean }) => {
      const format = reportFormat(o);
      const saved = await readSavedPlan(planfile);
      if (format === 'json') out(renderPlanJson(saved.plan));
      else if (format === 'markdown')
        out(renderPlanMarkdown(saved.plan, { drift: classifyDrift(saved.plan, noIgnoreRules()) }));
      else {
        out(
          o.compact
            ? renderPlanCompact(saved.plan)
            : renderPlanText(saved.plan, { color: colorEnabled(process.stdout) }),
        );
        out(
          `\nPlanned ${saved.plan.generatedAt} for ${safeUrl(saved.plan.target.url)}. Apply exactly this plan with: kms-sync apply ${planfile}\n`,
        );
      }
    });

  withCommon(
    program
      .command('export')
      .description(
        'write the live state of environments as YAML in the configuration format, or as a CDKTF stack (no secrets)',
      ),
    { config: false, service: true, readOnly: true },
  )
    .addHelpText('after', '\nWithout --env, every environment the credential can see is exported.')
    .option(
      '-o, --output <file>',
      'write to this file instead of stdout (refuses to overwrite); a folder (adopted/, or one that exists): its kms-sync.yaml; with --format cdktf|cdktn: a folder',
    )
    .option(
      '--format <format>',
      'yaml, or cdktf / cdktn: a TypeScript stack using kms-sync/cdktf or kms-sync/cdktn',
      'yaml',
    )
    .action(async (o: GlobalOptions & { output?: string; format: string }) => {
      if (!['yaml', 'cdktf', 'cdktn'].includes(o.format))
        throw new UsageError(`--format ${o.format}: expected yaml, cdktf or cdktn`);
      if (o.format !== 'yaml' && !o.output)
        throw new UsageError(`--format ${o.format} writes a project folder: give it with -o DIR`);
      // -o adopted/ (a trailing slash, or a folder that exists): the folder layout, adopted/kms-sync.yaml.
      if (
        o.output &&
        o.format === 'yaml' &&
        (/[\\/]$/.test(o.output) ||
          (await stat(o.output).then(
            (st) => st.isDirectory(),
            () => false,
          )))
      ) {
        o.output = path.join(o.output, 'kms-sync.yaml');
      }
      const conn = connect(o, process.env, retryLogger());
      try {
        // No --env: every environment the credential can see, like decK's dump. Globs (--env 'acme-*')
        // are matched against those, as other commands match them against the configuration's.
        let envs = o.env;
        const globs = envs.filter((e) => /[*?]/.test(e));
        if (envs.length === 0 || globs.length) {
          const visible = (await conn.api.listProjects())
            .flatMap((p) => (p.envs?.list ?? []).map((e) => e.project_env))
            .sort();
          if (visible.length === 0) throw new UsageError('the credential sees no environment to export');
          if (envs.length === 0) {
            envs = visible;
            err(`Exporting every environment the credential can see (${envs.length}): ${envs.join(', ')}\n`);
          } else {
            const unmatched = globs.filter((g) => !visible.some((e) => matchesAny(e, [g])));
            if (unmatched.length)
              throw new UsageError(
                `--env ${unmatched.join(', ')} matches no environment the credential can see (${visible.length > 30 ? `${visible.slice(0, 30).join(', ')}, …` : visible.join(', ')})`,
              );
            envs = [
              ...new Set([...envs.filter((e) => !/[*?]/.test(e)), ...visible.filter((e) => matchesAny(e, globs))]),
            ].sort();
            err(`Exporting ${envs.length} environment(s): ${envs.join(', ')}\n`);
          }
        }
        const projects = [...new Set(envs.map((e) => e.replace(/-[a-z][a-z0-9]*$/, '')))];
        const live = await withReadProgress(conn.api, () => readLiveState(conn.api, { projects, envs }));
        const missing = envs.filter((e) => !live.state.envs.some((x) => x.projectEnv === e));
        if (missing.length) {
          const known = (await conn.api.listProjects())
            .flatMap((p) => (p.envs?.list ?? []).map((e) => e.project_env))
            .sort();
          const shown =
            known.length > 30
              ? `${known.slice(0, 30).join(', ')}, … (${known.length} in all)`
              : known.join(', ') || 'none';
          throw new UsageError(
            `environment(s) not found in the live service: ${missing.join(', ')}. Known environments: ${shown}`,
          );
        }
        // Some of a project's environments: the export references the project (external), so that
        // planning it never deletes the others (they are not in it) nor renames the project.
        const desired: DesiredState = referencePartialProjects(
          liveToDesired(live.state, emptyDesiredState()),
          live.projectEnvs ?? {},
          envs,
        );
        // An explicit owner, derived where the export goes (as a run there would derive it): a new
        // configuration, which claims what it names only with --take-ownership.
        desired.owner = await deriveOwner(
          o.output && (o.format === 'cdktf' || o.format === 'cdktn')
            ? path.resolve(o.output)
            : path.dirname(path.resolve(o.output ?? 'kms-sync.yaml')),
        );
        if (o.format === 'cdktf' || o.format === 'cdktn') {
          const written = await writeCdktfExport(o.output!, desired, o.format, [
            `Exported by kms-sync export --format ${o.format} from ${envs.join(', ')}. Raw keys are never exported.`,
          ]);
          err(
            `Wrote ${written.join(', ')} in ${o.output}: ${desired.clients.length} client(s), ${desired.endpoints.length} endpoint(s), ${desired.templates.length} template(s). ` +
              `Install kms-sync, ${o.format} and constructs there (npm install), then: kms-sync plan --cdktf ${o.output}\n`,
          );
          return;
        }
        // The same $schema line on stdout as in a file written here (see init).
        const reference = schemaReferenceFor(path.resolve(o.output ?? 'kms-sync.yaml'));
        const yaml = desiredStateToYaml(desired, { schema: reference.ref });
        if (o.output) {
          await mkdir(path.dirname(path.resolve(o.output)), { recursive: true, mode: 0o755 });
          await writeFile(path.resolve(o.output), yaml, { flag: 'wx', mode: 0o644 }).catch(
            (e: NodeJS.ErrnoException) => {
              if (e.code === 'EEXIST') throw new UsageError(`${o.output} exists; refusing to overwrite it`);
              throw e;
            },
          );
          const copied = await writeSchemaCopy(reference);
          if (copied === 'written' || copied === 'updated')
            err(
              `Wrote ${path.relative(process.cwd(), reference.copyTo!)} (the JSON Schema the $schema line points at).\n`,
            );
          err(
            `Wrote ${o.output}: ${desired.clients.length} client(s), ${desired.endpoints.length} endpoint(s), ${desired.templates.length} template(s).\n`,
          );
        } else {
          out(yaml);
          schemaCopyHint(reference);
        }
      } finally {
        await conn.api.close();
      }
    });
}
