// Posts a report on the current pull request and updates that same comment on the next run. The
// comment is found by its hidden marker (`<!-- kms-sync:… -->`), across every page of comments,
// and only among the comments written by the identity of the token: anyone can write the marker
// into a comment of their own, and the comment kms-sync edits must be one only it could have
// written (issue 26). The identity is the token's user (GET /user, for a personal access token), or
// the Actions bot `github-actions[bot]` for an installation token (GITHUB_TOKEN, `ghs_…`, which
// GET /user refuses); KMS_SYNC_COMMENT_AUTHOR names it for another GitHub App's token. When it
// cannot be known, no comment is edited: a new one is posted.
//   GET   /user                                                  (the token's user; 403 for installation tokens)
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
  /** The login the token writes as, when known without asking (see above). */
  author?: string;
  /** Running in GitHub Actions: an installation token there is the Actions bot's. */
  actions?: boolean;
}

/** The login of the Actions bot that GITHUB_TOKEN writes as. */
export const ACTIONS_BOT = 'github-actions[bot]';

/** At most this many pages of 100 comments are searched for the marker. */
export const MAX_COMMENT_PAGES = 50;

/**
 * From the Actions environment: GITHUB_TOKEN (or GH_TOKEN), GITHUB_REPOSITORY, GITHUB_API_URL and
 * the pull-request number of the event in GITHUB_EVENT_PATH (KMS_SYNC_PR_NUMBER overrides it).
 */
export function githubTargetFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  read: (p: string) => string = (p) => readFileSync(p, 'utf8'),
): GitHubTarget {
  const token = env.GITHUB_TOKEN || env.GH_TOKEN;
  if (!token)
    throw new PublishError('--comment github needs GITHUB_TOKEN (with pull-requests: write) in the environment');
  const repository = env.GITHUB_REPOSITORY ?? '';
  const [owner, repo, ...rest] = repository.split('/');
  if (!owner || !repo || rest.length)
    throw new PublishError(
      `--comment github needs GITHUB_REPOSITORY as owner/repo (got ${JSON.stringify(repository)})`,
    );
  let issueNumber = env.KMS_SYNC_PR_NUMBER ? Number(env.KMS_SYNC_PR_NUMBER) : NaN;
  if (!Number.isInteger(issueNumber) && env.GITHUB_EVENT_PATH) {
    let event: {
      pull_request?: { number?: number };
      issue?: { number?: number; pull_request?: unknown };
      number?: number;
    };
    try {
      event = JSON.parse(read(env.GITHUB_EVENT_PATH)) as typeof event;
    } catch (e) {
      throw new PublishError(`cannot read the Actions event file GITHUB_EVENT_PATH (${(e as Error).message})`);
    }
    issueNumber = event.pull_request?.number ?? (event.issue?.pull_request ? event.issue.number : undefined) ?? NaN;
  }
  if (!Number.isInteger(issueNumber) || issueNumber <= 0) {
    throw new PublishError(
      '--comment github runs on pull_request events (no pull request in GITHUB_EVENT_PATH; set KMS_SYNC_PR_NUMBER to name one)',
    );
  }
  return {
    apiUrl: (env.GITHUB_API_URL || 'https://api.github.com').replace(/\/+$/, ''),
    token,
    owner,
    repo,
    issueNumber,
    ...(env.KMS_SYNC_COMMENT_AUTHOR ? { author: env.KMS_SYNC_COMMENT_AUTHOR } : {}),
    ...(env.GITHUB_ACTIONS === 'true' ? { actions: true } : {}),
  };
}

interface IssueComment {
  id: number;
  body?: string | null;
  html_url?: string;
  user?: { login?: string } | null;
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

/** The login the token writes comments as, or undefined when it cannot be known. */
export async function githubTokenLogin(t: GitHubTarget): Promise<string | undefined> {
  if (t.author) return t.author;
  // An installation token (GITHUB_TOKEN): GET /user answers 403 "Resource not accessible by integration".
  if (t.token.startsWith('ghs_')) return t.actions ? ACTIONS_BOT : undefined;
  try {
    const res = await callJson<{ login?: unknown }>({
      service: 'GitHub API',
      method: 'GET',
      url: `${t.apiUrl}/user`,
      headers: headers(t),
    });
    return typeof res.body?.login === 'string' && res.body.login ? res.body.login : undefined;
  } catch (e) {
    if (e instanceof PublishError && (e.status === 401 || e.status === 403 || e.status === 404))
      return t.actions ? ACTIONS_BOT : undefined;
    throw e;
  }
}

/**
 * The first comment of the pull request whose body carries the marker and that the token's own
 * identity wrote (asked only once a marked comment is found). A marked comment by anyone else is
 * passed over.
 */
export async function findGitHubComment(t: GitHubTarget, marker: string): Promise<IssueComment | undefined> {
  let url: string | undefined = `${repoPath(t)}/issues/${t.issueNumber}/comments?per_page=100&page=1`;
  let login: Promise<string | undefined> | undefined;
  for (let page = 0; url && page < MAX_COMMENT_PAGES; page++) {
    const res = await callJson<IssueComment[]>({ service: 'GitHub API', method: 'GET', url, headers: headers(t) });
    for (const c of Array.isArray(res.body) ? res.body : []) {
      if (typeof c.body !== 'string' || !c.body.includes(marker)) continue;
      const me = await (login ??= githubTokenLogin(t));
      if (me === undefined) return undefined;
      if (c.user?.login === me) return c;
    }
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
      service: 'GitHub API',
      method: 'PATCH',
      url: `${repoPath(t)}/issues/comments/${existing.id}`,
      headers: headers(t),
      body: { body },
    });
    return {
      action: 'updated',
      id: res.body.id ?? existing.id,
      ...(res.body.html_url ? { url: res.body.html_url } : {}),
    };
  }
  const res = await callJson<IssueComment>({
    service: 'GitHub API',
    method: 'POST',
    url: `${repoPath(t)}/issues/${t.issueNumber}/comments`,
    headers: headers(t),
    body: { body },
  });
  return { action: 'created', id: res.body.id, ...(res.body.html_url ? { url: res.body.html_url } : {}) };
}
