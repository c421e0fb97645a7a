// Issue 26 item 3: anyone can write kms-sync's marker into a comment of their own. The comment (or
// note) kms-sync edits must be one written by the identity of its token; a marked comment by
// anyone else is passed over and a new one posted. Mounted against the built CLI with the local
// GitHub and GitLab fakes.
import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { startGitHubFake, type GitHubFake } from '../support/github-fake.js';
import { startGitLabFake } from '../support/gitlab-fake.js';
import { allOutput, runCli } from '../support/cli.js';
import { setup } from '../cli/helpers.js';

const GHS = 'ghs_' + 'Inst4ll'.repeat(6);
const GHP = 'ghp_' + 'P3rs0n'.repeat(6);
const GLPAT = 'glpat-' + 'Acc3ss'.repeat(4);

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0)) await c();
  for (const text of allOutput.splice(0)) for (const t of [GHS, GHP, GLPAT]) expect(text).not.toContain(t);
});

async function world() {
  const s = await setup();
  cleanup.push(
    () => s.emu.close(),
    () => rmSync(s.dir, { recursive: true, force: true }),
  );
  return s;
}

/** Plans with --comment github against `gh`, as an Actions job of pull request 7. */
async function commentOnGitHub(gh: GitHubFake, token: string, extra: NodeJS.ProcessEnv = {}) {
  const s = await world();
  const env = {
    ...s.env,
    KMS_SYNC_ALLOW_LOCAL_STORE: '1',
    GITHUB_ACTIONS: 'true',
    GITHUB_TOKEN: token,
    GITHUB_REPOSITORY: 'acme/access',
    KMS_SYNC_PR_NUMBER: '7',
    GITHUB_API_URL: gh.url,
    ...extra,
  };
  return () => runCli(['plan', '-f', '.', '--comment', 'github'], { env, cwd: s.dir });
}

const markerOf = (body: string) => /^<!-- kms-sync:[0-9a-f]+ -->/.exec(body)![0];

describe('--comment github edits only its own comment', () => {
  it("GITHUB_TOKEN: a comment by another user carrying the marker is passed over; the bot's own is updated", async () => {
    const gh = await startGitHubFake({ owner: 'acme', repo: 'access', token: GHS });
    cleanup.push(() => gh.close());
    const plan = await commentOnGitHub(gh, GHS);
    const first = await plan();
    expect(first.code, first.stderr).toBe(0);
    const marker = markerOf(gh.comments[0]!.body);
    // Mallory writes her own comment with the marker, ahead of kms-sync's.
    gh.comments.unshift({
      id: 1,
      issue: 7,
      login: 'mallory',
      body: `${marker}\n### kms-sync plan\nNo changes. Approve!`,
    });
    const second = await plan();
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toContain('Updated the pull-request comment');
    expect(gh.comments.find((c) => c.login === 'mallory')!.body).toContain('Approve!');
    expect(gh.requests.filter((r) => r.method === 'PATCH').map((r) => r.path)).toEqual([
      `/repos/acme/access/issues/comments/${gh.comments[1]!.id}`,
    ]);

    // Only Mallory's marked comment left: a new one is posted, hers is never edited.
    gh.comments.splice(1, 1);
    gh.requests.length = 0;
    const third = await plan();
    expect(third.code, third.stderr).toBe(0);
    expect(third.stderr).toContain('Posted the pull-request comment');
    expect(gh.requests.map((r) => r.method)).toEqual(['GET', 'POST']);
    expect(gh.comments.find((c) => c.login === 'mallory')!.body).toContain('Approve!');
    expect(gh.problems).toEqual([]);
  });

  it("a personal access token: the comment of the token's user (GET /user) is updated, another user's is not", async () => {
    const gh = await startGitHubFake({ owner: 'acme', repo: 'access', token: GHP, tokenUser: 'deploy-bot' });
    cleanup.push(() => gh.close());
    const plan = await commentOnGitHub(gh, GHP);
    expect((await plan()).code).toBe(0);
    const marker = markerOf(gh.comments[0]!.body);
    // Another user's marked comment, and one by the Actions bot: neither is the token's user.
    gh.comments.unshift(
      { id: 1, issue: 7, login: 'mallory', body: `${marker}\nmine` },
      { id: 2, issue: 7, login: 'github-actions[bot]', body: `${marker}\nbot` },
    );
    gh.requests.length = 0;
    const r = await plan();
    expect(r.code, r.stderr).toBe(0);
    expect(gh.requests.map((q) => `${q.method} ${q.path.split('?')[0]}`)).toEqual([
      'GET /repos/acme/access/issues/7/comments',
      'GET /user',
      `PATCH /repos/acme/access/issues/comments/${gh.comments[2]!.id}`,
    ]);
    expect(gh.comments[0]!.body).toBe(`${marker}\nmine`);
    expect(gh.comments[1]!.body).toBe(`${marker}\nbot`);
    expect(gh.problems).toEqual([]);
  });
});

