// Posts a report as a merge-request note and updates that same note on the next run, found by its
// hidden marker across every page of notes, among the notes the token's own user wrote (anyone can
// write the marker into a note of their own; issue 26): GET /user for an access token; a job token
// (CI_JOB_TOKEN) writes as the user who started the pipeline, GITLAB_USER_LOGIN. When the user
// cannot be known, no note is edited: a new one is posted. GitLab REST API v4 (Notes API, Users API):
//   GET  /user                                                         (the token's user)
//   GET  /projects/:id/merge_requests/:merge_request_iid/notes          sort, order_by, per_page, page; x-next-page
//   POST /projects/:id/merge_requests/:merge_request_iid/notes          {body}
//   PUT  /projects/:id/merge_requests/:merge_request_iid/notes/:note_id {body}
import { callJson, header, PublishError, type JsonResponse, type UpsertResult } from './http.js';

export interface GitLabTarget {
  apiUrl: string;
  projectId: string;
  mergeRequestIid: number;
  token: string;
  /** PRIVATE-TOKEN for personal/project/group access tokens, JOB-TOKEN for CI_JOB_TOKEN. */
  tokenHeader: 'PRIVATE-TOKEN' | 'JOB-TOKEN';
  /** The username the token writes as, when known without asking (a job token: GITLAB_USER_LOGIN). */
  author?: string;
}

export const MAX_NOTE_PAGES = 50;

/** From GitLab CI: CI_API_V4_URL, CI_PROJECT_ID, CI_MERGE_REQUEST_IID, GITLAB_TOKEN or CI_JOB_TOKEN. */
export function gitlabTargetFromEnv(env: NodeJS.ProcessEnv = process.env): GitLabTarget {
  const apiUrl = env.CI_API_V4_URL || (env.CI_SERVER_URL ? `${env.CI_SERVER_URL.replace(/\/+$/, '')}/api/v4` : '');
  if (!apiUrl) throw new PublishError('--comment gitlab needs CI_API_V4_URL (set by GitLab CI)');
  const projectId = env.CI_PROJECT_ID;
  if (!projectId) throw new PublishError('--comment gitlab needs CI_PROJECT_ID (set by GitLab CI)');
  const iid = Number(env.CI_MERGE_REQUEST_IID);
  if (!Number.isInteger(iid) || iid <= 0) {
    throw new PublishError('--comment gitlab runs in merge-request pipelines (CI_MERGE_REQUEST_IID is not set)');
  }
  const token = env.GITLAB_TOKEN || env.CI_JOB_TOKEN;
  if (!token)
    throw new PublishError(
      '--comment gitlab needs GITLAB_TOKEN (a project access token with the api scope) or CI_JOB_TOKEN',
    );
  const author = env.KMS_SYNC_COMMENT_AUTHOR || (env.GITLAB_TOKEN ? undefined : env.GITLAB_USER_LOGIN);
  return {
    apiUrl: apiUrl.replace(/\/+$/, ''),
    projectId,
    mergeRequestIid: iid,
    token,
    tokenHeader: env.GITLAB_TOKEN ? 'PRIVATE-TOKEN' : 'JOB-TOKEN',
    ...(author ? { author } : {}),
  };
}

interface Note {
  id: number;
  body?: string | null;
  system?: boolean;
  author?: { username?: string } | null;
}

const notesUrl = (t: GitLabTarget) =>
  `${t.apiUrl}/projects/${encodeURIComponent(t.projectId)}/merge_requests/${t.mergeRequestIid}/notes`;
const headers = (t: GitLabTarget) => ({
  [t.tokenHeader]: t.token,
  accept: 'application/json',
  'user-agent': 'kms-sync',
});

/** The username the token writes notes as, or undefined when it cannot be known. */
export async function gitlabTokenUser(t: GitLabTarget): Promise<string | undefined> {
  if (t.author) return t.author;
  if (t.tokenHeader === 'JOB-TOKEN') return undefined;
  try {
    const res = await callJson<{ username?: unknown }>({
      service: 'GitLab API',
      method: 'GET',
      url: `${t.apiUrl}/user`,
      headers: headers(t),
    });
    return typeof res.body?.username === 'string' && res.body.username ? res.body.username : undefined;
  } catch (e) {
    if (e instanceof PublishError && (e.status === 401 || e.status === 403 || e.status === 404)) return undefined;
    throw e;
  }
}

export async function findGitLabNote(t: GitLabTarget, marker: string): Promise<Note | undefined> {
  let page: number | undefined = 1;
  let user: Promise<string | undefined> | undefined;
  for (let n = 0; page && n < MAX_NOTE_PAGES; n++) {
    const res: JsonResponse<Note[]> = await callJson<Note[]>({
      service: 'GitLab API',
      method: 'GET',
      url: `${notesUrl(t)}?sort=asc&order_by=created_at&per_page=100&page=${page}`,
      headers: headers(t),
    });
    for (const x of Array.isArray(res.body) ? res.body : []) {
      if (x.system || typeof x.body !== 'string' || !x.body.includes(marker)) continue;
      const me = await (user ??= gitlabTokenUser(t));
      if (me === undefined) return undefined;
      if (x.author?.username === me) return x;
    }
    const next: number = Number(header(res.headers, 'x-next-page'));
    page = Number.isInteger(next) && next > page ? next : undefined;
  }
  return undefined;
}

export async function upsertGitLabNote(t: GitLabTarget, marker: string, body: string): Promise<UpsertResult> {
  if (!body.includes(marker)) throw new PublishError('internal: the note body must carry its marker');
  const existing = await findGitLabNote(t, marker);
  if (existing) {
    const res = await callJson<Note>({
      service: 'GitLab API',
      method: 'PUT',
      url: `${notesUrl(t)}/${existing.id}`,
      headers: headers(t),
      body: { body },
    });
    return { action: 'updated', id: res.body.id ?? existing.id };
  }
  const res = await callJson<Note>({
    service: 'GitLab API',
    method: 'POST',
    url: notesUrl(t),
    headers: headers(t),
    body: { body },
  });
  return { action: 'created', id: res.body.id };
}
