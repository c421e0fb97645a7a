// kms-sync report merge REPORT…: the plans of a fleet's shards (`plan --shard K/N --json` or
// `--out`) joined into the plan of the whole fleet (plan/merge.ts), or their drift reports
// (`drift --shard K/N --json`) into the drift report of the whole (plan/drift.ts): one report
// (text, JSON, Markdown), one pull-request comment, one step summary, one exit code. Every shard
// must be there once: a missing shard would read as "no changes" for its environments.
import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { hasDrift, mergeDriftReports, type DriftReport } from '../plan/drift.js';
import { mergePlans, type PlanPart } from '../plan/merge.js';
import { describeBlocked, type Plan, type PlanShard } from '../plan/types.js';
import { driftFromJson } from '../report/drift-from-json.js';
import { planFromJson, PlanJsonError } from '../report/plan-from-json.js';
import { ExitWith, UsageError } from './errors.js';
import { EXIT } from './exit-codes.js';
import { err } from './output.js';
import {
  addReportOptions,
  emitDriftReport,
  emitPlanReport,
  maskForActions,
  reportFormat,
  type ReportFlags,
} from './report-output.js';
import { SAVED_PLAN_KIND, savedPlanFromFile } from './saved-plan.js';

type ShardReport =
  | { file: string; plan: Plan; drift?: undefined }
  | { file: string; drift: DriftReport; plan?: undefined };

async function readReport(file: string): Promise<ShardReport> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(file, 'utf8'));
  } catch (e) {
    throw new UsageError(
      `${file}: not readable as JSON (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
    );
  }
  const kind = (parsed as { kind?: unknown } | null)?.kind;
  if (kind === SAVED_PLAN_KIND) return { file, plan: savedPlanFromFile(parsed, file).plan };
  try {
    return kind === 'kms-sync/drift' ? { file, drift: driftFromJson(parsed) } : { file, plan: planFromJson(parsed) };
  } catch (e) {
    if (e instanceof PlanJsonError) throw new UsageError(`${file}: ${e.message}`);
    throw e;
  }
}

/** Refused unless the reports are the N shards of one run, each once. */
function checkShards(reports: readonly { file: string; shard: PlanShard | undefined }[], what: string): void {
  const count = reports[0]?.shard?.count;
  for (const { file, shard } of reports) {
    if (!shard)
      throw new UsageError(`${file}: not a shard's ${what} (made without --shard K/N), so it cannot be merged`);
    if (shard.count !== count)
      throw new UsageError(
        `${file}: shard ${shard.index + 1} of ${shard.count}, but ${reports[0]!.file} is a shard of ${count}`,
      );
  }
  const seen = new Map<number, string>();
  for (const { file, shard } of reports) {
    const other = seen.get(shard!.index);
    if (other) throw new UsageError(`${file} and ${other} are both shard ${shard!.index + 1}/${count}`);
    seen.set(shard!.index, file);
  }
  const missing = Array.from({ length: count! }, (_, i) => i)
    .filter((i) => !seen.has(i))
    .map((i) => `${i + 1}/${count}`);
  if (missing.length)
    throw new UsageError(
      `shard(s) ${missing.join(', ')} missing: the merged ${what} would leave their environments out`,
    );
}

/** The shards' plans joined; refused unless they are the N shards of one run, each once. */
export function mergeShardPlans(plans: readonly { file: string; plan: Plan }[]): Plan {
  checkShards(
    plans.map(({ file, plan }) => ({ file, shard: plan.shard })),
    'plan',
  );
  try {
    const parts: PlanPart[] = plans.map(({ plan }) => ({ plan, warningOrder: plan.shard!.warningOrder }));
    const { plan } = mergePlans(parts);
    return plan;
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

/** The shards' drift reports joined, under the same rules. */
export function mergeShardDrift(reports: readonly { file: string; drift: DriftReport }[]): DriftReport {
  checkShards(
    reports.map(({ file, drift }) => ({ file, shard: drift.shard })),
    'drift report',
  );
  try {
    return mergeDriftReports(reports.map((r) => r.drift));
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

export function registerReport(program: Command) {
  const report = program
    .command('report')
    .description('work with reports: merge the plans or drift reports of a sharded run');
  addReportOptions(
    report
      .command('merge')
      .description(
        "join the plans (kms-sync plan --shard K/N --json or --out) or drift reports (kms-sync drift --shard K/N --json) of a run's shards into the report of the whole: one report, one comment, one exit code",
      )
      .argument('<reports...>', "the shards' plans (JSON or saved plans) or drift reports (JSON), all of one kind")
      .option('--json', 'same as --format json')
      .option(
        '--compact',
        'plans: counts per action, kind and environment instead of every resource (plans of thousands)',
      )
      .option(
        '--detailed-exitcode',
        'plans: exit 2 when there are changes, 0 when none (drift reports always exit 2 when drift exists, as drift does)',
      ),
  ).action(
    async (files: string[], o: ReportFlags & { json?: boolean; compact?: boolean; detailedExitcode?: boolean }) => {
      const reports = await Promise.all(files.map(readReport));
      const drifts = reports.flatMap((r) => (r.drift ? [{ file: r.file, drift: r.drift }] : []));
      if (drifts.length) {
        const plan = reports.find((r) => r.plan);
        if (plan)
          throw new UsageError(
            `${plan.file} is a plan and ${drifts[0]!.file} a drift report: report merge joins reports of one kind`,
          );
        o.format = reportFormat(o);
        maskForActions();
        const drift = mergeShardDrift(drifts);
        await emitDriftReport(drift, { ...o, file: drifts[0]!.drift.shard!.files });
        if (hasDrift(drift)) throw new ExitWith(EXIT.changes);
        return;
      }
      const plans = reports.map((r) => ({ file: r.file, plan: r.plan! }));
      const plan = mergeShardPlans(plans);
      await emitPlanReport(plan, { ...o, file: plans[0]!.plan.shard!.files });
      const blocked = describeBlocked(plan);
      if (blocked) {
        err(`\nError: ${blocked}\n`);
        throw new ExitWith(EXIT.error);
      }
      if (o.detailedExitcode && plan.operations.length > 0) throw new ExitWith(EXIT.changes);
    },
  );
}
