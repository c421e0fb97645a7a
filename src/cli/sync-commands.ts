// validate, init, plan, apply, export: parse flags, call the layers, pick a renderer, set the exit code.
import { mkdir, readFile, writeFile, rename } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline/promises';
import type { Command } from 'commander';
import { JournaledKeyCapture } from '../apply/journaled-capture.js';
import { applyPlan, type ApplyEvent, type ApplyResult } from '../apply/execute.js';
import { desiredStateToYaml, initConfig, schemaRefFor } from '../config/index.js';
import { readLiveState } from '../live/read.js';
import { emptyDesiredState, type DesiredState } from '../model/index.js';
import { summarize, type Plan } from '../plan/types.js';
import { colorEnabled, renderHeader, renderPlanJson, renderPlanText } from '../report/index.js';
import { StoreRegistry } from '../secrets/registry.js';
import { checkSecretNames, connect, loadConfig, planFor, type Connection, type GlobalOptions } from './context.js';
import { guardLocalStoreInCi } from './ci-guard.js';
import { ExitWith, UsageError } from './errors.js';
import { EXIT } from './exit-codes.js';
import { err, out } from './output.js';
import { liveToDesired } from './export-live.js';
import { addReportOptions, emitPlanReport, type ReportFlags } from './report-output.js';

const SAVED_PLAN_KIND = 'kms-sync/saved-plan';

interface SavedPlan {
  kind: typeof SAVED_PLAN_KIND;
  baseDir: string;
  files: string[];
  plan: Plan;
}

const positiveInt = (v: string) => {
  if (!/^[1-9]\d*$/.test(v)) throw new UsageError(`expected a positive integer, got ${JSON.stringify(v)}`);
  return Number(v);
};
const collect = (v: string, prev: string[]) => [...prev, v];

/** Flags shared by every command that reads configuration and/or talks to the service. */
function withCommon(cmd: Command, opts: { config?: boolean; service?: boolean } = { config: true, service: true }): Command {
  if (opts.config !== false) cmd.option('-f, --file <path>', 'configuration file or folder (repeatable)', collect, []);
  cmd.option('--env <slug>', 'limit to these environments (repeatable, globs allowed)', collect, []);
  if (opts.service !== false) {
    cmd
      .option('--url <url>', 'service base URL ending in /api/v1 (default: $KMS_API_URL)')
      .option('--parallelism <n>', 'write requests in flight at once (reads use 4x as many)', positiveInt, 8)
      .option('--max-rps <n>', 'client-side rate limit, requests per second', positiveInt);
  }
  return cmd;
}

function retryLogger(): (line: string) => void {
  return (line) => err(`${line}\n`);
}

function printPlan(plan: Plan, o: { json?: boolean }) {
  if (o.json) out(renderPlanJson(plan));
  else out(renderPlanText(plan, { color: colorEnabled(process.stdout) }));
}

async function writeSavedPlan(file: string, saved: SavedPlan) {
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, JSON.stringify(saved, null, 1) + '\n', { mode: 0o600 });
  await rename(tmp, file);
}

async function readSavedPlan(file: string): Promise<SavedPlan> {
  let parsed: SavedPlan;
  try {
    parsed = JSON.parse(await readFile(file, 'utf8')) as SavedPlan;
  } catch (e) {
    throw new UsageError(`${file}: not a readable saved plan (${(e as Error).message})`);
  }
  if (parsed?.kind !== SAVED_PLAN_KIND || parsed.plan?.formatVersion !== 1) {
    throw new UsageError(`${file}: not a kms-sync saved plan (expected kind ${SAVED_PLAN_KIND}, format 1); create one with kms-sync plan --out FILE`);
  }
  return parsed;
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

async function confirm(plan: Plan, o: { autoApprove?: boolean }): Promise<boolean> {
  if (o.autoApprove) return true;
  if (!process.stdin.isTTY || !process.stdout.isTTY) {
    throw new UsageError('refusing to apply without confirmation: no terminal to ask on. Review the plan and pass --auto-approve (CI), or apply a saved plan');
  }
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    if (plan.target.credential === 'live') {
      const expected = plan.target.envs.join(',');
      const answer = await rl.question(`\nThis applies to PRODUCTION credentials (sk_live_). Type the environment slug(s) to confirm (${expected}): `);
      return answer.trim() === expected;
    }
    const answer = await rl.question('\nDo you want to perform these actions? Only "yes" will be accepted: ');
    return answer.trim() === 'yes';
  } finally {
    rl.close();
  }
}