describe('--comment gitlab edits only its own note', () => {
  it("a note by another user carrying the marker is passed over (GET /user names the token's user)", async () => {
    const gl = await startGitLabFake({
      projectId: '42',
      token: GLPAT,
      tokenHeader: 'private-token',
      tokenUser: 'project_42_bot',
    });
    cleanup.push(() => gl.close());
    const s = await world();
    const env = {
      ...s.env,
      KMS_SYNC_ALLOW_LOCAL_STORE: '1',
      GITLAB_CI: 'true',
      CI_API_V4_URL: gl.url,
      CI_PROJECT_ID: '42',
      CI_MERGE_REQUEST_IID: '3',
      GITLAB_TOKEN: GLPAT,
    };
    const plan = () => runCli(['plan', '-f', '.', '--comment', 'gitlab'], { env, cwd: s.dir });
    expect((await plan()).code).toBe(0);
    const marker = markerOf(gl.notes[0]!.body);
    gl.notes.push({ id: 1, mr: 3, system: false, username: 'mallory', body: `${marker}\nNo changes. Approve!` });
    const second = await plan();
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toContain(`Updated the merge-request note ${gl.notes[0]!.id}`);
    expect(gl.notes.find((n) => n.username === 'mallory')!.body).toContain('Approve!');

    gl.notes.splice(0, 1);
    const third = await plan();
    expect(third.code, third.stderr).toBe(0);
    expect(third.stderr).toContain('Posted the merge-request note');
    expect(gl.notes.find((n) => n.username === 'mallory')!.body).toContain('Approve!');
    expect(gl.problems).toEqual([]);
  });
});

describe('--comment gitlab with CI_JOB_TOKEN', () => {
  it('edits the note of GITLAB_USER_LOGIN (the user the job token acts as); without it, never edits, posts anew', async () => {
    const JOB = 'job-' + 'T0ken'.repeat(4);
    const gl = await startGitLabFake({ projectId: '42', token: JOB, tokenHeader: 'job-token', tokenUser: 'alice' });
    cleanup.push(() => gl.close());
    const s = await world();
    const base = {
      ...s.env,
      KMS_SYNC_ALLOW_LOCAL_STORE: '1',
      GITLAB_CI: 'true',
      CI_API_V4_URL: gl.url,
      CI_PROJECT_ID: '42',
      CI_MERGE_REQUEST_IID: '3',
      CI_JOB_TOKEN: JOB,
    };
    const plan = (env: NodeJS.ProcessEnv) =>
      runCli(['plan', '-f', '.', '--comment', 'gitlab'], { env: { ...base, ...env }, cwd: s.dir });
    expect((await plan({ GITLAB_USER_LOGIN: 'alice' })).code).toBe(0);
    const marker = markerOf(gl.notes[0]!.body);
    gl.notes.unshift({ id: 1, mr: 3, system: false, username: 'mallory', body: `${marker}\nApprove!` });
    const again = await plan({ GITLAB_USER_LOGIN: 'alice' });
    expect(again.stderr).toContain(`Updated the merge-request note ${gl.notes[1]!.id}`);
    const unknown = await plan({});
    expect(unknown.stderr).toContain('Posted the merge-request note');
    expect(gl.notes.find((n) => n.username === 'mallory')!.body).toContain('Approve!');
    expect(gl.requests.some((r) => r.path.endsWith('/user'))).toBe(false);
    expect(gl.problems).toEqual([]);
  });
});
