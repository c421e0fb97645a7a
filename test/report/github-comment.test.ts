// `kms-sync plan --comment github` over HTTP: the built CLI against the emulator and a local
// GitHub stand-in that checks every request against GitHub's published REST description. The
// first run posts the report; the next run finds it by its hidden marker (on the second page of
// comments) and updates it in place; another environment set gets its own comment.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { allOutput, RAW_KEY_PATTERN, runCli, workspace } from '../support/cli.js';
import { githubDescription, startGitHubFake, type GitHubFake } from '../support/github-fake.js';
import { OpenApiChecker } from '../support/openapi.js';
import { githubTargetFromEnv } from '../../src/report/publish/github.js';

const API_KEY = 'sk_test_ghcomment0123456';
const TOKEN = 'ghs_' + 'T0k3n'.repeat(8);

const config = `apiVersion: kms-sync/v1
projects:
  - slug: shop
    name: Shop
    environments:
      - type: production
        url: https://api.shop.example
        templates:
          - { name: bronze, rateLimitDay: 1000, maxClients: 50 }
        clients:
          - name: globex
            template: bronze
            keys:
              - { name: primary }
      - type: staging
        url: https://staging.shop.example
`;

let emu: RunningEmulator;
let gh: GitHubFake;
let dir: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  // 150 comments by others on pull request 7, so a new comment lands on the second page.
  gh = await startGitHubFake({
    owner: 'acme',
    repo: 'access',
    token: TOKEN,
    comments: Array.from({ length: 150 }, (_, i) => ({ id: i + 1, issue: 7, body: `LGTM ${i}`, login: 'octocat' })),
  });
  dir = workspace({
    'config/shop.yaml': config,
    'event.json': JSON.stringify({ action: 'synchronize', number: 7, pull_request: { number: 7 } }),
  });
  env = {
    KMS_API_URL: emu.url,
    KMS_API_KEY: API_KEY,
    SOPS_AGE_KEY_FILE: path.join(dir, 'age', 'keys.txt'),
    KMS_SYNC_ALLOW_LOCAL_STORE: '1',
    GITHUB_ACTIONS: 'true',
    GITHUB_TOKEN: TOKEN,
    GITHUB_REPOSITORY: 'acme/access',
    GITHUB_EVENT_PATH: path.join(dir, 'event.json'),
    GITHUB_API_URL: gh.url,
    GITHUB_STEP_SUMMARY: path.join(dir, 'summary.md'),
  };
});

afterAll(async () => {
  await gh?.close();
  await emu?.close();
  for (const text of allOutput) {
    expect(text).not.toMatch(RAW_KEY_PATTERN);
    expect(text).not.toContain(TOKEN);
  }
});

const mine = () => gh.comments.filter((c) => c.login === 'github-actions[bot]');

