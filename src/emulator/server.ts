// HTTP front of the emulator: routing, auth, body parsing, fault injection, persistence.
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { packageFile } from '../model/package-files.js';
import { CONTROL_BASE, findControlRoute, type FaultRule } from './control.js';
import { loadDataFile, saveDataFile } from './data-file.js';
import { ServerKeyPair } from './encryption.js';
import { ApiError } from './errors.js';
import { answerConnect, clientErrorHandler, MAX_HEADER_BYTES } from './protocol-errors.js';
import { decodeComponent, excerpt, parseRequestTarget } from './request-target.js';
import { CUSTOMER_KEY_PREFIX, JsonText, KmsService, type SeedRequest } from './service.js';
import { checkDepth, queryBool, queryInt } from './validate.js';

export type { FaultMode, FaultRule } from './control.js';
export type { SeedRequest } from './service.js';

export const API_BASE = '/api/v1';
export const MAX_BODY_BYTES = 1024 * 1024;

/** Start-up problems (a bad port, a port in use): a plain message for the command line. */
export class EmulatorStartError extends Error {}

export interface EmulatorOptions {
  port?: number;
  host?: string;
  /** Accepted project keys (`sk_live_…`/`sk_test_…`). */
  apiKeys: string[];
  /** Keep state across restarts in this JSON file (atomic writes). */
  dataFile?: string;
  /** Added to every API request. */
  latencyMs?: number;
  /** Fraction (0..1) of API requests answered 503. */
  errorRate?: number;
  /** Fraction (0..1) of API requests answered 429 with Retry-After. */
  rate429?: number;
  retryAfterSeconds?: number;
  /** Fraction (0..1) of mutating API requests that commit, then drop the connection without an answer. */
  dropRate?: number;
  /**
   * Serve the /__emulator control routes (counts, faults, seed; they need a project key too).
   * Default false: a service has no back door unless asked for one (`--control`).
   */
  control?: boolean;
  /** Deterministic randomness for the fault rates. */
  random?: () => number;
}

export interface RunningEmulator {
  /** Base URL of the API, ending in /api/v1. */
  url: string;
  port: number;
  service: KmsService;
  addFault(rule: FaultRule): void;
  clearFaults(): void;
  /** Requests served per `METHOD /route-template` since start or the last reset. */
  counts(): Record<string, number>;
  resetCounts(): void;
  close(): Promise<void>;
}

interface Route {
  method: string;
  template: string;
  pattern: RegExp;
  mutates: boolean;
  handle(ctx: Ctx): unknown;
}

interface Ctx {
  params: string[];
  query: URLSearchParams;
  body: unknown;
  headers: IncomingMessage['headers'];
  started: number;
}

const schemaDir = packageFile('schemas');

function route(method: string, template: string, handle: Route['handle']): Route {
  const pattern = new RegExp(`^${template.replace(/\{method_path\}/, '(.+)').replace(/\{[a-z_]+\}/g, '([^/]+)')}$`);
  return { method, template, pattern, mutates: method !== 'GET', handle };
}

