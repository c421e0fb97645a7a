// Posts a report on the current pull request and updates that same comment on the next run. The
// comment is found by its hidden marker (`<!-- kms-sync:… -->`), across every page of comments.
// REST routes (GitHub's published description, @octokit/openapi):
//   GET   /repos/{owner}/{repo}/issues/{issue_number}/comments   per_page, page; Link: rel="next"
//   POST  /repos/{owner}/{repo}/issues/{issue_number}/comments   {body}
//   PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}      {body}
import { readFileSync } from 'node:fs';
import { callJson, header, nextLink, PublishError, type UpsertResult } from './http.js';

export interface GitHubTarget {
  apiUrl: string;
  token: string;
  owner: string;
  repo: string;
  /** Pull-request (issue) number. */
  issueNumber: number;
}

/** At most this many pages of 100 comments are searched for the marker. */
export const MAX_COMMENT_PAGES = 50;

/**
 * From the Actions environment: GITHUB_TOKEN (or GH_TOKEN), GITHUB_REPOSITORY, GITHUB_API_URL and
 * the pull-request number of the event in GITHUB_EVENT_PATH (KMS_SYNC_PR_NUMBER overrides it).
 */
export function githubTargetFromEnv(env: NodeJS.ProcessEnv = process.env, read: (p: string) => string = (p) => readFileSync(p, 'utf8')): GitHubTarget {
  const token = env.GITHUB_TOKEN || env.GH_TOKEN;
  if (!token) throw new PublishError('--comment github needs GITHUB_TOKEN (with pull-requests: write) in the environment');
  const repository = env.GITHUB_REPOSITORY ?? '';
  const [owner, repo, ...rest] = repository.split('/');
  if (!owner || !repo || rest.length) throw new PublishError(`--comment github needs GITHUB_REPOSITORY as owner/repo (got ${JSON.stringify(repository)})`);
  let issueNumber = env.KMS_SYNC_PR_NUMBER ? Number(env.KMS_SYNC_PR_NUMBER) : NaN;
  if (!Number.isInteger(issueNumber) && env.GITHUB_EVENT_PATH) {
    let event: { pull_request?: { number?: number }; issue?: { number?: number; pull_request?: unknown }; number?: number };
    try {
      event = JSON.parse(read(env.GITHUB_EVENT_PATH)) as typeof event;
    } catch (e) {
      throw new PublishError(`cannot read the Actions event file GITHUB_EVENT_PATH (${(e as Error).message})`);
    }
    issueNumber = event.pull_request?.number ?? (event.issue?.pull_request ? event.issue.number : undefined) ?? NaN;
  }
  if (!Number.isInteger(issueNumber) || issueNumber <= 0) {
    throw new PublishError('--comment github runs on pull_request events (no pull request in GITHUB_EVENT_PATH; set KMS_SYNC_PR_NUMBER to name one)');
  }
  return { apiUrl: (env.GITHUB_API_URL || 'https://api.github.com').replace(/\/+$/, ''), token, owner, repo, issueNumber };
}

interface IssueComment {
  id: number;
  body?: string | null;
  html_url?: string;
}

function headers(t: GitHubTarget): Record<string, string> {
  return {
    accept: 'application/vnd.github+json',
    authorization: `Bearer ${t.token}`,
    'x-github-api-version': '2022-11-28',
    'user-agent': 'kms-sync',
  };
}

const repoPath = (t: GitHubTarget) => `${t.apiUrl}/repos/${encodeURIComponent(t.owner)}/${encodeURIComponent(t.repo)}`;

/** The first comment of the pull request whose body carries the marker. */
export async function findGitHubComment(t: GitHubTarget, marker: string): Promise<IssueComment | undefined> {
  let url: string | undefined = `${repoPath(t)}/issues/${t.issueNumber}/comments?per_page=100&page=1`;
  for (let page = 0; url && page < MAX_COMMENT_PAGES; page++) {
    const res = await callJson<IssueComment[]>({ service: 'GitHub API', method: 'GET', url, headers: headers(t) });
    const found = (Array.isArray(res.body) ? res.body : []).find((c) => typeof c.body === 'string' && c.body.includes(marker));
    if (found) return found;
    const next = nextLink(header(res.headers, 'link'));
    // Only follow links to the same API (a Link header must not send the token elsewhere).
    url = next && new URL(next).origin === new URL(t.apiUrl).origin ? next : undefined;
  }
  return undefined;
}

export async function upsertGitHubComment(t: GitHubTarget, marker: string, body: string): Promise<UpsertResult> {
  if (!body.includes(marker)) throw new PublishError('internal: the comment body must carry its marker');
  const existing = await findGitHubComment(t, marker);
  if (existing) {
    const res = await callJson<IssueComment>({
      service: 'GitHub API', method: 'PATCH', url: `${repoPath(t)}/issues/comments/${existing.id}`, headers: headers(t), body: { body },
    });
    return { action: 'updated', id: res.body.id ?? existing.id, ...(res.body.html_url ? { url: res.body.html_url } : {}) };
  }
  const res = await callJson<IssueComment>({
    service: 'GitHub API', method: 'POST', url: `${repoPath(t)}/issues/${t.issueNumber}/comments`, headers: headers(t), body: { body },
  });
  return { action: 'created', id: res.body.id, ...(res.body.html_url ? { url: res.body.html_url } : {}) };
}