function progressPrinter(total: number): { onEvent: (e: ApplyEvent) => void; finish: () => void } {
  const tty = Boolean(process.stderr.isTTY) && !process.env.CI;
  let done = 0;
  let failed = 0;
  const line = (s: string) => err(`${s}\n`);
  const draw = () => err(`\r\x1b[2KApplying… ${done + failed}/${total} done${failed ? `, ${failed} failed` : ''}`);
  return {
    onEvent: (e) => {
      if (e.type === 'done') {
        done++;
        if (tty) draw();
        else line(`${e.op.address}: ${e.op.action} complete${e.note ? ` (${e.note})` : ''}`);
      } else if (e.type === 'failed') {
        failed++;
        if (tty) err('\r\x1b[2K');
        line(`${e.op.address}: ${e.op.action} FAILED: ${e.error}`);
        if (tty) draw();
      } else if (e.type === 'recovered') {
        if (tty) err('\r\x1b[2K');
        line(`recovered: ${e.note}`);
      }
    },
    finish: () => { if (tty) err('\r\x1b[2K'); },
  };
}

function summarizeApply(r: ApplyResult): string {
  const count = (a: string) => r.done.filter((o) => o.action === a).length;
  const lines = [
    `Resources: ${count('create')} created, ${count('update')} updated, ${count('replace')} replaced, ${count('rotate')} rotated, ${count('delete')} destroyed.`,
  ];
  if (r.keysStored.length) {
    lines.push(`Keys issued and stored (${r.keysStored.length}):`);
    for (const k of r.keysStored) lines.push(`  ${k.address} → ${k.store} (${k.secret})`);
  }
  for (const n of r.recoveries) lines.push(`Recovered: ${n}`);
  return lines.join('\n') + '\n';
}

export async function runApply(conn: Connection, plan: Plan, baseDir: string, o: { parallelism: number; allowLocalStoreInCi?: boolean }): Promise<number> {
  const registry = new StoreRegistry({ declarations: plan.stores, baseDir, onNotice: (m) => err(`${m}\n`) });
  await guardLocalStoreInCi(plan, registry, { allow: Boolean(o.allowLocalStoreInCi) || process.env.KMS_SYNC_ALLOW_LOCAL_STORE === '1', env: process.env });
  const capture = new JournaledKeyCapture(registry);
  const progress = progressPrinter(plan.operations.length);
  const result = await applyPlan({ api: conn.api, plan, keys: capture, parallelism: o.parallelism, onEvent: progress.onEvent });
  progress.finish();
  if (result.failed.length === 0 && !result.stopReason) {
    out(`\nApply complete! ${summarizeApply(result)}`);
    return EXIT.ok;
  }
  out(`\nApply stopped part-way. ${summarizeApply(result)}`);
  if (result.stopReason) out(`Reason: ${result.stopReason}\n`);
  for (const f of result.failed) out(`  failed: ${f.op?.address ?? '(before any operation)'}: ${f.error}\n`);
  if (result.notAttempted.length) {
    out(`Not attempted (${result.notAttempted.length}): ${result.notAttempted.slice(0, 20).map((o) => o.address).join(', ')}${result.notAttempted.length > 20 ? ', …' : ''}\n`);
  }
  out('Run kms-sync apply again to converge: it re-reads the live state and continues from there.\n');
  return result.done.length > 0 ? EXIT.partial : EXIT.error;
}

