// A local stand-in for GitLab's Notes API on merge requests (REST v4), checking each request
// against the documented routes and attributes (docs.gitlab.com/api/notes, "Merge requests"):
//   GET  /projects/:id/merge_requests/:merge_request_iid/notes            sort=asc|desc, order_by=created_at|updated_at, page, per_page (max 100)
//   POST /projects/:id/merge_requests/:merge_request_iid/notes            body (required), internal, created_at, merge_request_diff_head_sha
//   PUT  /projects/:id/merge_requests/:merge_request_iid/notes/:note_id   body (required), confidential
// Authentication (docs.gitlab.com/api/rest/authentication): PRIVATE-TOKEN, JOB-TOKEN or
// Authorization: Bearer. Pagination headers: x-page, x-per-page, x-next-page, x-prev-page, x-total, x-total-pages, link.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

interface Route {
  method: string;
  pattern: RegExp;
  query: Record<string, (v: string) => boolean>;
  body?: { required: string[]; types: Record<string, 'string' | 'boolean'> };
}

const int = (v: string) => /^\d+$/.test(v);
const ROUTES: Route[] = [
  { method: 'GET', pattern: /^\/api\/v4\/user$/, query: {} },
  {
    method: 'GET',
    pattern: /^\/api\/v4\/projects\/([^/]+)\/merge_requests\/(\d+)\/notes$/,
    query: {
      sort: (v) => v === 'asc' || v === 'desc',
      order_by: (v) => v === 'created_at' || v === 'updated_at',
      page: int,
      per_page: (v) => int(v) && Number(v) <= 100,
    },
  },
  {
    method: 'POST',
    pattern: /^\/api\/v4\/projects\/([^/]+)\/merge_requests\/(\d+)\/notes$/,
    query: {},
    body: {
      required: ['body'],
      types: { body: 'string', internal: 'boolean', created_at: 'string', merge_request_diff_head_sha: 'string' },
    },
  },
  {
    method: 'PUT',
    pattern: /^\/api\/v4\/projects\/([^/]+)\/merge_requests\/(\d+)\/notes\/(\d+)$/,
    query: {},
    body: { required: ['body'], types: { body: 'string', confidential: 'boolean' } },
  },
];

export interface FakeNote {
  id: number;
  mr: number;
  body: string;
  system: boolean;
  username: string;
}

export interface GitLabFake {
  url: string;
  notes: FakeNote[];
  requests: { method: string; path: string; auth: string }[];
  problems: string[];
  close(): Promise<void>;
}

/** `tokenUser`: the username GET /user answers for an access token and notes are posted as (default project_42_bot). */
export async function startGitLabFake(o: {
  projectId: string;
  token: string;
  tokenHeader: 'private-token' | 'job-token';
  notes?: FakeNote[];
  tokenUser?: string;
}): Promise<GitLabFake> {
  const notes = [...(o.notes ?? [])];
  const requests: GitLabFake['requests'] = [];
  const problems: string[] = [];
  let nextId = 500;
  let base = '';
  const view = (n: FakeNote) => ({
    id: n.id,
    type: null,
    body: n.body,
    attachment: null,
    author: {
      id: 1,
      username: n.username,
      name: n.username,
      state: 'active',
      avatar_url: 'https://gitlab.example/a.png',
      web_url: `https://gitlab.example/${n.username}`,
    },
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: '2026-01-01T00:00:00.000Z',
    system: n.system,
    noteable_id: 9,
    noteable_type: 'MergeRequest',
    project_id: Number(o.projectId),
    noteable_iid: n.mr,
    resolvable: false,
    confidential: false,
    internal: false,
  });
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', base);
      const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
        res.writeHead(status, { 'content-type': 'application/json', ...headers });
        res.end(JSON.stringify(body));
      };
      const where = `${req.method} ${url.pathname}${url.search}`;
      const route = ROUTES.find((r) => r.method === req.method && r.pattern.test(url.pathname));
      if (!route) {
        problems.push(`${where}: not a documented Notes API route`);
        return send(404, { message: '404 Not Found' });
      }
      const auth = String(req.headers[o.tokenHeader] ?? '');
      if (auth !== o.token) problems.push(`${where}: missing ${o.tokenHeader.toUpperCase()} header`);
      requests.push({ method: req.method!, path: url.pathname + url.search, auth: o.tokenHeader });
      for (const [k, v] of url.searchParams) {
        const ok = route.query[k];
        if (!ok) problems.push(`${where}: query attribute ${k} is not documented`);
        else if (!ok(v)) problems.push(`${where}: invalid ${k}=${v}`);
      }
      let body: Record<string, unknown> = {};
      const raw = Buffer.concat(chunks).toString('utf8');
      if (route.body) {
        if (!String(req.headers['content-type'] ?? '').startsWith('application/json'))
          problems.push(`${where}: content-type must be application/json`);
        try {
          body = JSON.parse(raw) as Record<string, unknown>;
        } catch {
          problems.push(`${where}: body is not JSON`);
        }
        for (const k of route.body.required) if (body[k] === undefined) problems.push(`${where}: ${k} is required`);
        for (const [k, v] of Object.entries(body)) {
          const t = route.body.types[k];
          if (!t) problems.push(`${where}: attribute ${k} is not documented`);
          else if (typeof v !== t) problems.push(`${where}: ${k} must be a ${t}`);
        }
      } else if (raw) problems.push(`${where}: GET takes no body`);
      if (url.pathname === '/api/v4/user') {
        // Users API: a job token cannot read /user.
        if (o.tokenHeader === 'job-token') return send(401, { message: '401 Unauthorized' });
        const username = o.tokenUser ?? 'project_42_bot';
        return send(200, {
          id: 7,
          username,
          name: username,
          state: 'active',
          avatar_url: 'https://gitlab.example/a.png',
          web_url: `https://gitlab.example/${username}`,
          bot: username.endsWith('_bot'),
        });
      }
      const [, id, iid, noteId] = route.pattern.exec(url.pathname)!;
      if (decodeURIComponent(id!) !== o.projectId) return send(404, { message: '404 Project Not Found' });
      const mr = Number(iid);
      if (req.method === 'GET') {
        const perPage = Number(url.searchParams.get('per_page') ?? 20);
        const page = Number(url.searchParams.get('page') ?? 1);
        const sorted = notes
          .filter((n) => n.mr === mr)
          .sort((a, b) => (url.searchParams.get('sort') === 'asc' ? a.id - b.id : b.id - a.id));
        const pages = Math.max(1, Math.ceil(sorted.length / perPage));
        const headers: Record<string, string> = {
          'x-page': String(page),
          'x-per-page': String(perPage),
          'x-total': String(sorted.length),
          'x-total-pages': String(pages),
          'x-next-page': page < pages ? String(page + 1) : '',
          'x-prev-page': page > 1 ? String(page - 1) : '',
        };
        return send(200, sorted.slice((page - 1) * perPage, page * perPage).map(view), headers);
      }
      if (req.method === 'POST') {
        const n = {
          id: nextId++,
          mr,
          body: String(body.body),
          system: false,
          username: o.tokenUser ?? 'project_42_bot',
        };
        notes.push(n);
        return send(201, view(n));
      }
      const n = notes.find((x) => x.id === Number(noteId) && x.mr === mr);
      if (!n) return send(404, { message: '404 Not found' });
      n.body = String(body.body);
      return send(200, view(n));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: `${base}/api/v4`,
    notes,
    requests,
    problems,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
