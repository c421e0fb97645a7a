// kms-sync drift: compare the live service with the desired state and classify every difference.
// Exit codes: 2 drift found, 0 none (or everything ignored), 1 error.
import { readFile, writeFile } from 'node:fs/promises';
import { InvalidArgumentError, type Command } from 'commander';
import { collectUsage } from '../live/usage.js';
import { quoted } from '../model/printable.js';
import { classifyDrift, generateIgnore, hasDrift, type DriftReport } from '../plan/drift.js';
import { IGNORE_FILE_NAME } from '../plan/ignore.js';
import { shardConfig } from '../engine/shard.js';
import { NotStreamable } from '../config/index.js';
import {
  connect,
  loadConfigReadingAhead,
  planFor,
  readAheadFor,
  streamedOrWhole,
  type GlobalOptions,
  type StreamedAttempt,
} from '../engine/run.js';
import { resolveOwner } from '../engine/owner.js';
import { cliInventory } from '../engine/inventory.js';
import { addLimitOptions } from './config-limits.js';
import { ExitWith, UsageError } from './errors.js';
import { EXIT } from './exit-codes.js';
import { err } from './output.js';
import { addCdktfOptions } from './cdktf-input.js';
import {
  addReportOptions,
  reportFormat,
  emitDriftReport,
  loadIgnoreRules,
  maskForActions,
  type ReportFlags,
} from './report-output.js';
import { ignoreFileBeside } from '../engine/ignore-file.js';

const collect = (v: string, prev: string[]) => [...prev, v];
// InvalidArgumentError: commander names the flag in the message (option '--parallelism <n>' argument …).
const positiveInt = (v: string) => {
  if (!/^[1-9]\d*$/.test(v)) throw new InvalidArgumentError(`expected a positive integer, got ${JSON.stringify(v)}`);
  return Number(v);
};

export interface DriftFlags extends GlobalOptions, ReportFlags {
  ignoreFile?: string;
  genIgnore?: string | boolean;
  usage: boolean;
  secretCheck: boolean;
  logPages: number;
  json?: boolean;
  shard?: string;
}