describe('plan --comment github', () => {
  it('uses the trimmed GitHub description of exactly the routes it calls', () => {
    const doc = githubDescription();
    expect(Object.keys(doc.paths).sort()).toEqual([
      '/repos/{owner}/{repo}/issues/comments/{comment_id}',
      '/repos/{owner}/{repo}/issues/{issue_number}/comments',
      '/user',
    ]);
    expect(doc.components.schemas['issue-comment']).toBeDefined();
  });

  it('the request checker rejects what the description does not allow', () => {
    const checker = new OpenApiChecker(githubDescription());
    const json = { 'content-type': 'application/json' };
    const u = (p: string) => new URL(`http://h${p}`);
    expect(checker.check('POST', u('/repos/a/b/issues/7/comments'), json, '{"body":"x"}').problems).toEqual([]);
    expect(checker.check('POST', u('/repos/a/b/issues/7/comments'), json, '{"text":"x"}').problems.join()).toContain(
      "must have required property 'body'",
    );
    expect(
      checker.check('POST', u('/repos/a/b/issues/seven/comments'), json, '{"body":"x"}').problems.join(),
    ).toContain('issue_number: "seven" is not an integer');
    expect(checker.check('GET', u('/repos/a/b/issues/7/comments?per_page=100&sort=asc'), {}, '').problems).toEqual([
      'query parameter sort is not in the description',
    ]);
    expect(checker.check('PUT', u('/repos/a/b/issues/comments/5'), json, '{"body":"x"}').problems.join()).toContain(
      'no such operation',
    );
    expect(checker.check('PATCH', u('/repos/a/b/issues/comments/5'), {}, '{"body":"x"}').problems.join()).toContain(
      'content-type must be application/json',
    );
  });

  it('posts the report on the pull request after looking for its marker on every page', async () => {
    const r = await runCli(['plan', '-f', 'config', '--comment', 'github'], { env, cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('Plan: 5 to create'); // the terminal still gets the text plan
    expect(r.stderr).toContain(
      'Posted the pull-request comment https://github.com/acme/access/pull/7#issuecomment-1000',
    );
    expect(gh.problems).toEqual([]);
    expect(gh.requests.map((q) => `${q.method} ${q.path}`)).toEqual([
      'GET /repos/acme/access/issues/7/comments?per_page=100&page=1',
      'GET /repos/acme/access/issues/7/comments?per_page=100&page=2',
      'POST /repos/acme/access/issues/7/comments',
    ]);
    const [c] = mine();
    expect(c!.body).toMatch(/^<!-- kms-sync:[0-9a-f]{16} -->\n/);
    expect(c!.body).toContain('### kms-sync plan');
    expect(c!.body).toContain('| <code>shop-production</code> | 3 | 0 | 0 | 0 | 0 | 0 |');
    expect(c!.body).toContain('| **Total** | 5 | 0 | 0 | 0 | 0 | 0 |');
    // In Actions, the project key is registered as a secret to mask (on stderr; stdout stays clean).
    expect(r.stderr.split('\n')).toContain(`::add-mask::${API_KEY}`);
    expect(r.stdout).not.toContain('::add-mask::');
    expect(readFileSync(env.GITHUB_STEP_SUMMARY!, 'utf8')).toContain('### kms-sync plan');
  });

  it('updates the same comment in place on the next run, also when the pull request adds a file', async () => {
    gh.requests.length = 0;
    writeFileSync(
      path.join(dir, 'config', 'endpoints.yaml'),
      'apiVersion: kms-sync/v1\nprojects:\n  - slug: shop\n    environments:\n      - type: production\n        endpoints:\n          - { method: GET, path: /v1/orders }\n',
    );
    const r = await runCli(['plan', '-f', 'config', '--comment', 'github'], { env, cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(
      'Updated the pull-request comment https://github.com/acme/access/pull/7#issuecomment-1000',
    );
    expect(gh.problems).toEqual([]);
    expect(gh.requests.map((q) => `${q.method} ${q.path}`)).toEqual([
      'GET /repos/acme/access/issues/7/comments?per_page=100&page=1',
      'GET /repos/acme/access/issues/7/comments?per_page=100&page=2',
      'PATCH /repos/acme/access/issues/comments/1000',
    ]);
    expect(mine()).toHaveLength(1);
    expect(mine()[0]!.body).toContain('| **Total** | 6 | 0 | 0 | 0 | 0 | 0 |');
    expect(readFileSync(env.GITHUB_STEP_SUMMARY!, 'utf8').split('### kms-sync plan')).toHaveLength(3);
  });

  it('keeps a separate comment per environment set', async () => {
    gh.requests.length = 0;
    const r = await runCli(['plan', '-f', 'config', '--env', 'shop-staging', '--comment', 'github'], { env, cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    expect(gh.requests.at(-1)!.method).toBe('POST');
    expect(mine()).toHaveLength(2);
    expect(mine()[0]!.body.split('\n')[0]).not.toBe(mine()[1]!.body.split('\n')[0]);
    expect(gh.problems).toEqual([]);
  });

  it('fails with exit 1 and a clear message, never the token, when GitHub refuses', async () => {
    gh.failNext('PATCH', 403);
    const r = await runCli(['plan', '-f', 'config', '--comment', 'github'], { env, cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      'could not publish the report: GitHub API PATCH /repos/acme/access/issues/comments/1000 failed with 403: Resource not accessible by integration',
    );
  });

  it('reads the pull request from the Actions context, and refuses events without one', () => {
    const base = { GITHUB_TOKEN: TOKEN, GITHUB_REPOSITORY: 'acme/access', GITHUB_EVENT_PATH: '/event.json' };
    const from = (event: unknown, extra: NodeJS.ProcessEnv = {}) =>
      githubTargetFromEnv({ ...base, ...extra }, () => JSON.stringify(event));
    expect(from({ pull_request: { number: 7 } })).toEqual({
      apiUrl: 'https://api.github.com',
      token: TOKEN,
      owner: 'acme',
      repo: 'access',
      issueNumber: 7,
    });
    expect(from({ issue: { number: 9, pull_request: {} } }).issueNumber).toBe(9);
    expect(
      from({ schedule: '17 6 * * *' }, { KMS_SYNC_PR_NUMBER: '12', GITHUB_API_URL: 'https://ghe.example/api/v3/' }),
    ).toMatchObject({ issueNumber: 12, apiUrl: 'https://ghe.example/api/v3' });
    expect(() => from({ schedule: '17 6 * * *' })).toThrow('--comment github runs on pull_request events');
    expect(() => from({ issue: { number: 9 } })).toThrow('--comment github runs on pull_request events');
    expect(() => githubTargetFromEnv({ ...base, GITHUB_TOKEN: '' }, () => '{}')).toThrow('needs GITHUB_TOKEN');
    expect(() =>
      githubTargetFromEnv(base, () => {
        throw new Error('ENOENT');
      }),
    ).toThrow('cannot read the Actions event file');
  });
});
