// The agent's HTTP server: /healthz (alive, its loop not stuck), /readyz (can serve and reconcile), /metrics
// (Prometheus text), /api/status (JSON), /api/suspend and /api/resume, /hooks/github and
// /hooks/gitlab (signed triggers) and the status page at /. Who may use which is access.ts's
// policy, applied by `admit` below: every write route goes through `admit(req, res, 'write')`.
// Webhook bodies are bounded before they are authenticated: the signature header is checked
// before the body is read, and so many bodies (and bytes) are buffered at once, no more.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { redactCredentials } from '../model/redact.js';
import { readRefusal, writeRefusal, type AccessPolicy, type Exposable } from './access.js';
import type { Logger } from './log.js';
import type { AgentMetrics } from './metrics.js';
import { PAGE_CSP, renderPage } from './page.js';
import type { AgentStatus } from './status.js';
import { githubSignatureValid, githubSignatureWellFormed, gitlabTokenValid, RecentDeliveries } from './webhooks.js';

export interface ServerHooks {
  status: () => AgentStatus;
  /** Can serve and can reconcile (state folder owned and writable): /readyz. */
  ready: () => Promise<{ ok: boolean; why: string }>;
  /** The process and its loop are alive (no reconcile stuck): /healthz. */
  alive: () => { ok: boolean; why: string };
  suspend: () => Promise<void>;
  resume: () => Promise<void>;
  /** A signed webhook arrived: reconcile at once when it is a push of the watched ref. */
  trigger: (provider: 'github' | 'gitlab', push: PushEvent | undefined) => 'accepted' | 'suspended' | 'ignored';
  /**
   * POST /api/reconcile: reconcile now (Flux's `flux reconcile`); `overrideSyncWindow`: that
   * reconcile writes even outside the sync windows (Argo CD's manual sync in a deny window).
   * `requestedAt` is the agent's clock at the request: the reconcile that handles it starts then or later.
   */
  reconcileNow: (o: { overrideSyncWindow: boolean }) => { reconcile: 'accepted' | 'suspended'; requestedAt: string };
  /** POST /api/approve-deletes: approves the deletes the guard holds for this revision (kept in the state folder before it answers). */
  approveDeletes: (revision: string) => Promise<boolean>;
}

/** What a webhook says was pushed: the ref (`refs/heads/main`) and the repository's default branch. */
export interface PushEvent {
  ref: string;
  defaultBranch?: string;
}

/** The push a webhook body describes; undefined for any other event (a comment, a pipeline, a ping). */
export function pushOf(provider: 'github' | 'gitlab', event: string | undefined, body: Buffer): PushEvent | undefined {
  if (
    provider === 'github' ? event !== 'push' : event !== undefined && event !== 'Push Hook' && event !== 'Tag Push Hook'
  )
    return undefined;
  let v: unknown;
  try {
    v = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
  const o = (typeof v === 'object' && v !== null ? v : {}) as {
    ref?: unknown;
    repository?: { default_branch?: unknown };
    project?: { default_branch?: unknown };
  };
  if (typeof o.ref !== 'string') return undefined;
  const def = provider === 'github' ? o.repository?.default_branch : o.project?.default_branch;
  return { ref: o.ref, ...(typeof def === 'string' ? { defaultBranch: def } : {}) };
}

export interface ServerOptions {
  host: string;
  port: number;
  metrics: AgentMetrics;
  log: Logger;
  hooks: ServerHooks;
  /** Who may read and write (access.ts). */
  access: AccessPolicy;
  githubSecret?: string;
  gitlabToken?: string;
}

/** One webhook body, at most. */
export const BODY_MAX = 1 << 20;
/** Webhook bodies being read at once, and the bytes they may hold together, before their signature is checked. */
export const BODIES_MAX = 8;
export const BUFFERED_MAX = 4 << 20;
/** How long one webhook body may take to arrive. */
const BODY_TIME_MAX = 10_000;

function send(
  res: ServerResponse,
  status: number,
  body: string,
  type = 'text/plain; charset=utf-8',
  extra: Record<string, string> = {},
) {
  res.writeHead(status, {
    'content-type': type,
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    ...extra,
  });
  res.end(body);
}

const json = (res: ServerResponse, status: number, value: unknown) =>
  send(res, status, `${redactCredentials(JSON.stringify(value, null, 1))}\n`, 'application/json');

/**
 * A refusal answered before the body is read. What the client still sends is read and dropped
 * (Node does so once the answer is out, within the request time limit): closing the connection
 * at once would reset it, and a reset can reach the client before it read the answer.
 */
const refuseEarly = (
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  message: string,
  extra: Record<string, string> = {},
) => {
  req.resume();
  send(res, status, `${message}\n`, 'text/plain; charset=utf-8', extra);
};

type BodyResult = { body: Buffer } | { status: number; message: string };

/** Bodies in flight and the bytes they hold, across all webhook requests. */
class BodyBudget {
  bodies = 0;
  bytes = 0;

  /** Reads one body within the limits, or says why not; the bytes are given back when it ends. */
  read(req: IncomingMessage, declared: number | undefined): Promise<BodyResult> {
    if (this.bodies >= BODIES_MAX || this.bytes + (declared ?? 0) > BUFFERED_MAX)
      return Promise.resolve({ status: 503, message: 'too many webhook deliveries at once; try again' });
    this.bodies++;
    return new Promise((resolve) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let done = false;
      const finish = (r: BodyResult) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        this.bodies--;
        this.bytes -= size;
        chunks.length = 0;
        req.off('data', onData);
        // What is left of a refused body is read and dropped, so the answer is not cut off by a reset.
        if (!('body' in r)) req.resume();
        resolve(r);
      };
      const onData = (c: Buffer) => {
        size += c.length;
        this.bytes += c.length;
        if (size > BODY_MAX) return finish({ status: 413, message: `body too large (more than ${BODY_MAX} bytes)` });
        if (this.bytes > BUFFERED_MAX)
          return finish({ status: 503, message: 'too many webhook deliveries at once; try again' });
        chunks.push(c);
      };
      const timer = setTimeout(() => finish({ status: 408, message: 'the body took too long' }), BODY_TIME_MAX);
      req.on('data', onData);
      req.on('end', () => finish({ body: Buffer.concat(chunks) }));
      req.on('error', () => finish({ status: 400, message: 'the body was cut off' }));
      req.on('close', () => finish({ status: 400, message: 'the body was cut off' }));
    });
  }
}