export function registerDrift(program: Command) {
  const cmd = addLimitOptions(
    addCdktfOptions(
      program
        .command('drift')
        .description(
          'compare the live service with the desired state and classify every difference: changed outside, missing, unmanaged, secret missing, expiring (exit 2 when drift exists)',
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
    .option('--url <url>', 'service base URL ending in /api/v1 (default: $KMS_API_URL)')
    .option('--parallelism <n>', 'read requests in flight at once are 4x this (drift only reads)', positiveInt, 8)
    .option('--max-rps <n>', 'client-side rate limit, requests per second', positiveInt)
    .option(
      '--ignore-file <file>',
      `ignore rules: addresses and address:field.path with * and ** (default: ${IGNORE_FILE_NAME} beside the configuration, if present)`,
    )
    .option(
      '--gen-ignore [file]',
      `write ignore rules accepting the drift found now (default file: ${IGNORE_FILE_NAME} beside the configuration; appended to), then exit 0`,
    )
    .option('--no-secret-check', 'do not check that every managed key has its secret in its store')
    .option('--no-usage', 'skip the usage context (endpoint stats and recent error rates from the logs)')
    .option('--log-pages <n>', 'pages of 100 recent logs read per environment for the usage context', positiveInt, 2)
    .option('--json', 'same as --format json (schemas/kms-sync-drift.schema.json)')
    .option(
      '--shard <K/N>',
      'compare only the K-th of N shards of the environments (a stable hash); N alone takes K from JOB_COMPLETION_INDEX',
    );
  addReportOptions(cmd).action(runDrift);
}

async function attachUsage(report: DriftReport, run: () => ReturnType<typeof collectUsage>) {
  try {
    const ctx = await run();
    for (const item of report.items) {
      const u = ctx.byAddress[item.address];
      if (u) item.usage = u;
    }
    report.usageWindows = ctx.windows;
  } catch (e) {
    report.warnings.push(`usage context unavailable: ${(e as Error).message}`);
  }
}

export async function runDrift(o: DriftFlags): Promise<void> {
  o.format = reportFormat(o);
  maskForActions();
  // Environment by environment, as plan (a shard reads only its environments' clients): loaded
  // whole again when a problem or warning has to be said as a whole load says it (nothing is
  // printed before the report). KMS_SYNC_CONFIG_WHOLE=1: loaded whole, as before.
  const byEnv = process.env.KMS_SYNC_CONFIG_WHOLE !== '1';
  const { report, baseDir } = await streamedOrWhole((stream) => driftReport(o, byEnv ? stream : undefined));
  await finishDrift(o, report, baseDir);
}

/** The drift of a configuration, loaded environment by environment when `stream` is given. */
async function driftReport(
  o: DriftFlags,
  stream: StreamedAttempt | undefined,
): Promise<{ report: DriftReport; baseDir: string }> {
  const ahead = o.shard === undefined ? readAheadFor(o, false, (line) => err(`${line}\n`)) : undefined;
  const loaded = await loadConfigReadingAhead(stream ? { ...o, stream } : o, ahead);
  let ignore;
  try {
    ignore = await loadIgnoreRules(o.ignoreFile, loaded.baseDir);
  } catch (e) {
    ahead?.conn.api.http.stop();
    await ahead?.conn.api.close();
    throw e;
  }
  const conn = ahead?.conn ?? connect(o, process.env, (line) => err(`${line}\n`));
  let report: DriftReport;
  try {
    const { cfg, shard } = shardConfig(loaded, o.shard, o.file);
    // The inventory an apply kept (in the service, and sealed beside the journal): stripped markers
    // are drift, and unapplied edits of projects, environments and templates are pending, not changed outside.
    const { owner } = await resolveOwner(cfg.desired, cfg.baseDir);
    const { index } = await cliInventory(cfg.baseDir, owner, conn.sealKey, (line) => {
      if (!stream?.whole) err(`warning: ${line}\n`);
    });
    const { plan, live } = await planFor(conn, cfg.desired, {
      ...(cfg.live ? { readAhead: cfg.live } : {}),
      ...(loaded.bodies ? { bodies: loaded.bodies } : {}),
      ...(shard ? { shard } : {}),
      policy: cfg.policy,
      prune: false,
      baseDir: cfg.baseDir,
      secretCheck: o.secretCheck,
      leaving: cfg.leaving,
      checkCapacity: false,
      owner,
      inventory: index,
    });
    report = classifyDrift(plan, ignore);
    if (o.usage && !o.genIgnore && report.items.length) {
      await attachUsage(report, () => collectUsage(conn.api, live.state, report.items, { logPages: o.logPages }));
    }
  } catch (e) {
    // Loaded whole next (streamedOrWhole): the reads of this attempt are cut, not retried, and say nothing.
    if (e instanceof NotStreamable) conn.api.http.stop();
    throw e;
  } finally {
    await conn.api.close();
  }
  return { report, baseDir: loaded.baseDir };
}

/** Prints the drift report (or writes the ignore rules, --gen-ignore) and sets the exit code. */
async function finishDrift(o: DriftFlags, report: DriftReport, baseDir: string): Promise<void> {
  if (o.genIgnore) {
    const file = typeof o.genIgnore === 'string' ? o.genIgnore : ignoreFileBeside(baseDir);
    const existing = await readFile(file, 'utf8').catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') return '';
      throw new UsageError(`cannot read ${file}: ${e.code ?? e.message}`);
    });
    const refused: string[] = [];
    const next = generateIgnore(report, existing, refused);
    for (const a of refused)
      err(
        `Not written to ${file}: ${quoted(a)} cannot be written as an ignore rule that means only that resource (its name holds whitespace, #, * or ?, a control character, or reads as a field); accept its drift by hand, or rename it.\n`,
      );
    const written = report.items.length - refused.length;
    if (next === existing) err(`No ${refused.length ? 'other ' : ''}drift to ignore; ${file} left as it was.\n`);
    else {
      // A rule file others could write would let them hide deletes: never group/other-writable, whatever the umask.
      await writeFile(file, next, { mode: 0o644 });
      err(`Wrote ignore rules for ${written} drifted resource(s) to ${file}. Review it, then commit it.\n`);
    }
    // A resource left out is drift nobody accepted: the run says so with its exit code.
    if (refused.length) throw new ExitWith(EXIT.error);
    return;
  }

  await emitDriftReport(report, o);
  if (hasDrift(report)) throw new ExitWith(EXIT.changes);
}
