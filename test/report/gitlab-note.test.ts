// `kms-sync drift --comment gitlab` and `plan --comment gitlab` over HTTP: the built CLI against the
// emulator and a local GitLab stand-in that checks requests against the documented Notes API.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { allOutput, RAW_KEY_PATTERN, runCli, workspace } from '../support/cli.js';
import { startGitLabFake, type GitLabFake } from '../support/gitlab-fake.js';
import { gitlabTargetFromEnv } from '../../src/report/publish/gitlab.js';

// A fake live-mode project key for the emulator, assembled at run time so secret scanners do not
// mistake the fixture for a leaked credential.
const API_KEY = ['sk', 'live', 'glnote0123456789'].join('_');
const TOKEN = 'glpat-' + 'x1Y2z3'.repeat(4);

const config = `apiVersion: kms-sync/v1
projects:
  - slug: shop
    name: Shop
    environments:
      - type: production
        url: https://api.shop.example
        templates:
          - { name: bronze, rateLimitDay: 1000, maxClients: 50 }
`;

let emu: RunningEmulator;
let gl: GitLabFake;
let dir: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  // 120 notes on merge request 3, including system notes (one quoting a marker-like text).
  gl = await startGitLabFake({
    projectId: '42',
    token: TOKEN,
    tokenHeader: 'private-token',
    notes: Array.from({ length: 120 }, (_, i) => ({
      id: i + 1,
      mr: 3,
      body: i === 5 ? 'changed the description <!-- kms-sync:' : `note ${i}`,
      system: i % 10 === 5,
      username: 'dev',
    })),
  });
  dir = workspace({ 'config/shop.yaml': config });
  env = {
    KMS_API_URL: emu.url,
    KMS_API_KEY: API_KEY,
    SOPS_AGE_KEY_FILE: path.join(dir, 'age', 'keys.txt'),
    KMS_SYNC_ALLOW_LOCAL_STORE: '1',
    GITLAB_CI: 'true',
    CI_API_V4_URL: gl.url,
    CI_PROJECT_ID: '42',
    CI_MERGE_REQUEST_IID: '3',
    GITLAB_TOKEN: TOKEN,
  };
});

afterAll(async () => {
  await gl?.close();
  await emu?.close();
  for (const text of allOutput) {
    expect(text).not.toMatch(RAW_KEY_PATTERN);
    expect(text).not.toContain(TOKEN);
  }
});

const mine = () => gl.notes.filter((n) => n.username === 'project_42_bot');

describe('--comment gitlab', () => {
  it('posts the drift report as a merge-request note, then updates it in place', async () => {
    const first = await runCli(['drift', '-f', 'config', '--comment', 'gitlab'], { env, cwd: dir });
    expect(first.code, first.stderr).toBe(2); // the environment does not exist yet: drift
    expect(first.stderr).toContain('Posted the merge-request note 500');
    expect(gl.problems).toEqual([]);
    expect(gl.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
      'GET /api/v4/projects/42/merge_requests/3/notes?sort=asc&order_by=created_at&per_page=100&page=1',
      'GET /api/v4/projects/42/merge_requests/3/notes?sort=asc&order_by=created_at&per_page=100&page=2',
      'POST /api/v4/projects/42/merge_requests/3/notes',
    ]);
    expect(mine()).toHaveLength(1);
    expect(mine()[0]!.body).toContain('### kms-sync drift');
    expect(mine()[0]!.body).toContain('<code>sk_live_</code> (live)');
    expect(mine()[0]!.body).toContain('> [!CAUTION]');

    gl.requests.length = 0;
    const again = await runCli(['drift', '-f', 'config', '--comment', 'gitlab'], { env, cwd: dir });
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('Updated the merge-request note 500');
    expect(gl.requests.map((r) => `${r.method} ${r.path.split('?')[0]}`)).toEqual([
      'GET /api/v4/projects/42/merge_requests/3/notes',
      'GET /api/v4/projects/42/merge_requests/3/notes',
      'GET /api/v4/user',
      'PUT /api/v4/projects/42/merge_requests/3/notes/500',
    ]);
    expect(mine()).toHaveLength(1);
    expect(gl.problems).toEqual([]);
  });

  it('plan reports get their own note', async () => {
    gl.requests.length = 0;
    const r = await runCli(['plan', '-f', 'config', '--comment', 'gitlab', '--format', 'markdown'], { env, cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^<!-- kms-sync:[0-9a-f]{16} -->/);
    expect(gl.requests.at(-1)!.method).toBe('POST');
    expect(mine()).toHaveLength(2);
    expect(mine()[1]!.body).toBe(r.stdout);
    expect(gl.problems).toEqual([]);
  });

  it('reads GitLab CI variables, preferring GITLAB_TOKEN, and needs a merge-request pipeline', () => {
    const ci = {
      CI_API_V4_URL: 'https://gitlab.example/api/v4/',
      CI_PROJECT_ID: '42',
      CI_MERGE_REQUEST_IID: '3',
      CI_JOB_TOKEN: 'job',
    };
    expect(gitlabTargetFromEnv({ ...ci, GITLAB_TOKEN: TOKEN })).toEqual({
      apiUrl: 'https://gitlab.example/api/v4',
      projectId: '42',
      mergeRequestIid: 3,
      token: TOKEN,
      tokenHeader: 'PRIVATE-TOKEN',
    });
    expect(gitlabTargetFromEnv(ci)).toMatchObject({ token: 'job', tokenHeader: 'JOB-TOKEN' });
    expect(() => gitlabTargetFromEnv({ ...ci, CI_MERGE_REQUEST_IID: '' })).toThrow(
      '--comment gitlab runs in merge-request pipelines',
    );
    expect(() => gitlabTargetFromEnv({ ...ci, CI_JOB_TOKEN: '' })).toThrow('needs GITLAB_TOKEN');
  });
});
