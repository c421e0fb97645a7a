// A local stand-in for the GitHub REST API's issue-comment routes. Every request is checked against
// GitHub's published description (@octokit/openapi, trimmed to the routes used), and so is every
// response it sends; problems are collected for the test to assert on.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { OpenApiChecker, trimOpenApi } from './openapi.js';
import { repoRoot } from './cli.js';

export const GITHUB_ROUTES = [
  { path: '/repos/{owner}/{repo}/issues/{issue_number}/comments', method: 'get' },
  { path: '/repos/{owner}/{repo}/issues/{issue_number}/comments', method: 'post' },
  { path: '/repos/{owner}/{repo}/issues/comments/{comment_id}', method: 'patch' },
  { path: '/user', method: 'get' },
];

let trimmed: unknown;
/** GitHub's description, trimmed to GITHUB_ROUTES (parsed once per test file). */
export function githubDescription(): any {
  trimmed ??= trimOpenApi(
    JSON.parse(
      readFileSync(
        path.join(repoRoot, 'node_modules', '@octokit', 'openapi', 'generated', 'api.github.com.json'),
        'utf8',
      ),
    ),
    GITHUB_ROUTES,
  );
  return trimmed;
}

export interface FakeComment {
  id: number;
  issue: number;
  body: string;
  login: string;
}

export interface LoggedRequest {
  method: string;
  path: string;
  template: string;
  body: unknown;
}

export interface GitHubFake {
  url: string;
  token: string;
  comments: FakeComment[];
  requests: LoggedRequest[];
  problems: string[];
  /** Answer the next request matching `method` with this status. */
  failNext(method: string, status: number): void;
  close(): Promise<void>;
}

/**
 * `tokenUser`: the login of the token's user (a personal access token: GET /user answers it, and
 * comments are posted as it); without it the token is an installation token (GITHUB_TOKEN): GET
 * /user answers 403 and comments are posted as github-actions[bot].
 */