export async function startServer(
  o: ServerOptions,
): Promise<{ server: Server; url: string; close: () => Promise<void> }> {
  const budget = new BodyBudget();
  const deliveries = new RecentDeliveries();

  /**
   * The one gate of every door but the probes and the webhooks: `write` for each POST /api/…
   * (a bearer token, JSON, same origin), a read door otherwise (access.ts). False: refused and answered.
   */
  const admit = (req: IncomingMessage, res: ServerResponse, door: 'write' | Exposable): boolean => {
    const refusal = door === 'write' ? writeRefusal(o.access, req) : readRefusal(o.access, req, door);
    if (!refusal) return true;
    if (door === 'write')
      o.log.warn(`HTTP ${req.method} ${new URL(req.url ?? '/', 'http://agent').pathname} refused: ${refusal.message}`);
    send(res, refusal.status, `${refusal.message}\n`, 'text/plain; charset=utf-8', refusal.headers);
    return false;
  };

  const webhook = async (req: IncomingMessage, res: ServerResponse, provider: 'github' | 'gitlab') => {
    const secret = provider === 'github' ? o.githubSecret : o.gitlabToken;
    if (secret === undefined) {
      o.metrics.webhooks.inc({ provider, result: 'not_configured' });
      return refuseEarly(
        req,
        res,
        404,
        `the ${provider} webhook is not configured (set ${provider === 'github' ? 'KMS_SYNC_GITHUB_WEBHOOK_SECRET' : 'KMS_SYNC_GITLAB_WEBHOOK_TOKEN'})`,
      );
    }
    // Nothing of the body is read before the sender has shown it holds the secret, or could (a well-formed signature).
    const authorized =
      provider === 'github'
        ? githubSignatureWellFormed(header(req, 'x-hub-signature-256'))
        : gitlabTokenValid(secret, header(req, 'x-gitlab-token'));
    if (!authorized) {
      o.metrics.webhooks.inc({ provider, result: 'unauthorized' });
      return refuseEarly(
        req,
        res,
        401,
        provider === 'github' ? 'missing or malformed X-Hub-Signature-256' : 'invalid token',
      );
    }
    const length = header(req, 'content-length');
    const declared = length !== undefined && /^\d+$/.test(length) ? Number(length) : undefined;
    if (declared !== undefined && declared > BODY_MAX) {
      o.metrics.webhooks.inc({ provider, result: 'too_large' });
      return refuseEarly(req, res, 413, `body too large (more than ${BODY_MAX} bytes)`);
    }
    const read = await budget.read(req, declared);
    if (!('body' in read)) {
      o.metrics.webhooks.inc({ provider, result: read.status === 413 ? 'too_large' : 'refused' });
      return refuseEarly(req, res, read.status, read.message, read.status === 503 ? { 'retry-after': '5' } : {});
    }
    if (provider === 'github' && !githubSignatureValid(secret, read.body, header(req, 'x-hub-signature-256'))) {
      o.metrics.webhooks.inc({ provider, result: 'unauthorized' });
      o.log.warn('webhook refused: bad signature', { provider });
      return send(res, 401, 'invalid signature\n');
    }
    const id =
      provider === 'github'
        ? header(req, 'x-github-delivery')
        : (header(req, 'idempotency-key') ?? header(req, 'x-gitlab-event-uuid'));
    if (deliveries.replayed(provider, id, read.body)) {
      o.metrics.webhooks.inc({ provider, result: 'duplicate' });
      o.log.info('webhook ignored: delivered before', { provider, ...(id ? { delivery: id.slice(0, 64) } : {}) });
      return json(res, 200, { reconcile: 'duplicate' });
    }
    if (provider === 'github' && header(req, 'x-github-event') === 'ping') {
      o.metrics.webhooks.inc({ provider, result: 'ping' });
      return json(res, 200, { pong: true });
    }
    const outcome = o.hooks.trigger(
      provider,
      pushOf(provider, header(req, provider === 'github' ? 'x-github-event' : 'x-gitlab-event'), read.body),
    );
    o.metrics.webhooks.inc({ provider, result: outcome });
    o.log.info(`webhook ${outcome}`, { provider });
    return json(res, 202, { reconcile: outcome });
  };

  /** A write's JSON object body (empty: `{}`), read within the budget; undefined once a refusal is answered. */
  const readJson = async (
    req: IncomingMessage,
    res: ServerResponse,
    expected: string,
  ): Promise<Record<string, unknown> | undefined> => {
    const length = header(req, 'content-length');
    const read = await budget.read(req, length !== undefined && /^\d+$/.test(length) ? Number(length) : undefined);
    if (!('body' in read)) {
      send(res, read.status, `${read.message}\n`);
      return undefined;
    }
    const text = read.body.toString('utf8').trim();
    try {
      const v: unknown = text === '' ? {} : JSON.parse(text);
      if (typeof v === 'object' && v !== null && !Array.isArray(v)) return v as Record<string, unknown>;
    } catch {
      // answered below
    }
    send(res, 400, `expected a JSON body ${expected}\n`);
    return undefined;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://agent');
    const route = `${req.method} ${url.pathname}`;
    switch (route) {
      case 'GET /healthz': {
        const r = o.hooks.alive();
        return send(res, r.ok ? 200 : 503, `${r.why}\n`);
      }
      case 'GET /readyz': {
        const r = await o.hooks.ready();
        return send(res, r.ok ? 200 : 503, `${r.why}\n`);
      }
      case 'GET /metrics':
        if (!admit(req, res, 'metrics')) return;
        return send(res, 200, await o.metrics.registry.metrics(), o.metrics.registry.contentType);
      case 'GET /api/status':
        if (!admit(req, res, 'status')) return;
        return json(res, 200, o.hooks.status());
      case 'POST /api/suspend':
      case 'POST /api/resume':
        if (!admit(req, res, 'write')) return;
        await (url.pathname.endsWith('suspend') ? o.hooks.suspend() : o.hooks.resume());
        o.log.info(`reconciliation ${url.pathname.endsWith('suspend') ? 'suspended' : 'resumed'} through the API`);
        return json(res, 200, { suspended: o.hooks.status().agent.suspended });
      case 'POST /api/reconcile': {
        if (!admit(req, res, 'write')) return;
        const body = await readJson(req, res, '{} or {"overrideSyncWindow": true}');
        if (body === undefined) return;
        const override = body.overrideSyncWindow;
        if (override !== undefined && typeof override !== 'boolean')
          return send(res, 400, 'overrideSyncWindow: expected true or false\n');
        const answer = o.hooks.reconcileNow({ overrideSyncWindow: override === true });
        if (override && answer.reconcile === 'accepted')
          o.log.warn('reconcile requested through the API, overriding the sync windows for that reconcile');
        else o.log.info(`reconcile requested through the API: ${answer.reconcile}`);
        return json(res, 202, { ...answer, ...(override ? { syncWindowOverride: true } : {}) });
      }
      case 'POST /api/approve-deletes': {
        if (!admit(req, res, 'write')) return;
        const body = await readJson(req, res, '{"revision": "<the commit id whose deletes are held>"}');
        if (body === undefined) return;
        const revision = body.revision;
        if (typeof revision !== 'string' || !/^[0-9a-f]{40,64}$/.test(revision))
          return send(res, 400, 'expected {"revision": "<the full commit id whose deletes are held>"}\n');
        if (!(await o.hooks.approveDeletes(revision)))
          return json(res, 409, {
            approved: false,
            why: 'no deletes of this revision are held (see heldDeletes in /api/status)',
          });
        o.log.warn(`deletes of revision ${revision.slice(0, 12)} approved through the API`);
        return json(res, 202, { approved: true, reconcile: 'accepted' });
      }
      case 'POST /hooks/github':
      case 'POST /hooks/gitlab':
        return webhook(req, res, url.pathname.endsWith('github') ? 'github' : 'gitlab');
      case 'GET /':
        if (!admit(req, res, 'status')) return;
        return send(
          res,
          200,
          renderPage(JSON.parse(redactCredentials(JSON.stringify(o.hooks.status()))) as AgentStatus, Date.now(), {
            tokenRequired: o.access.token !== undefined,
          }),
          'text/html; charset=utf-8',
          {
            'content-security-policy': PAGE_CSP,
            'referrer-policy': 'no-referrer',
          },
        );
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
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}
