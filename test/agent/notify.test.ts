// The agent's notifications as a real process against local stand-ins: a commit status on each
// reconciled revision (GitHub's statuses API, each request checked against GitHub's published
// description; GitLab's commit status API) and a Slack-compatible webhook on a failure, new drift
// and keys expiring within 7 days, each once. None carries a raw key or a credential.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { printedSecrets, RAW_KEY, repoRoot, waitFor } from '../crash/lib.js';
import { OpenApiChecker, trimOpenApi } from '../support/openapi.js';
import { agentConfig, API_KEY, fixture, startAgent, until, type Fixture } from './lib.js';
import { patient } from '../support/patience.js';

const ENV = 'agent-production';
const GH_TOKEN = 'ghp_agentnotifytesttoken000000000000000';
const GL_TOKEN = 'glpat-agentnotifytesttoken0000000';

interface Seen {
  method: string;
  path: string;
  headers: Record<string, unknown>;
  body: string;
}

async function stand_in(): Promise<{ url: string; seen: Seen[]; problems: string[]; close: () => Promise<void> }> {
  const doc = trimOpenApi(
    JSON.parse(
      readFileSync(
        path.join(repoRoot, 'node_modules', '@octokit', 'openapi', 'generated', 'api.github.com.json'),
        'utf8',
      ),
    ),
    [{ path: '/repos/{owner}/{repo}/statuses/{sha}', method: 'post' }],
  );
  const checker = new OpenApiChecker(doc);
  const seen: Seen[] = [];
  const problems: string[] = [];
  let base = '';
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const url = new URL(req.url ?? '/', base);
      seen.push({ method: req.method ?? '', path: url.pathname + url.search, headers: req.headers, body });
      if (url.pathname.startsWith('/github/')) {
        const ghUrl = new URL(url.pathname.slice('/github'.length) + url.search, base);
        problems.push(...checker.check(req.method ?? '', ghUrl, req.headers, body).problems);
        if (req.headers.authorization !== `Bearer ${GH_TOKEN}`) problems.push('GitHub: wrong Authorization');
      }
      if (url.pathname.startsWith('/gitlab/') && req.headers['private-token'] !== GL_TOKEN)
        problems.push('GitLab: wrong PRIVATE-TOKEN');
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url: base, seen, problems, close: () => new Promise((r) => server.close(() => r())) };
}