export async function startGitHubFake(o: {
  owner: string;
  repo: string;
  token: string;
  comments?: FakeComment[];
  tokenUser?: string;
}): Promise<GitHubFake> {
  const checker = new OpenApiChecker(githubDescription());
  const comments = [...(o.comments ?? [])];
  const requests: LoggedRequest[] = [];
  const problems: string[] = [];
  const failures: { method: string; status: number }[] = [];
  let nextId = 1000;
  let base = '';
  const view = (c: FakeComment) => ({
    id: c.id,
    node_id: `IC_${c.id}`,
    url: `${base}/repos/${o.owner}/${o.repo}/issues/comments/${c.id}`,
    html_url: `https://github.com/${o.owner}/${o.repo}/pull/${c.issue}#issuecomment-${c.id}`,
    body: c.body,
    user: {
      login: c.login,
      id: 1,
      node_id: 'U_1',
      avatar_url: 'https://avatars.example/u/1',
      gravatar_id: null,
      url: `${base}/users/${encodeURIComponent(c.login)}`,
      html_url: `https://github.com/${encodeURIComponent(c.login)}`,
      followers_url: 'https://api.example/f',
      following_url: 'https://api.example/f{/other_user}',
      gists_url: 'https://api.example/g{/gist_id}',
      starred_url: 'https://api.example/s{/owner}{/repo}',
      subscriptions_url: 'https://api.example/s',
      organizations_url: 'https://api.example/o',
      repos_url: 'https://api.example/r',
      events_url: 'https://api.example/e{/privacy}',
      received_events_url: 'https://api.example/re',
      type: c.login.endsWith('[bot]') ? 'Bot' : 'User',
      site_admin: false,
    },
    created_at: '2026-01-01T00:00:00Z',
    updated_at: '2026-01-01T00:00:00Z',
    issue_url: `${base}/repos/${o.owner}/${o.repo}/issues/${c.issue}`,
    author_association: 'NONE',
  });

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const url = new URL(req.url ?? '/', base);
      const send = (
        status: number,
        body: unknown,
        headers: Record<string, string> = {},
        op?: Parameters<OpenApiChecker['checkResponse']>[0],
      ) => {
        if (op && status < 400) problems.push(...checker.checkResponse(op, status, body));
        res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
        res.end(JSON.stringify(body));
      };
      const { problems: p, request, op } = checker.check(req.method ?? 'GET', url, req.headers, raw);
      problems.push(...p.map((x) => `${req.method} ${url.pathname}${url.search}: ${x}`));
      if (req.headers.authorization !== `Bearer ${o.token}`)
        problems.push(`${req.method} ${url.pathname}: missing or wrong Authorization: Bearer token`);
      if (!req.headers['user-agent'])
        problems.push(`${req.method} ${url.pathname}: GitHub requires a User-Agent header`);
      if (!String(req.headers.accept ?? '').includes('application/vnd.github+json'))
        problems.push(`${req.method} ${url.pathname}: Accept should be application/vnd.github+json`);
      if (!request || !op)
        return send(404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' });
      requests.push({
        method: request.method,
        path: url.pathname + url.search,
        template: request.template,
        body: request.body,
      });
      const fail = failures.findIndex((f) => f.method === request.method);
      if (fail >= 0) {
        const [f] = failures.splice(fail, 1);
        return send(f!.status, {
          message: 'Resource not accessible by integration',
          documentation_url: 'https://docs.github.com/rest',
          status: String(f!.status),
        });
      }
      if (url.pathname === '/user') {
        if (!o.tokenUser)
          return send(403, {
            message: 'Resource not accessible by integration',
            documentation_url: 'https://docs.github.com/rest',
            status: '403',
          });
        const u = view({ id: 0, issue: 0, body: '', login: o.tokenUser }).user;
        return send(
          200,
          {
            ...u,
            name: null,
            company: null,
            blog: '',
            location: null,
            email: null,
            hireable: null,
            bio: null,
            public_repos: 0,
            public_gists: 0,
            followers: 0,
            following: 0,
            created_at: '2020-01-01T00:00:00Z',
            updated_at: '2020-01-01T00:00:00Z',
          },
          {},
          op,
        );
      }
      if (request.params.owner !== o.owner || request.params.repo !== o.repo)
        return send(404, { message: 'Not Found' });
      if (request.method === 'GET') {
        const issue = Number(request.params.issue_number);
        const perPage = Number(request.query.get('per_page') ?? 30);
        const page = Number(request.query.get('page') ?? 1);
        if (perPage > 100) problems.push(`per_page is at most 100 (got ${perPage})`);
        const all = comments.filter((c) => c.issue === issue);
        const pages = Math.max(1, Math.ceil(all.length / perPage));
        const link: string[] = [];
        const at = (n: number) => `<${base}${url.pathname}?per_page=${perPage}&page=${n}>`;
        if (page < pages) link.push(`${at(page + 1)}; rel="next"`, `${at(pages)}; rel="last"`);
        if (page > 1) link.push(`${at(1)}; rel="first"`, `${at(page - 1)}; rel="prev"`);
        return send(
          200,
          all.slice((page - 1) * perPage, page * perPage).map(view),
          link.length ? { link: link.join(', ') } : {},
          op,
        );
      }
      const body = (request.body as { body: string }).body;
      if (request.method === 'POST') {
        const c = {
          id: nextId++,
          issue: Number(request.params.issue_number),
          body,
          login: o.tokenUser ?? 'github-actions[bot]',
        };
        comments.push(c);
        return send(201, view(c), { location: `${base}/repos/${o.owner}/${o.repo}/issues/comments/${c.id}` }, op);
      }
      const c = comments.find((x) => x.id === Number(request.params.comment_id));
      if (!c) return send(404, { message: 'Not Found' });
      c.body = body;
      return send(200, view(c), {}, op);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: base,
    token: o.token,
    comments,
    requests,
    problems,
    failNext: (method, status) => failures.push({ method, status }),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
