// Report plumbing shared by `plan` and `drift`: output format, PR/MR comments, the Actions step
// summary and log masking, ignore files.
import { createHash } from 'node:crypto';
import { appendFile, lstat, readFile, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { Option, type Command } from 'commander';
import { classifyDrift } from '../plan/drift.js';
import { IGNORE_FILE_NAME, IgnoreParseError, noIgnoreRules, parseIgnore, type IgnoreRules } from '../plan/ignore.js';
import type { Plan } from '../plan/types.js';
import { colorEnabled, commentMarker, renderPlanJson, renderPlanMarkdown, renderPlanText } from '../report/index.js';
import { UsageError } from './errors.js';
import { configLimits, formatSize } from '../config/limits.js';
import { isInside } from '../config/paths.js';
import { renderPlanCompact } from './apply-output.js';
import { err, out } from './output.js';

export type ReportFormat = 'text' | 'json' | 'markdown';
export type CommentTarget = 'github' | 'gitlab';

export interface ReportFlags {
  format?: ReportFormat;
  comment?: CommentTarget;
}

export function addReportOptions(cmd: Command, defaultFormat?: ReportFormat): Command {
  const format = new Option('--format <format>', 'text (terminal), json (schemas/kms-sync-*.schema.json) or markdown (pull-request comments, step summaries)')
    .choices(['text', 'json', 'markdown']);
  return cmd
    .addOption(defaultFormat ? format.default(defaultFormat) : format)
    .addOption(new Option('--comment <where>', 'post the report as a pull-request comment (GITHUB_TOKEN) or merge-request note (GITLAB_TOKEN / CI_JOB_TOKEN), updated in place on the next run')
      .choices(['github', 'gitlab']));
}

/**
 * Identifies one report stream: the command, the configuration paths as given with -f (not the
 * files found in them, so a pull request adding a file keeps its comment) and the environment set.
 */
export function reportId(kind: 'plan' | 'drift', files: readonly string[], envs: readonly string[]): string {
  const norm = [...new Set(files.map((f) => path.relative(process.cwd(), path.resolve(f)).split(path.sep).join('/') || '.'))].sort();
  return createHash('sha256').update(JSON.stringify({ kind, files: norm, envs: [...new Set(envs)].sort() })).digest('hex').slice(0, 16);
}

/**
 * In GitHub Actions, registers values that must never appear in the log with `::add-mask::`
 * (the project key, a password inside the service URL). Written to stderr, so stdout stays clean
 * for --format json; the runner reads workflow commands from both. Outside Actions: nothing.
 */
export function maskForActions(env: NodeJS.ProcessEnv = process.env, write: (s: string) => void = (s) => process.stderr.write(s)) {
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

export async function publishComment(where: CommentTarget, marker: string, body: string, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  // The publishers (and their HTTP stack) are loaded only when a comment is asked for.
  const { PublishError } = await import('../report/publish/http.js');
  try {
    if (where === 'github') {
      const { upsertGitHubComment, githubTargetFromEnv } = await import('../report/publish/github.js');
      const r = await upsertGitHubComment(githubTargetFromEnv(env), marker, body);
      err(`${r.action === 'created' ? 'Posted' : 'Updated'} the pull-request comment${r.url ? ` ${r.url}` : ` ${r.id}`}\n`);
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

/** --ignore-file FILE (must exist), else .kmsignore in the current folder when present. */
export async function loadIgnoreRules(file: string | undefined): Promise<IgnoreRules> {
  const target = file ?? IGNORE_FILE_NAME;
  let text: string;
  try {
    // The default file comes with the checkout (a pull request may commit it as a link to a host
    // file, whose lines a parse error would quote): read only inside the working directory, and
    // never more than a configuration file may be. A file named with --ignore-file is the operator's.
    if (!file) await refuseOutsideCwd(target);
    text = await readFile(target, 'utf8');
  } catch (e) {
    if (e instanceof UsageError) throw e;
    if (!file && (e as NodeJS.ErrnoException).code === 'ENOENT') return noIgnoreRules();
    throw new UsageError(`cannot read the ignore file ${target}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  try {
    return parseIgnore(text, target);
  } catch (e) {
    if (e instanceof IgnoreParseError) throw new UsageError(`ignore file is not valid:\n${e.message}`);
    throw e;
  }
}

async function refuseOutsideCwd(target: string): Promise<void> {
  const info = await lstat(target);
  if (info.isSymbolicLink()) {
    const real = await realpath(target);
    if (!isInside(real, await realpath(process.cwd()))) {
      throw new UsageError(`${target} resolves outside the working directory (through a symbolic link): ignore rules are read only inside it, and it is not read`);
    }
  }
  const size = (await stat(target)).size;
  const limit = configLimits().fileBytes;
  if (size > limit) throw new UsageError(`${target} is larger than the limit of ${formatSize(limit)} per configuration file (${formatSize(size)}): it is not read`);
}

/** The output format of --format and --json together; both naming different formats is a usage error. */
export function reportFormat(o: ReportFlags & { json?: boolean }): ReportFormat {
  if (o.json && o.format && o.format !== 'json') throw new UsageError(`--json and --format ${o.format} ask for two different outputs: use one of them`);
  return o.format ?? (o.json ? 'json' : 'text');
}

/** `plan`: print in the chosen format, then comment / step summary when asked. */
export async function emitPlanReport(plan: Plan, o: ReportFlags & { json?: boolean; compact?: boolean; file: readonly string[] }) {
  maskForActions();
  const format = reportFormat(o);
  let markdown: string | undefined;
  const md = async () => {
    if (markdown === undefined) {
      const drift = classifyDrift(plan, await loadIgnoreRules(undefined));
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