describe('agent notifications', () => {
  let f: Fixture;
  let fake: Awaited<ReturnType<typeof stand_in>>;
  beforeAll(async () => {
    f = await fixture();
    fake = await stand_in();
  });
  afterAll(async () => {
    expect(printedSecrets(f.outputs)).toEqual([]);
    await fake.close();
    await f.cleanup();
  });

  it(
    'GitHub commit statuses per revision, Slack-compatible messages on failure, new drift and expiring keys, once each',
    async () => {
      const good = f.repo.push(
        { 'kms/kms-sync.yaml': agentConfig([{ name: 'alpha', keys: ['{ name: primary, ttl: 5d }'], ip: '' }]) },
        'first',
      );
      const agent = await startAgent(
        f,
        [
          '--path',
          'kms',
          '--interval',
          '1s',
          '--mode',
          'sync',
          '--commit-status',
          'github',
          '--status-repo',
          'acme/kms',
          '--page-url',
          'https://agent.example/',
        ],
        {
          GITHUB_TOKEN: GH_TOKEN,
          GITHUB_API_URL: `${fake.url}/github`,
          KMS_SYNC_NOTIFY_WEBHOOK: `${fake.url}/slack/T000/B000/secretpart`,
        },
      );
      const statuses = () => fake.seen.filter((s) => s.path.startsWith('/github/'));
      const slack = () =>
        fake.seen.filter((s) => s.path.startsWith('/slack/')).map((s) => JSON.parse(s.body).text as string);
      await until(agent, 'the first commit applied', (x) => x.revision.synced === good);
      expect(await waitFor(() => statuses().length >= 1, 10_000)).toBe(true);
      expect(statuses()[0]!.path).toBe(`/github/repos/acme/kms/statuses/${good}`);
      expect(JSON.parse(statuses()[0]!.body)).toMatchObject({
        state: 'success',
        context: 'kms-sync/agent',
        target_url: 'https://agent.example/',
      });
      // The key with a 5-day ttl: one message.
      expect(await waitFor(() => slack().some((t) => t.includes('expire within 7 days')), 10_000)).toBe(true);
      expect(slack().find((t) => t.includes('expire within 7 days'))).toContain(`key.${ENV}/alpha/primary`);

      // Hand-made drift: one message naming it.
      const alpha = (await f.emu.clients(ENV)).find((c) => c.name === 'alpha')!;
      await f.emu.call('PUT', `/client/${alpha.id}?project_env=${ENV}`, { ipWhitelist: ['192.0.2.1/32'] });
      expect(await waitFor(() => slack().some((t) => t.includes('new drift')), 10_000)).toBe(true);
      expect(slack().find((t) => t.includes('new drift'))).toContain(`changed_outside \`client.${ENV}/alpha\``);

      // An invalid commit: a failure status on it and one failure message.
      const bad = f.repo.push(
        {
          'kms/kms-sync.yaml': agentConfig([{ name: 'alpha', keys: ['{ name: primary, ttl: 5d }'], ip: '' }]).replace(
            'maxClients: 1000',
            'maxClients: many',
          ),
        },
        'broken',
      );
      expect(await waitFor(() => statuses().some((s) => s.path.endsWith(bad)), 15_000)).toBe(true);
      expect(JSON.parse(statuses().find((s) => s.path.endsWith(bad))!.body)).toMatchObject({ state: 'failure' });
      // Its error names the file by its path in the repository (not the agent's working directory), within GitHub's 140 characters.
      const description = JSON.parse(statuses().find((s) => s.path.endsWith(bad))!.body).description as string;
      expect(description).toMatch(/^invalid: kms\/kms-sync\.yaml:\d+:\d+: /);
      expect(description.length).toBeLessThanOrEqual(140);
      // The record of the invalid revision carries its own subject, not the last good one's.
      expect((await agent.status()).history.find((h: any) => h.result === 'invalid')).toMatchObject({
        revision: bad,
        subject: 'broken',
      });
      expect(await waitFor(() => slack().some((t) => t.includes(':x:')), 10_000)).toBe(true);
      // Several reconciles later: still one message of each kind, one status per revision and outcome.
      const n = (await agent.status()).reconciles;
      await until(agent, 'three more reconciles', (x) => x.reconciles >= n + 3);
      expect(slack().filter((t) => t.includes(':x:'))).toHaveLength(1);
      expect(slack().filter((t) => t.includes('new drift'))).toHaveLength(1);
      expect(slack().filter((t) => t.includes('expire within 7 days'))).toHaveLength(1);
      expect(statuses().filter((s) => s.path.endsWith(bad))).toHaveLength(1);
      agent.child.kill('SIGTERM');
      expect(await agent.exit).toBe(0);

      expect(fake.problems).toEqual([]);
      for (const s of fake.seen) {
        expect(s.body).not.toMatch(RAW_KEY);
        expect(s.body).not.toContain(API_KEY);
        expect(s.body).not.toContain(GH_TOKEN);
      }
    },
    patient(90_000),
  );

  it(
    'GitLab: a commit status on the reconciled revision, with its token header',
    async () => {
      const rev = f.repo.push(
        {
          'kms/kms-sync.yaml': agentConfig([
            { name: 'alpha', keys: ['{ name: primary, ttl: 5d }'], ip: '' },
            { name: 'beta', keys: ['primary'] },
          ]),
        },
        'fixed',
      );
      const agent = await startAgent(
        f,
        [
          '--path',
          'kms',
          '--interval',
          '1s',
          '--mode',
          'sync',
          '--commit-status',
          'gitlab',
          '--status-repo',
          'acme/kms',
        ],
        {
          GITLAB_TOKEN: GL_TOKEN,
          GITLAB_API_URL: `${fake.url}/gitlab/api/v4`,
        },
      );
      await until(agent, 'the commit applied', (x) => x.revision.synced === rev);
      expect(
        await waitFor(
          () => fake.seen.some((s) => s.path.startsWith(`/gitlab/api/v4/projects/acme%2Fkms/statuses/${rev}?`)),
          10_000,
        ),
      ).toBe(true);
      const q = new URL(`http://x${fake.seen.find((s) => s.path.includes(`/statuses/${rev}?`))!.path}`).searchParams;
      expect(q.get('state')).toBe('success');
      expect(q.get('name')).toBe('kms-sync/agent');
      agent.child.kill('SIGTERM');
      expect(await agent.exit).toBe(0);
      expect(fake.problems).toEqual([]);
    },
    patient(60_000),
  );
});
