// The agent's HTTP server: /healthz (alive), /readyz (a reconcile succeeded recently), /metrics
// (Prometheus text), /api/status (JSON), /api/suspend and /api/resume, /hooks/github and
// /hooks/gitlab (signed triggers) and the status page at /. The page and the API take a token
// when one is configured; /metrics only with --metrics-auth; /healthz and /readyz never.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { redactCredentials } from '../model/redact.js';
import type { Logger } from './log.js';
import type { AgentMetrics } from './metrics.js';
import { renderPage } from './page.js';
import type { AgentStatus } from './status.js';
import { githubSignatureValid, gitlabTokenValid, tokenValid } from './webhooks.js';

export interface ServerHooks {
  status: () => AgentStatus;
  ready: () => { ok: boolean; why: string };
  suspend: () => Promise<void>;
  resume: () => Promise<void>;
  /** A signed webhook arrived: reconcile at once. */
  trigger: (provider: 'github' | 'gitlab') => 'accepted' | 'suspended';
}

export interface ServerOptions {
  host: string;
  port: number;
  metrics: AgentMetrics;
  log: Logger;
  hooks: ServerHooks;
  /** Token for the page and /api/* (undefined: open). */
  uiToken?: string;
  /** Whether /metrics takes the token too. */
  metricsAuth?: boolean;
  githubSecret?: string;
  gitlabToken?: string;
}

const BODY_MAX = 1 << 20;

function send(res: ServerResponse, status: number, body: string, type = 'text/plain; charset=utf-8', extra: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff', ...extra });
  res.end(body);
}

const json = (res: ServerResponse, status: number, value: unknown) => send(res, status, `${redactCredentials(JSON.stringify(value, null, 1))}\n`, 'application/json');

function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > BODY_MAX) {
        resolve(undefined);
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

export async function startServer(o: ServerOptions): Promise<{ server: Server; url: string; close: () => Promise<void> }> {
  const authorized = (req: IncomingMessage) => o.uiToken === undefined || tokenValid(o.uiToken, req.headers.authorization);
  const deny = (res: ServerResponse) => send(res, 401, 'unauthorized\n', 'text/plain; charset=utf-8', { 'www-authenticate': 'Basic realm="kms-sync agent", charset="UTF-8"' });

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://agent');
    const route = `${req.method} ${url.pathname}`;
    switch (route) {
      case 'GET /healthz':
        return send(res, 200, 'ok\n');
      case 'GET /readyz': {
        const r = o.hooks.ready();
        return send(res, r.ok ? 200 : 503, `${r.why}\n`);
      }
      case 'GET /metrics':
        if (o.metricsAuth && !authorized(req)) return deny(res);
        return send(res, 200, await o.metrics.registry.metrics(), o.metrics.registry.contentType);
      case 'GET /api/status':
        if (!authorized(req)) return deny(res);
        return json(res, 200, o.hooks.status());
      case 'POST /api/suspend':
      case 'POST /api/resume':
        if (!authorized(req)) return deny(res);
        await (url.pathname.endsWith('suspend') ? o.hooks.suspend() : o.hooks.resume());
        o.log.info(`reconciliation ${url.pathname.endsWith('suspend') ? 'suspended' : 'resumed'} through the API`);
        return json(res, 200, { suspended: o.hooks.status().agent.suspended });
      case 'POST /hooks/github':
      case 'POST /hooks/gitlab': {
        const provider = url.pathname.endsWith('github') ? 'github' : 'gitlab';
        const secret = provider === 'github' ? o.githubSecret : o.gitlabToken;
        if (secret === undefined) {
          o.metrics.webhooks.inc({ provider, result: 'not_configured' });
          return send(res, 404, `the ${provider} webhook is not configured (set ${provider === 'github' ? 'KMS_SYNC_GITHUB_WEBHOOK_SECRET' : 'KMS_SYNC_GITLAB_WEBHOOK_TOKEN'})\n`);
        }
        if (provider === 'gitlab' && !gitlabTokenValid(secret, header(req, 'x-gitlab-token'))) {
          o.metrics.webhooks.inc({ provider, result: 'unauthorized' });
          return send(res, 401, 'invalid token\n');
        }
        const body = await readBody(req);
        if (body === undefined) return send(res, 413, 'body too large\n');
        if (provider === 'github' && !githubSignatureValid(secret, body, header(req, 'x-hub-signature-256'))) {
          o.metrics.webhooks.inc({ provider, result: 'unauthorized' });
          o.log.warn('webhook refused: bad signature', { provider });
          return send(res, 401, 'invalid signature\n');
        }
        if (provider === 'github' && header(req, 'x-github-event') === 'ping') {
          o.metrics.webhooks.inc({ provider, result: 'ping' });
          return json(res, 200, { pong: true });
        }
        const outcome = o.hooks.trigger(provider);
        o.metrics.webhooks.inc({ provider, result: outcome });
        o.log.info(`webhook ${outcome}`, { provider });
        return json(res, 202, { reconcile: outcome });
      }
      case 'GET /':
        if (!authorized(req)) return deny(res);
        return send(res, 200, renderPage(JSON.parse(redactCredentials(JSON.stringify(o.hooks.status()))) as AgentStatus), 'text/html; charset=utf-8', {
          'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
          'referrer-policy': 'no-referrer',
        });
      default:
        return send(res, 404, 'not found\n');
    }
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      o.log.error(`HTTP ${req.method} ${req.url}: ${(e as Error).message}`);
      if (!res.headersSent) send(res, 500, 'internal error\n');
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 5000;
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    server,
    url: `http://${host}:${addr.port}`,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}
