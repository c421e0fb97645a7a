// HTTP front of the emulator: routing, auth, body parsing, fault injection, persistence.
import { createHash, timingSafeEqual } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { ServerKeyPair } from './encryption.js';
import { ApiError } from './errors.js';
import { CUSTOMER_KEY_PREFIX, KmsService } from './service.js';
import { queryBool, queryInt } from './validate.js';

export const API_BASE = '/api/v1';
export const MAX_BODY_BYTES = 1024 * 1024;
const CONTROL_BASE = '/__emulator';

export type FaultMode = 'error' | '429' | 'drop' | 'drop-after-commit' | 'delay' | 'delay-after-commit';

/** A scripted fault: the next `times` requests matching method/route get `mode`. */
export interface FaultRule {
  method?: string;
  /** Route template (e.g. `/client`, `/client/{client_uuid}`) or a RegExp tested against the URL path. */
  route?: string | RegExp;
  mode: FaultMode;
  status?: number;
  times?: number;
  delayMs?: number;
  retryAfterSeconds?: number;
}

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
  /** Serve the /__emulator control routes (counts, faults, seed). Default true. */
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

const schemaDir = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'schemas');

function route(method: string, template: string, handle: Route['handle']): Route {
  const pattern = new RegExp(
    `^${template.replace(/\{method_path\}/, '(.+)').replace(/\{[a-z_]+\}/g, '([^/]+)')}$`,
  );
  return { method, template, pattern, mutates: method !== 'GET', handle };
}

