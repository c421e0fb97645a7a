// kms-sync report merge PLAN…: the plans of a fleet's shards (`plan --shard K/N --json` or
// `--out`) joined into the plan of the whole fleet (plan/merge.ts): one report (text, JSON,
// Markdown), one pull-request comment, one step summary, one exit code. Every shard must be there
// once: a missing shard would read as "no changes" for its environments.
import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { mergePlans, type PlanPart } from '../plan/merge.js';
import { describeBlocked, type Plan } from '../plan/types.js';
import { planFromJson, PlanJsonError } from '../report/plan-from-json.js';
import { ExitWith, UsageError } from './errors.js';
import { EXIT } from './exit-codes.js';
import { err } from './output.js';
import { addReportOptions, emitPlanReport, type ReportFlags } from './report-output.js';
import { SAVED_PLAN_KIND, savedPlanFromFile } from './saved-plan.js';

async function readPlan(file: string): Promise<Plan> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(file, 'utf8'));
  } catch (e) {
    throw new UsageError(`${file}: not readable as JSON (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  if ((parsed as { kind?: unknown } | null)?.kind === SAVED_PLAN_KIND) return savedPlanFromFile(parsed, file).plan;
  if ((parsed as { kind?: unknown } | null)?.kind === 'kms-sync/drift') throw new UsageError(`${file}: a drift report; report merge joins plans (kms-sync plan --shard K/N --json or --out)`);
  try {
    return planFromJson(parsed);
  } catch (e) {
    if (e instanceof PlanJsonError) throw new UsageError(`${file}: ${e.message}`);
    throw e;
  }
}

/** The shards' plans joined; refused unless they are the N shards of one run, each once. */
export function mergeShardPlans(plans: readonly { file: string; plan: Plan }[]): Plan {
  const count = plans[0]?.plan.shard?.count;
  for (const { file, plan } of plans) {
    if (!plan.shard) throw new UsageError(`${file}: not a shard's plan (made without --shard K/N), so it cannot be merged`);
    if (plan.shard.count !== count) throw new UsageError(`${file}: shard ${plan.shard.index + 1} of ${plan.shard.count}, but ${plans[0]!.file} is a shard of ${count}`);
  }
  const seen = new Map<number, string>();
  for (const { file, plan } of plans) {
    const other = seen.get(plan.shard!.index);
    if (other) throw new UsageError(`${file} and ${other} are both shard ${plan.shard!.index + 1}/${count}`);
    seen.set(plan.shard!.index, file);
  }
  const missing = Array.from({ length: count! }, (_, i) => i).filter((i) => !seen.has(i)).map((i) => `${i + 1}/${count}`);
  if (missing.length) throw new UsageError(`shard(s) ${missing.join(', ')} missing: the merged plan would leave their environments out`);
  try {
    const parts: PlanPart[] = plans.map(({ plan }) => ({ plan, warningOrder: plan.shard!.warningOrder }));
    const { plan } = mergePlans(parts);
    return plan;
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

export function registerReport(program: Command) {
  const report = program.command('report').description('work with reports: merge the plans of a sharded run');
  addReportOptions(report
    .command('merge')
    .description("join the plans of a run's shards (kms-sync plan --shard K/N --json or --out) into the plan of the whole: one report, one comment, one exit code")
    .argument('<plans...>', 'the shards\' plans: JSON (plan --json) or saved plans (plan --out)')
    .option('--json', 'same as --format json')
    .option('--compact', 'counts per action, kind and environment instead of every resource (plans of thousands)')
    .option('--detailed-exitcode', 'exit 2 when there are changes, 0 when none'))
    .action(async (files: string[], o: ReportFlags & { json?: boolean; compact?: boolean; detailedExitcode?: boolean }) => {
      const plans = await Promise.all(files.map(async (file) => ({ file, plan: await readPlan(file) })));
      const plan = mergeShardPlans(plans);
      await emitPlanReport(plan, { ...o, file: plans[0]!.plan.shard!.files });
      const blocked = describeBlocked(plan);
      if (blocked) {
        err(`\nError: ${blocked}\n`);
        throw new ExitWith(EXIT.error);
      }
      if (o.detailedExitcode && plan.operations.length > 0) throw new ExitWith(EXIT.changes);
    });
}