function buildRoutes(svc: KmsService, keys: ServerKeyPair): Route[] {
  const page = (q: URLSearchParams) => ({ page: queryInt(q, 'page', 1), limit: queryInt(q, 'limit', 10) });
  const env = (q: URLSearchParams) => q.get('project_env');
  return [
    route('GET', '/encryption-key', () => keys.describe()),
    route('GET', '/project', ({ query: q }) =>
      svc.listProjects({ name: q.get('name'), status: q.get('status'), ...page(q) }),
    ),
    route('POST', '/project', ({ body }) => [201, svc.createProject(body)]),
    route('GET', '/project/{project_env}/logs', ({ params, query: q }) =>
      svc.listLogs(params[0]!, {
        methodPath: q.get('methodPath'),
        clientId: q.get('clientId'),
        status: q.get('status'),
        ...page(q),
      }),
    ),
    route('GET', '/project/{project_env}', ({ params }) => svc.getProject(params[0]!)),
    route('PUT', '/project/{project_env}', ({ params, body }) => svc.updateProject(params[0]!, body)),
    route('DELETE', '/project/{project_env}', ({ params, query: q }) =>
      svc.deleteProject(params[0]!, {
        kind: q.get('kind'),
        envId: q.get('envId'),
        templateId: q.get('templateId'),
        force: queryBool(q, 'forceDelete'),
      }),
    ),
    route('GET', '/client/templates', ({ query: q }) => {
      const p = page(q);
      return svc.listTemplates(env(q), p.page, p.limit);
    }),
    route('GET', '/client', ({ query: q }) =>
      svc.listClients(env(q), {
        name: q.get('name'),
        type: q.get('type'),
        templateId: q.get('templateId'),
        ...page(q),
      }),
    ),
    route('POST', '/client', ({ query: q, body }) => [201, svc.createClients(env(q), body)]),
    route('GET', '/client/{client_uuid}', ({ params, query: q }) => svc.getClient(params[0]!, env(q))),
    route('PUT', '/client/{client_uuid}', ({ params, query: q, body }) => svc.updateClient(params[0]!, env(q), body)),
    route('DELETE', '/client/{client_uuid}', ({ params, query: q }) =>
      svc.deleteClient(params[0]!, env(q), q.get('keyId')),
    ),
    route('POST', '/client/{client_uuid}', ({ params, query: q, body, headers, started }) => {
      const plain = headers['x-service-encrypted'] === '1' ? keys.decrypt(body) : body;
      return svc.validateUsage(params[0]!, env(q), q.get('method_path'), plain, started);
    }),
    route('GET', '/endpoint', ({ query: q }) => {
      const p = page(q);
      return svc.listEndpoints(env(q), p.page, p.limit);
    }),
    route('POST', '/endpoint', ({ query: q, body }) => [201, svc.createEndpoints(env(q), body)]),
    route('GET', '/endpoint/{method_path}', ({ params, query: q }) => svc.getEndpoint(params[0]!, env(q))),
    route('PUT', '/endpoint/{method_path}', ({ params, query: q, body }) =>
      svc.updateEndpoint(params[0]!, env(q), body),
    ),
    route('DELETE', '/endpoint/{method_path}', ({ params, query: q }) => svc.deleteEndpoint(params[0]!, env(q))),
  ].map((r) => ({ ...r, mutates: r.method !== 'GET' }));
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  const text = body instanceof JsonText ? body.text : typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, {
    'content-type': typeof body === 'string' ? 'application/yaml' : 'application/json; charset=utf-8',
    'content-length': body instanceof JsonText ? body.byteLength : Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

function sendError(res: ServerResponse, err: ApiError) {
  send(res, err.status, { code: err.code, status: err.status, error: err.message }, err.headers);
}

/**
 * After a 413 the rest of the body is read and thrown away, up to this much more, so that a client
 * still sending it reads the answer instead of a write error (EPIPE, or a reset that loses the
 * answer); past it, or after DRAIN_MS, the connection is cut.
 */
const DRAIN_MAX_BYTES = 64 * 1024 * 1024;
const DRAIN_MS = 10_000;

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length'] ?? 0);
    const chunks: Buffer[] = [];
    let size = 0;
    let discarded = 0;
    let over = false;
    const tooLarge = (err: ApiError) => {
      over = true;
      chunks.length = 0;
      reject(err);
    };
    if (declared > MAX_BODY_BYTES)
      tooLarge(
        new ApiError(413, 'PAYLOAD_TOO_LARGE', `request body is ${declared} bytes; the limit is ${MAX_BODY_BYTES}`),
      );
    req.on('data', (c: Buffer) => {
      if (over) {
        discarded += c.length;
        if (discarded > DRAIN_MAX_BYTES) req.socket.destroy();
        return;
      }
      size += c.length;
      if (size > MAX_BODY_BYTES)
        return tooLarge(
          new ApiError(413, 'PAYLOAD_TOO_LARGE', `request body exceeds the limit of ${MAX_BODY_BYTES} bytes`),
        );
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', () => reject(CLIENT_GONE));
    // The connection ended mid-body (or the parser refused the rest and answered on the socket).
    req.on('close', () => {
      if (!req.complete) reject(CLIENT_GONE);
    });
  });
}

/**
 * Closes the connection of an answered 413 once the client has sent the rest of its body (which
 * readBody throws away), rather than right after the answer: Node would destroy the socket as soon
 * as the answer is written (`destroySoon`), and a client still writing gets EPIPE and may never read it.
 */
function closeAfterDrain(socket: Socket): void {
  const cut = setTimeout(() => socket.destroy(), DRAIN_MS).unref();
  socket.once('close', () => clearTimeout(cut));
  // Our side is finished (FIN after the answer); the client's FIN, or the limits, close the rest.
  (socket as Socket & { destroySoon?: () => void }).destroySoon = () => socket.end();
}

/** The client is gone (or was already answered at the connection level): nothing left to send. */
const CLIENT_GONE = Symbol('client gone');

/** The body of a POST/PUT as JSON: empty, malformed or too deeply nested bodies are a 400. */
async function readJsonBody(req: IncomingMessage): Promise<unknown> {
  const text = (await readBody(req)).toString('utf8');
  if (text.trim() === '') throw new ApiError(400, 'INVALID_JSON', 'request body is empty; expected JSON');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (e) {
    throw new ApiError(400, 'INVALID_JSON', `request body is not valid JSON: ${(e as Error).message}`);
  }
  checkDepth(body);
  return body;
}

const hashOf = (s: string) => createHash('sha256').update(s).digest();

/** Checks the project key; returns an ApiError when the call is not authorised. */
function authenticate(headers: IncomingMessage['headers'], accepted: Buffer[]): ApiError | undefined {
  let presented = typeof headers['x-api-key'] === 'string' ? headers['x-api-key'] : undefined;
  const auth = headers.authorization;
  if (!presented && auth) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    if (!m) return new ApiError(401, 'INVALID_API_KEY', 'Authorization header must be "Bearer <project key>"');
    presented = m[1];
  }
  if (!presented)
    return new ApiError(
      401,
      'UNAUTHORIZED',
      'missing credentials: send x-api-key or Authorization: Bearer with a project key (sk_...)',
    );
  if (presented.startsWith(CUSTOMER_KEY_PREFIX))
    return new ApiError(
      403,
      'CUSTOMER_KEY_NOT_ALLOWED',
      'customer keys authenticate calls to your own API, not to the platform API; use a project key (sk_...)',
    );
  const h = hashOf(presented);
  if (!accepted.some((a) => timingSafeEqual(a, h)))
    return new ApiError(401, 'INVALID_API_KEY', `invalid project key (prefix ${presented.slice(0, 8)}…)`);
  return undefined;
}