function buildRoutes(svc: KmsService, keys: ServerKeyPair): Route[] {
  const page = (q: URLSearchParams) => ({ page: queryInt(q, 'page', 1), limit: queryInt(q, 'limit', 10) });
  const env = (q: URLSearchParams) => q.get('project_env');
  return [
    route('GET', '/encryption-key', () => keys.describe()),
    route('GET', '/project', ({ query: q }) => svc.listProjects({ name: q.get('name'), status: q.get('status'), ...page(q) })),
    route('POST', '/project', ({ body }) => [201, svc.createProject(body)]),
    route('GET', '/project/{project_env}/logs', ({ params, query: q }) =>
      svc.listLogs(params[0]!, { methodPath: q.get('methodPath'), clientId: q.get('clientId'), status: q.get('status'), ...page(q) })),
    route('GET', '/project/{project_env}', ({ params }) => svc.getProject(params[0]!)),
    route('PUT', '/project/{project_env}', ({ params, body }) => svc.updateProject(params[0]!, body)),
    route('DELETE', '/project/{project_env}', ({ params, query: q }) =>
      svc.deleteProject(params[0]!, { kind: q.get('kind'), envId: q.get('envId'), templateId: q.get('templateId'), force: queryBool(q, 'forceDelete') })),
    route('GET', '/client/templates', ({ query: q }) => { const p = page(q); return svc.listTemplates(env(q), p.page, p.limit); }),
    route('GET', '/client', ({ query: q }) =>
      svc.listClients(env(q), { name: q.get('name'), type: q.get('type'), templateId: q.get('templateId'), ...page(q) })),
    route('POST', '/client', ({ query: q, body }) => [201, svc.createClients(env(q), body)]),
    route('GET', '/client/{client_uuid}', ({ params, query: q }) => svc.getClient(params[0]!, env(q))),
    route('PUT', '/client/{client_uuid}', ({ params, query: q, body }) => svc.updateClient(params[0]!, env(q), body)),
    route('DELETE', '/client/{client_uuid}', ({ params, query: q }) => svc.deleteClient(params[0]!, env(q), q.get('keyId'))),
    route('POST', '/client/{client_uuid}', ({ params, query: q, body, headers, started }) => {
      const plain = headers['x-service-encrypted'] === '1' ? keys.decrypt(body) : body;
      return svc.validateUsage(params[0]!, env(q), q.get('method_path'), plain, started);
    }),
    route('GET', '/endpoint', ({ query: q }) => { const p = page(q); return svc.listEndpoints(env(q), p.page, p.limit); }),
    route('POST', '/endpoint', ({ query: q, body }) => [201, svc.createEndpoints(env(q), body)]),
    route('GET', '/endpoint/{method_path}', ({ params, query: q }) => svc.getEndpoint(params[0]!, env(q))),
    route('PUT', '/endpoint/{method_path}', ({ params, query: q, body }) => svc.updateEndpoint(params[0]!, env(q), body)),
    route('DELETE', '/endpoint/{method_path}', ({ params, query: q }) => svc.deleteEndpoint(params[0]!, env(q))),
  ].map((r) => ({ ...r, mutates: r.method !== 'GET' }));
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, {
    'content-type': typeof body === 'string' ? 'application/yaml' : 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

function sendError(res: ServerResponse, err: ApiError) {
  send(res, err.status, { code: err.code, status: err.status, error: err.message }, err.headers);
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > MAX_BODY_BYTES) {
      reject(new ApiError(413, 'PAYLOAD_TOO_LARGE', `request body is ${declared} bytes; the limit is ${MAX_BODY_BYTES}`));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        reject(new ApiError(413, 'PAYLOAD_TOO_LARGE', `request body exceeds the limit of ${MAX_BODY_BYTES} bytes`));
        req.removeAllListeners('data');
        req.resume();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
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
  if (!presented) return new ApiError(401, 'UNAUTHORIZED', 'missing credentials: send x-api-key or Authorization: Bearer with a project key (sk_...)');
  if (presented.startsWith(CUSTOMER_KEY_PREFIX))
    return new ApiError(403, 'CUSTOMER_KEY_NOT_ALLOWED', 'customer keys authenticate calls to your own API, not to the platform API; use a project key (sk_...)');
  const h = hashOf(presented);
  if (!accepted.some((a) => timingSafeEqual(a, h)))
    return new ApiError(401, 'INVALID_API_KEY', `invalid project key (prefix ${presented.slice(0, 8)}…)`);
  return undefined;
}

function writeAtomic(file: string, text: string) {
  const tmp = `${file}.${process.pid}.tmp`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
  const dfd = openSync(dirname(file), 'r');
  try { fsyncSync(dfd); } finally { closeSync(dfd); }
}

export async function startEmulator(options: EmulatorOptions): Promise<RunningEmulator> {
  const apiKeys = options.apiKeys ?? [];
  if (apiKeys.length === 0) throw new Error('the emulator needs at least one project key (--api-key or KMS_EMULATOR_API_KEYS)');
  for (const k of apiKeys)
    if (!/^sk_(live|test)_[A-Za-z0-9._-]{4,}$/.test(k)) throw new Error(`project keys must look like sk_live_… or sk_test_… (got one starting ${k.slice(0, 8)}…)`);
  const accepted = apiKeys.map(hashOf);
  const random = options.random ?? Math.random;

  let service = new KmsService();
  let keys = new ServerKeyPair();
  if (options.dataFile && existsSync(options.dataFile)) {
    const saved = JSON.parse(readFileSync(options.dataFile, 'utf8')) as { serverKey: string; state: { projects: unknown[] } };
    service = KmsService.fromJSON(saved.state);
    keys = ServerKeyPair.fromPkcs8(saved.serverKey);
  }
  const persist = () => {
    if (options.dataFile) writeAtomic(options.dataFile, JSON.stringify({ version: 1, serverKey: keys.toPkcs8(), state: service.toJSON() }));
  };
  persist();

  const routes = buildRoutes(service, keys);
  const faults: (FaultRule & { left: number })[] = [];
  let counts: Record<string, number> = {};
  let openapiJson: string | undefined;

  const takeFault = (method: string, template: string, path: string): FaultRule | undefined => {
    const i = faults.findIndex((f) =>
      (!f.method || f.method === method) &&
      (!f.route || (typeof f.route === 'string' ? f.route === template : f.route.test(path))));
    if (i < 0) return undefined;
    const f = faults[i]!;
    if (--f.left <= 0) faults.splice(i, 1);
    return f;
  };

  const drop = (res: ServerResponse) => (res.socket as Socket | null)?.destroy();

  async function handleControl(req: IncomingMessage, res: ServerResponse, path: string) {
    const body = req.method === 'POST' ? JSON.parse((await readBody(req)).toString('utf8') || '{}') : undefined;
    if (path === '/counts' && req.method === 'GET') return send(res, 200, counts);
    if (path === '/counts' && req.method === 'DELETE') { counts = {}; return send(res, 200, { success: true }); }
    if (path === '/faults' && req.method === 'POST') {
      for (const r of (body.rules ?? [body]) as FaultRule[]) faults.push({ ...r, left: r.times ?? 1 });
      return send(res, 200, { success: true, active: faults.length });
    }
    if (path === '/faults' && req.method === 'DELETE') { faults.length = 0; return send(res, 200, { success: true }); }
    if (path === '/seed' && req.method === 'POST') { const r = seedService(service, body); persist(); return send(res, 200, r); }
    throw new ApiError(404, 'NOT_FOUND', `no control route ${req.method} ${CONTROL_BASE}${path}`);
  }

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const started = performance.now();
    const url = new URL(req.url ?? '/', 'http://emulator');
    const method = req.method ?? 'GET';
    if (options.control !== false && url.pathname.startsWith(CONTROL_BASE))
      return handleControl(req, res, url.pathname.slice(CONTROL_BASE.length));
    if (!url.pathname.startsWith(`${API_BASE}/`) && url.pathname !== API_BASE)
      throw new ApiError(404, 'NOT_FOUND', `no route ${url.pathname}; the API lives under ${API_BASE}`);
    const path = url.pathname.slice(API_BASE.length) || '/';
    if (method === 'GET' && (path === '/openapi.yaml' || path === '/openapi.json')) {
      const yamlText = readFileSync(join(schemaDir, 'kms-api.openapi.yaml'), 'utf8');
      if (path === '/openapi.yaml') return send(res, 200, yamlText);
      openapiJson ??= JSON.stringify(parseYaml(yamlText));
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
      return res.end(openapiJson);
    }
    const matching = routes.filter((r) => r.pattern.test(path));
    // A literal path (/client/templates) wins over a parameter (/client/{client_uuid}).
    const literal = matching.filter((r) => !r.template.includes('{'));
    const candidates = literal.length ? literal : matching;
    if (candidates.length === 0) throw new ApiError(404, 'NOT_FOUND', `no route ${method} ${API_BASE}${path}`);
    const r = candidates.find((c) => c.method === method);
    if (!r) {
      throw new ApiError(405, 'METHOD_NOT_ALLOWED', `${method} is not allowed on ${API_BASE}${path} (allowed: ${candidates.map((c) => c.method).join(', ')})`,
        { allow: candidates.map((c) => c.method).join(', ') });
    }
    const key = `${method} ${r.template}`;
    counts[key] = (counts[key] ?? 0) + 1;

    const authError = authenticate(req.headers, accepted);
    if (authError) throw authError;
    if (options.latencyMs) await new Promise((ok) => setTimeout(ok, options.latencyMs));

    const fault = takeFault(method, r.template, path);
    if (fault?.mode === 'delay') await new Promise((ok) => setTimeout(ok, fault.delayMs ?? 1000));
    if (fault?.mode === 'drop') return drop(res);
    if (fault?.mode === 'error') throw new ApiError(fault.status ?? 503, 'SERVICE_UNAVAILABLE', 'injected fault: service unavailable');
    const retryAfter = String(fault?.retryAfterSeconds ?? options.retryAfterSeconds ?? 1);
    if (fault?.mode === '429' || (options.rate429 && random() < options.rate429))
      throw new ApiError(429, 'RATE_LIMITED', 'too many requests; retry after the Retry-After delay', { 'retry-after': retryAfter });
    if (options.errorRate && random() < options.errorRate)
      throw new ApiError(503, 'SERVICE_UNAVAILABLE', 'injected fault: service unavailable');

    let body: unknown;
    if (method === 'POST' || method === 'PUT') {
      const raw = await readBody(req);
      const text = raw.toString('utf8');
      if (text.trim() === '') throw new ApiError(400, 'INVALID_JSON', 'request body is empty; expected JSON');
      try {
        body = JSON.parse(text);
      } catch (e) {
        throw new ApiError(400, 'INVALID_JSON', `request body is not valid JSON: ${(e as Error).message}`);
      }
    }
    const params = (r.pattern.exec(path) ?? []).slice(1).map((p) => decodeURIComponent(p));
    const result = r.handle({ params, query: url.searchParams, body, headers: req.headers, started });
    if (r.mutates) persist();
    // Committed, answer held back: opens the window where a client dies before reading the
    // response (the crash campaign aims its kills here).
    if (fault?.mode === 'delay-after-commit') await new Promise((ok) => setTimeout(ok, fault.delayMs ?? 1000));
    if (fault?.mode === 'drop-after-commit' || (r.mutates && options.dropRate && random() < options.dropRate)) return drop(res);
    const [status, payload] = Array.isArray(result) && typeof result[0] === 'number' ? result : [200, result];
    send(res, status as number, payload);
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (res.headersSent || res.destroyed) return;
      if (err instanceof ApiError) {
        // Stop reading an oversized body: answer, then close the connection.
        if (err.status === 413) res.setHeader('connection', 'close');
        sendError(res, err);
      } else if (err instanceof SyntaxError) {
        sendError(res, new ApiError(400, 'INVALID_JSON', `request body is not valid JSON: ${err.message}`));
      } else {
        sendError(res, new ApiError(500, 'INTERNAL', 'internal emulator error'));
        process.emitWarning(`emulator: ${(err as Error)?.stack ?? String(err)}`);
      }
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => ok());
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${host}:${addr.port}${API_BASE}`,
    port: addr.port,
    service,
    addFault: (rule) => faults.push({ ...rule, left: rule.times ?? 1 }),
    clearFaults: () => { faults.length = 0; },
    counts: () => ({ ...counts }),
    resetCounts: () => { counts = {}; },
    close: () => new Promise<void>((ok) => {
      server.close(() => ok());
      server.closeAllConnections();
    }),
  };
}

export interface SeedRequest {
  project: string;
  type: string;
  url?: string;
  templates?: number;
  clients?: number;
  keysPerClient?: number;
  endpoints?: number;
  metadata?: Record<string, unknown>;
}

/** Bulk-loads an environment directly (benchmarks): names are deterministic so configs can match them. */
export function seedService(svc: KmsService, req: SeedRequest) {
  return svc.seed(req);
}