export function registerSyncCommands(program: Command) {
  program
    .command('validate')
    .description('check configuration files offline (no credentials, no network): syntax, schema, references, duplicates')
    .option('-f, --file <path>', 'configuration file or folder (repeatable)', collect, [])
    .option('--env <slug>', 'limit to these environments (repeatable, globs allowed)', collect, [])
    .action(async (o: { file: string[]; env: string[] }) => {
      const { desired, files, baseDir } = await loadConfig(o);
      await checkSecretNames(desired, baseDir);
      const keys = desired.clients.reduce((n, c) => n + c.keys.length, 0);
      out(`Configuration valid: ${files.length} file(s), ${desired.projects.length} project(s), ${desired.envs.length} environment(s), ` +
        `${desired.templates.length} template(s), ${desired.clients.length} client(s), ${keys} key(s), ${desired.endpoints.length} endpoint(s).\n`);
    });

  program
    .command('init')
    .description('write a starter configuration that references the JSON Schema (editor completion)')
    .argument('[file]', 'file to create', 'kms-sync.yaml')
    .action(async (file: string) => {
      const r = await initConfig(file);
      out(`Wrote ${r.file ?? file}. Edit it, then run: kms-sync validate -f ${file}\n`);
    });

  addReportOptions(withCommon(program.command('plan').description('show what apply would change in the live service')))
    .option('--prune', 'also delete unmanaged resources in scope (never protected ones)')
    .option('--json', 'print the plan as JSON (schemas/kms-sync-plan.schema.json)')
    .option('--out <file>', 'save the plan, to apply exactly with kms-sync apply FILE')
    .option('--detailed-exitcode', 'exit 2 when there are changes, 0 when none')
    .option('--no-secret-check', 'do not check that every managed key has its secret in its store')
    .option('--allow-empty', 'plan even when the configuration defines no environment')
    .action(async (o: GlobalOptions & ReportFlags & { prune?: boolean; json?: boolean; out?: string; detailedExitcode?: boolean; secretCheck: boolean; allowEmpty?: boolean }) => {
      const cfg = await loadConfig(o);
      const conn = connect(o, process.env, retryLogger());
      try {
        const { plan } = await planFor(conn, cfg.desired, { prune: Boolean(o.prune), baseDir: cfg.baseDir, secretCheck: o.secretCheck, forSaving: Boolean(o.out), allowEmpty: Boolean(o.allowEmpty) });
        await emitPlanReport(plan, o);
        if (o.out) {
          await writeSavedPlan(o.out, { kind: SAVED_PLAN_KIND, baseDir: cfg.baseDir, files: cfg.files, plan });
          if (!o.json && (o.format ?? 'text') === 'text') out(`\nSaved the plan to ${o.out}. Apply exactly this plan with: kms-sync apply ${o.out}\n`);
        }
        if (o.detailedExitcode && plan.operations.length > 0) throw new ExitWith(EXIT.changes);
      } finally {
        await conn.api.close();
      }
    });

  withCommon(program.command('apply').description('plan, confirm, then make the live service match the configuration'))
    .argument('[planfile]', 'a plan saved with kms-sync plan --out; applied exactly, refused when the live state moved')
    .option('--prune', 'also delete unmanaged resources in scope (never protected ones)')
    .option('--auto-approve', 'skip the confirmation (CI)')
    .option('--allow-local-store', 'in CI, allow issuing keys into a local store file that git does not track')
    .option('--json', 'print the plan as JSON')
    .option('--no-secret-check', 'do not check that every managed key has its secret in its store')
    .option('--allow-empty', 'apply even when the configuration defines no environment')
    .action(async (planfile: string | undefined, o: GlobalOptions & { prune?: boolean; autoApprove?: boolean; json?: boolean; secretCheck: boolean; allowLocalStore?: boolean; allowEmpty?: boolean }) => {
      let plan: Plan;
      let baseDir: string;
      let conn: Connection;
      if (planfile) {
        const saved = await readSavedPlan(planfile);
        conn = connect({ ...o, url: o.url ?? saved.plan.target.url }, process.env, retryLogger());
        if (conn.url !== saved.plan.target.url) throw new UsageError(`${planfile} was made for ${saved.plan.target.url}, not ${conn.url}`);
        const live = await readLiveState(conn.api, { projects: saved.plan.target.projects, envs: saved.plan.target.envs });
        const moved = staleness(saved.plan.fingerprints, live.fingerprints);
        if (moved.length) {
          await conn.api.close();
          throw new UsageError(`${planfile} is stale: the live state changed since it was planned (${moved.length} difference(s)):\n` +
            moved.slice(0, 20).map((m) => `  - ${m}`).join('\n') + (moved.length > 20 ? '\n  - …' : '') + '\nRun kms-sync plan again.');
        }
        plan = saved.plan;
        baseDir = saved.baseDir;
        out(renderHeader(plan) + `\nApplying the saved plan ${planfile} (${plan.operations.length} operation(s)).\n`);
      } else {
        const cfg = await loadConfig(o);
        conn = connect(o, process.env, retryLogger());
        plan = (await planFor(conn, cfg.desired, { prune: Boolean(o.prune), baseDir: cfg.baseDir, secretCheck: o.secretCheck, allowEmpty: Boolean(o.allowEmpty) })).plan;
        baseDir = cfg.baseDir;
        printPlan(plan, o);
      }
      try {
        if (plan.operations.length === 0) {
          if (planfile) out('Nothing to do.\n');
          return;
        }
        if (!planfile && !(await confirm(plan, o))) {
          out('Apply cancelled.\n');
          throw new ExitWith(EXIT.error);
        }
        const code = await runApply(conn, plan, baseDir, { parallelism: o.parallelism, allowLocalStoreInCi: Boolean(o.allowLocalStore) });
        if (code !== EXIT.ok) throw new ExitWith(code);
      } finally {
        await conn.api.close();
      }
    });

  withCommon(program.command('rotate').description('rotate selected keys now: issue and store a new key, then retire the old one'))
    .requiredOption('--key <address>', 'key address or glob, e.g. key.acme-production/globex/primary or "key.acme-*/globex/*" (repeatable)', collect, [])
    .option('--revoke-old', 'revoke each old key as soon as its replacement is stored (default: keep it for the rotation overlap, or until it expires)')
    .option('--auto-approve', 'skip the confirmation (CI)')
    .option('--allow-local-store', 'in CI, allow issuing keys into a local store file that git does not track')
    .action(async (o: GlobalOptions & { key: string[]; revokeOld?: boolean; autoApprove?: boolean; allowLocalStore?: boolean }) => {
      const cfg = await loadConfig(o);
      const conn = connect(o, process.env, retryLogger());
      try {
        const { plan: full } = await planFor(conn, cfg.desired, { prune: false, baseDir: cfg.baseDir, secretCheck: false, force: o.key, ...(o.revokeOld ? { revokeOld: true } : {}) });
        // Only the rotations asked for (and the revocations that go with them), nothing else.
        const rotated = new Set(full.operations.filter((op) => op.actionReason === 'rotate_forced').map((op) => op.address));
        if (rotated.size === 0) throw new UsageError(`--key ${o.key.join(', ')} matches no existing managed key`);
        const operations = full.operations.filter((op) => rotated.has(op.address) && (op.action === 'rotate' || op.actionReason === 'delete_rotated_out'));
        const plan: Plan = { ...full, operations, unmanaged: [], keyFindings: [], warnings: [], summary: summarize(operations, []) };
        printPlan(plan, {});
        if (!(await confirm(plan, o))) {
          out('Rotation cancelled.\n');
          throw new ExitWith(EXIT.error);
        }
        const code = await runApply(conn, plan, cfg.baseDir, { parallelism: o.parallelism, allowLocalStoreInCi: Boolean(o.allowLocalStore) });
        if (code !== EXIT.ok) throw new ExitWith(code);
      } finally {
        await conn.api.close();
      }
    });

  withCommon(program.command('export').description('write the live state of environments as YAML in the configuration format (no secrets)'), { config: false, service: true })
    .option('-o, --output <file>', 'write to this file instead of stdout (refuses to overwrite)')
    .action(async (o: GlobalOptions & { output?: string }) => {
      if (o.env.length === 0) throw new UsageError('export needs --env SLUG (repeatable) to know which environments to read');
      if (o.env.some((e) => /[*?]/.test(e))) throw new UsageError('export takes exact environment slugs, not globs');
      const conn = connect(o, process.env, retryLogger());
      try {
        const projects = [...new Set(o.env.map((e) => e.replace(/-[a-z][a-z0-9]*$/, '')))];
        const live = await readLiveState(conn.api, { projects, envs: o.env });
        const missing = o.env.filter((e) => !live.state.envs.some((x) => x.projectEnv === e));
        if (missing.length) throw new UsageError(`environment(s) not found in the live service: ${missing.join(', ')}`);
        const desired: DesiredState = liveToDesired(live.state, emptyDesiredState());
        const yaml = desiredStateToYaml(desired, o.output ? { schema: schemaRefFor(path.resolve(o.output)) } : {});
        if (o.output) {
          await mkdir(path.dirname(path.resolve(o.output)), { recursive: true });
          await writeFile(path.resolve(o.output), yaml, { flag: 'wx' }).catch((e: NodeJS.ErrnoException) => {
            if (e.code === 'EEXIST') throw new UsageError(`${o.output} exists; refusing to overwrite it`);
            throw e;
          });
          err(`Wrote ${o.output}: ${desired.clients.length} client(s), ${desired.endpoints.length} endpoint(s), ${desired.templates.length} template(s).\n`);
        } else out(yaml);
      } finally {
        await conn.api.close();
      }
    });
}