/** Our wording for the errors `listen` can fail with. */
function listenError(err: NodeJS.ErrnoException, host: string, port: number): Error {
  const where = `${host}:${port}`;
  switch (err.code) {
    case 'EADDRINUSE':
      return new EmulatorStartError(
        `port ${port} is already in use on ${host}: pick another --port, or --port 0 for a free one`,
      );
    case 'EACCES':
      return new EmulatorStartError(
        `no permission to listen on ${where} (ports below 1024 need privileges): pick a --port of 1024 or more`,
      );
    case 'EADDRNOTAVAIL':
      return new EmulatorStartError(`cannot listen on ${where}: --host ${host} is not an address of this machine`);
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new EmulatorStartError(`cannot listen on ${where}: --host ${host} does not resolve to an address`);
    default:
      return new EmulatorStartError(`cannot listen on ${where}: ${err.code ?? err.message}`);
  }
}

export async function startEmulator(options: EmulatorOptions): Promise<RunningEmulator> {
  const apiKeys = options.apiKeys ?? [];
  if (apiKeys.length === 0)
    throw new Error('the emulator needs at least one project key (KMS_EMULATOR_API_KEY(S) or --api-key-file)');
  for (const k of apiKeys)
    if (!/^sk_(live|test)_[A-Za-z0-9._-]{4,}$/.test(k))
      throw new Error(`project keys must look like sk_live_… or sk_test_… (got one starting ${k.slice(0, 8)}…)`);
  const port = options.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new EmulatorStartError(
      `port must be an integer from 0 to 65535 (0 picks a free one), got ${String(port).slice(0, 20)}`,
    );
  const host = options.host ?? '127.0.0.1';
  const accepted = apiKeys.map(hashOf);
  const random = options.random ?? Math.random;

  // The whole file is read and checked before anything else happens (loadDataFile throws).
  const loaded = options.dataFile ? loadDataFile(options.dataFile) : undefined;
  const service = loaded?.service ?? new KmsService();
  const keys = loaded?.keys ?? new ServerKeyPair();
  const persist = () => {
    if (options.dataFile) saveDataFile(options.dataFile, service, keys);
  };
  try {
    persist();
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    const why =
      err.code === 'ENOENT'
        ? `its folder ${dirname(options.dataFile!)} does not exist`
        : err.code === 'EACCES'
          ? 'permission denied'
          : (err.code ?? err.message);
    throw new EmulatorStartError(`cannot write --data file ${options.dataFile}: ${why}`);
  }

  const routes = buildRoutes(service, keys);
  const faults: (FaultRule & { left: number })[] = [];
  let counts: Record<string, number> = {};
  let openapiJson: string | undefined;

  const takeFault = (method: string, template: string, path: string): FaultRule | undefined => {
    const i = faults.findIndex(
      (f) =>
        (!f.method || f.method === method) &&
        (!f.route || (typeof f.route === 'string' ? f.route === template : f.route.test(path))),
    );
    if (i < 0) return undefined;
    const f = faults[i]!;
    if (--f.left <= 0) faults.splice(i, 1);
    return f;
  };

  const drop = (res: ServerResponse) => (res.socket as Socket | null)?.destroy();

  const templates = [...new Set(routes.map((r) => r.template))];
  const control = {
    counts: () => counts,
    resetCounts: () => {
      counts = {};
    },
    addFaults: (rules: FaultRule[]) => {
      for (const r of rules) faults.push({ ...r, left: r.times ?? 1 });
      return faults.length;
    },
    clearFaults: () => {
      faults.length = 0;
    },
    seed: (body: unknown) => {
      const r = service.seed(body);
      persist();
      return r;
    },
    templates,
  };

  async function handleControl(req: IncomingMessage, res: ServerResponse, method: string, path: string) {
    if (!options.control)
      throw new ApiError(
        404,
        'NOT_FOUND',
        `the control routes (${CONTROL_BASE}/…) are off: start the emulator with --control (option control: true) to use them`,
      );
    const route = findControlRoute(method, path);
    const authError = authenticate(req.headers, accepted);
    if (authError) throw authError;
    const body = method === 'POST' ? await readJsonBody(req) : undefined;
    return send(res, 200, route.handle(control, body));
  }

  /** The route of `method path` (path below API_BASE), or the 404/405 to answer. */
  function findRoute(method: string, path: string): Route {
    const matching = routes.filter((r) => r.pattern.test(path));
    // A literal path (/client/templates) wins over a parameter (/client/{client_uuid}).
    const literal = matching.filter((r) => !r.template.includes('{'));
    const candidates = literal.length ? literal : matching;
    if (candidates.length === 0)
      throw new ApiError(404, 'NOT_FOUND', `no route ${excerpt(method, 20)} ${API_BASE}${path.slice(0, 200)}`);
    const r = candidates.find((c) => c.method === method);
    if (!r) {
      const allow = candidates.map((c) => c.method).join(', ');
      throw new ApiError(
        405,
        'METHOD_NOT_ALLOWED',
        `${excerpt(method, 20)} is not allowed on ${API_BASE}${path} (allowed: ${allow})`,
        { allow },
      );
    }
    return r;
  }

  /**
   * What a method Node's parser does not know (FROB, a lower-case get) gets on `rawTarget`: the
   * same 404 or 405 (with Allow) as a known method that is not listed there, or a 400 for a bad target.
   */
  function refuseUnknownMethod(method: string, rawTarget: string): ApiError {
    try {
      const { path: target } = parseRequestTarget(rawTarget);
      if (target === CONTROL_BASE || target.startsWith(`${CONTROL_BASE}/`)) {
        if (!options.control) return new ApiError(404, 'NOT_FOUND', `no route ${target.slice(0, 200)}`);
        findControlRoute(method, target.slice(CONTROL_BASE.length));
      } else if (!target.startsWith(`${API_BASE}/`)) {
        return new ApiError(404, 'NOT_FOUND', `no route ${target.slice(0, 200)}; the API lives under ${API_BASE}`);
      } else {
        const path = target.slice(API_BASE.length);
        if (path === '/openapi.yaml' || path === '/openapi.json')
          return new ApiError(
            405,
            'METHOD_NOT_ALLOWED',
            `${excerpt(method, 20)} is not allowed on ${target} (allowed: GET)`,
            { allow: 'GET' },
          );
        findRoute(method, path);
      }
      return new ApiError(400, 'BAD_REQUEST', `unknown method ${excerpt(method, 20)}`);
    } catch (e) {
      if (e instanceof ApiError) return e;
      throw e;
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const started = performance.now();
    const method = req.method ?? 'GET';
    // Requests the parser let through but a service refuses; the client is broken, so the connection closes.
    // (A 505 would be the textbook answer to a version; the emulator keeps every refusal in the 4xx range.)
    if (req.httpVersionMajor !== 1)
      throw new ApiError(400, 'BAD_REQUEST', `HTTP/${req.httpVersion} is not supported: use HTTP/1.1`, {
        connection: 'close',
      });
    // RFC 9112 §3.2: an HTTP/1.1 request without Host is a 400 (Node's own check answers it without a body).
    if (req.httpVersion === '1.1' && !req.headers.host)
      throw new ApiError(400, 'BAD_REQUEST', 'HTTP/1.1 requests need a Host header', { connection: 'close' });
    const target = parseRequestTarget(req.url ?? '/');
    if (target.path === CONTROL_BASE || target.path.startsWith(`${CONTROL_BASE}/`))
      return handleControl(req, res, method, target.path.slice(CONTROL_BASE.length));
    if (!target.path.startsWith(`${API_BASE}/`) && target.path !== API_BASE)
      throw new ApiError(404, 'NOT_FOUND', `no route ${target.path.slice(0, 200)}; the API lives under ${API_BASE}`);
    const path = target.path.slice(API_BASE.length) || '/';
    if (method === 'GET' && (path === '/openapi.yaml' || path === '/openapi.json')) {
      const yamlText = readFileSync(join(schemaDir, 'kms-api.openapi.yaml'), 'utf8');
      if (path === '/openapi.yaml') return send(res, 200, yamlText);
      openapiJson ??= JSON.stringify(parseYaml(yamlText));
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
      return res.end(openapiJson);
    }
    const r = findRoute(method, path);
    const key = `${method} ${r.template}`;
    counts[key] = (counts[key] ?? 0) + 1;

    const authError = authenticate(req.headers, accepted);
    if (authError) throw authError;
    if (options.latencyMs) await new Promise((ok) => setTimeout(ok, options.latencyMs));

    const fault = takeFault(method, r.template, path);
    if (fault?.mode === 'delay') await new Promise((ok) => setTimeout(ok, fault.delayMs ?? 1000));
    if (fault?.mode === 'drop') return drop(res);
    if (fault?.mode === 'error')
      throw new ApiError(fault.status ?? 503, 'SERVICE_UNAVAILABLE', 'injected fault: service unavailable');
    const retryAfter = String(fault?.retryAfterSeconds ?? options.retryAfterSeconds ?? 1);
    if (fault?.mode === '429' || (options.rate429 && random() < options.rate429))
      throw new ApiError(429, 'RATE_LIMITED', 'too many requests; retry after the Retry-After delay', {
        'retry-after': retryAfter,
      });
    if (options.errorRate && random() < options.errorRate)
      throw new ApiError(503, 'SERVICE_UNAVAILABLE', 'injected fault: service unavailable');

    const body = method === 'POST' || method === 'PUT' ? await readJsonBody(req) : undefined;
    const params = (r.pattern.exec(path) ?? []).slice(1).map((p) => decodeComponent(p, 'the path'));
    const result = r.handle({ params, query: target.query, body, headers: req.headers, started });
    if (r.mutates) persist();
    // Committed, answer held back: opens the window where a client dies before reading the
    // response (the crash campaign aims its kills here).
    if (fault?.mode === 'delay-after-commit') await new Promise((ok) => setTimeout(ok, fault.delayMs ?? 1000));
    if (fault?.mode === 'drop-after-commit' || (r.mutates && options.dropRate && random() < options.dropRate))
      return drop(res);
    const [status, payload] = Array.isArray(result) && typeof result[0] === 'number' ? result : [200, result];
    send(res, status as number, payload);
  }

  // Node's own Host check answers without a body: `handle` checks Host instead.
  const server: Server = createServer({ requireHostHeader: false, maxHeaderSize: MAX_HEADER_BYTES }, (req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (err === CLIENT_GONE || res.headersSent || res.destroyed) return;
      if (err instanceof ApiError) {
        // An oversized body: answer now, read and drop the rest of it, then close the connection.
        if (err.status === 413) {
          res.setHeader('connection', 'close');
          closeAfterDrain(req.socket);
        }
        sendError(res, err);
      } else if (err instanceof SyntaxError) {
        sendError(res, new ApiError(400, 'INVALID_JSON', `request body is not valid JSON: ${err.message}`));
      } else {
        sendError(res, new ApiError(500, 'INTERNAL', 'internal emulator error'));
        process.emitWarning(`emulator: ${(err as Error)?.stack ?? String(err)}`);
      }
    });
  });
  server.on('clientError', clientErrorHandler(refuseUnknownMethod));
  server.on('connect', answerConnect);
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((ok, fail) => {
    server.once('error', (err: NodeJS.ErrnoException) => fail(listenError(err, host, port)));
    server.listen(port, host, () => ok());
  });
  const addr = server.address() as AddressInfo;
  const shownHost = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${shownHost}:${addr.port}${API_BASE}`,
    port: addr.port,
    service,
    addFault: (rule) => faults.push({ ...rule, left: rule.times ?? 1 }),
    clearFaults: () => {
      faults.length = 0;
    },
    counts: () => ({ ...counts }),
    resetCounts: () => {
      counts = {};
    },
    close: () =>
      new Promise<void>((ok) => {
        server.close(() => ok());
        server.closeAllConnections();
      }),
  };
}

/** Bulk-loads an environment directly (benchmarks): names are deterministic so configs can match them. */
export function seedService(svc: KmsService, req: SeedRequest) {
  return svc.seed(req);
}
