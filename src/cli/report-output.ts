// Report plumbing shared by `plan` and `drift`: output format, PR/MR comments, the Actions step
// summary and log masking, ignore files.
import { createHash } from 'node:crypto';
import { appendFile } from 'node:fs/promises';
import path from 'node:path';
import { Option, type Command } from 'commander';
import { classifyDrift, type DriftReport } from '../plan/drift.js';
import type { Plan } from '../plan/types.js';
import {
  colorEnabled,
  commentMarker,
  renderDriftJson,
  renderDriftMarkdown,
  renderDriftText,
  renderPlanJson,
  renderPlanMarkdown,
  renderPlanText,
} from '../report/index.js';
import { UsageError } from './errors.js';
import { renderPlanCompact } from './apply-output.js';
import { err, out, writeUnredacted } from './output.js';

export type ReportFormat = 'text' | 'json' | 'markdown';
export type CommentTarget = 'github' | 'gitlab';

export interface ReportFlags {
  format?: ReportFormat;
  comment?: CommentTarget;
}

export function addReportOptions(cmd: Command, defaultFormat?: ReportFormat): Command {
  const format = new Option(
    '--format <format>',
    'text (terminal), json (schemas/kms-sync-*.schema.json) or markdown (pull-request comments, step summaries)',
  ).choices(['text', 'json', 'markdown']);
  return cmd
    .addOption(defaultFormat ? format.default(defaultFormat) : format)
    .addOption(
      new Option(
        '--comment <where>',
        'post the report as a pull-request comment (GITHUB_TOKEN) or merge-request note (GITLAB_TOKEN / CI_JOB_TOKEN), updated in place on the next run',
      ).choices(['github', 'gitlab']),
    );
}

/**
 * Identifies one report stream: the command, the configuration paths as given with -f (not the
 * files found in them, so a pull request adding a file keeps its comment) and the environment set.
 */
export function reportId(kind: 'plan' | 'drift', files: readonly string[], envs: readonly string[]): string {
  const norm = [
    ...new Set(files.map((f) => path.relative(process.cwd(), path.resolve(f)).split(path.sep).join('/') || '.')),
  ].sort();
  return createHash('sha256')
    .update(JSON.stringify({ kind, files: norm, envs: [...new Set(envs)].sort() }))
    .digest('hex')
    .slice(0, 16);
}

/**
 * In GitHub Actions, registers values that must never appear in the log with `::add-mask::`
 * (the project key, a password inside the service URL). Written to stderr, so stdout stays clean
 * for --format json; the runner reads workflow commands from both. Outside Actions: nothing.
 */
export function maskForActions(
  env: NodeJS.ProcessEnv = process.env,
  write: (s: string) => void = (s) => writeUnredacted('stderr', s),
) {
  if (env.GITHUB_ACTIONS !== 'true') return;
  const values = new Set<string>();
  if (env.KMS_API_KEY) values.add(env.KMS_API_KEY);
  try {
    const u = new URL(env.KMS_API_URL ?? '');
    if (u.password) values.add(decodeURIComponent(u.password));
    for (const [k, v] of u.searchParams) if (/key|token|secret|password/i.test(k) && v) values.add(v);
  } catch {
    // no URL
  }
  // A mask covers one line: a multi-line value is masked line by line.
  for (const v of values) for (const line of v.split(/\r?\n/)) if (line.trim()) write(`::add-mask::${line}\n`);
}

export async function appendStepSummary(markdown: string, env: NodeJS.ProcessEnv = process.env) {
  if (!env.GITHUB_STEP_SUMMARY) return;
  await appendFile(env.GITHUB_STEP_SUMMARY, `${markdown}\n`);
}

export async function publishComment(
  where: CommentTarget,
  marker: string,
  body: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<void> {
  // The publishers (and their HTTP stack) are loaded only when a comment is asked for.
  const { PublishError } = await import('../report/publish/http.js');
  try {
    if (where === 'github') {
      const { upsertGitHubComment, githubTargetFromEnv } = await import('../report/publish/github.js');
      const r = await upsertGitHubComment(githubTargetFromEnv(env), marker, body);
      err(
        `${r.action === 'created' ? 'Posted' : 'Updated'} the pull-request comment${r.url ? ` ${r.url}` : ` ${r.id}`}\n`,
      );
    } else {
      const { upsertGitLabNote, gitlabTargetFromEnv } = await import('../report/publish/gitlab.js');
      const r = await upsertGitLabNote(gitlabTargetFromEnv(env), marker, body);
      err(`${r.action === 'created' ? 'Posted' : 'Updated'} the merge-request note ${r.id}\n`);
    }
  } catch (e) {
    if (e instanceof PublishError) throw new UsageError(`could not publish the report: ${e.message}`);
    throw e;
  }
}

import { loadIgnoreRules } from '../engine/ignore-file.js';

export { loadIgnoreRules };

/** The output format of --format and --json together; both naming different formats is a usage error. */
export function reportFormat(o: ReportFlags & { json?: boolean }): ReportFormat {
  if (o.json && o.format && o.format !== 'json')
    throw new UsageError(`--json and --format ${o.format} ask for two different outputs: use one of them`);
  return o.format ?? (o.json ? 'json' : 'text');
}

/** `plan`: print in the chosen format, then comment / step summary when asked. */
export async function emitPlanReport(
  plan: Plan,
  o: ReportFlags & { json?: boolean; compact?: boolean; file: readonly string[]; baseDir?: string },
) {
  maskForActions();
  const format = reportFormat(o);
  let markdown: string | undefined;
  const md = async () => {
    if (markdown === undefined) {
      const drift = classifyDrift(plan, await loadIgnoreRules(undefined, o.baseDir));
      markdown = renderPlanMarkdown(plan, { marker: commentMarker(reportId('plan', o.file, plan.target.envs)), drift });
    }
    return markdown;
  };
  if (format === 'json') out(renderPlanJson(plan));
  else if (format === 'markdown') out(await md());
  else out(o.compact ? renderPlanCompact(plan) : renderPlanText(plan, { color: colorEnabled(process.stdout) }));
  if (o.comment) await publishComment(o.comment, commentMarker(reportId('plan', o.file, plan.target.envs)), await md());
  if (o.comment === 'github' || format === 'markdown') await appendStepSummary(await md());
}

/** `drift`: print in the chosen format, then comment / step summary when asked (o.format already resolved). */
export async function emitDriftReport(report: DriftReport, o: ReportFlags & { file: readonly string[] }) {
  const marker = commentMarker(reportId('drift', o.file, report.target.envs));
  const markdown = () => renderDriftMarkdown(report, { marker });
  if (o.format === 'json') out(renderDriftJson(report));
  else if (o.format === 'markdown') out(markdown());
  else out(renderDriftText(report, { color: colorEnabled(process.stdout) }));
  if (o.comment) await publishComment(o.comment, marker, markdown());
  if (o.comment === 'github' || o.format === 'markdown') await appendStepSummary(markdown());
}
