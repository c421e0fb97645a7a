// Transport of the service client: one keep-alive connection pool, bounded concurrency,
// client-side rate limit, retries with exponential backoff and jitter where a retry is safe, typed
// errors, redaction. The pool is Node's own HTTP client (node:http/node:https Agent): the undici
// package took ~0.1 s to load before the first request of every command (issue 16), for the one
// pool and one request call this transport uses.
import { deadlineLeft, DeadlineExceededError } from './deadline.js';
import type { Agent, ClientRequest, IncomingHttpHeaders } from 'node:http';
import { isAscii } from 'node:buffer';
import type { LookupFunction } from 'node:net';
import { registerSecret } from '../model/redact.js';

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly method: string;
  readonly path: string;
  constructor(method: string, path: string, status: number, code: string, message: string) {
    // A refused credential is the error new users meet first: it names its troubleshooting entry.
    super(
      `${method} ${path} → ${status} ${code}: ${message}${status === 401 ? ' (see docs/troubleshooting.md#authentication-failed)' : ''}`,
    );
    this.method = method;
    this.path = path;
    this.status = status;
    this.code = code;
  }
}

/** A write whose outcome is unknown (timeout, reset, 5xx on a non-idempotent call): resolve by re-reading. */
export class AmbiguousWriteError extends Error {
  readonly method: string;
  readonly path: string;
  constructor(method: string, path: string, cause: string) {
    super(`${method} ${path}: outcome unknown (${cause}); the live state must be re-read before going on`);
    this.method = method;
    this.path = path;
  }
}

/**
 * The transport was stopped (an interrupt while nothing is written, or the command is done with
 * it): requests in flight are cut and new ones refused, without retries and without retry lines.
 */
export class RequestsStoppedError extends Error {
  constructor(method: string, path: string) {
    super(`${method} ${path}: not sent, the run is stopping`);
  }
}

/** The service could not be reached at all. */
export class NetworkError extends Error {
  /** The system error code (`ENOTFOUND`, `ECONNREFUSED`, …) when there is one. */
  readonly code: string;
  constructor(message: string, code = '') {
    super(message);
    this.code = code;
  }
}

/**
 * A successful status whose body is not what the contract documents: not JSON (a proxy's HTML
 * login page), or JSON of another shape (a list without its envelope). Never read as "empty":
 * that is how a wrong URL would turn into mass creates and, with prune, deletes.
 */
export class UnexpectedResponseError extends Error {
  readonly method: string;
  /** The request path with its query (never credentials: those travel in headers). */
  readonly path: string;
  readonly status: number;
  constructor(method: string, path: string, status: number, problem: string) {
    super(`${method} ${path} → ${status}: the answer ${problem}`);
    this.method = method;
    this.path = path;
    this.status = status;
  }
}

export interface HttpOptions {
  /** Base URL ending in /api/v1. */
  baseUrl: string;
  apiKey: string;
  /** Writes (POST, PUT, DELETE) in flight at once (default 8). */
  parallelism?: number;
  /**
   * Reads (GET) in flight at once (default 4 × parallelism); the pool keeps as many connections.
   * Reads are idempotent and a plan of 100,000 clients is 1,000 list pages: 8 at a time leave the
   * CPU idle while they wait and the network idle while their answers are parsed; 32 keep both busy.
   */
  readParallelism?: number;
  /** Client-side rate limit in requests per second (default: none). */
  maxRps?: number;
  /** Attempts for retryable failures (default 5). */
  maxAttempts?: number;
  /** First backoff delay; doubles each attempt, full jitter (default 200 ms). */
  baseDelayMs?: number;
  /** Longest single wait, Retry-After included (default 30 s). */
  maxDelayMs?: number;
  /** Headers + body timeout per attempt (default 30 s). */
  timeoutMs?: number;
  /** Largest answer body read, in bytes (default 64 MiB): a larger one fails with BODY_TOO_LARGE, not an out-of-memory crash. */
  maxBodyBytes?: number;
  userAgent?: string;
  /** Called before each retry: the CLI prints a plain line. */
  onRetry?: (info: { method: string; path: string; attempt: number; delayMs: number; reason: string }) => void;
  /** Host-name resolver (default: the system's `dns.lookup`); tests pass one that fails on purpose. */
  lookup?: LookupFunction;
}

export interface RequestSpec {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  /** What counts this request under in `requestCounts` (default: method + path). */
  kind?: string;
  /**
   * Whether repeating the request is harmless (default: every method but POST). A PUT that issues
   * new keys is not: a blind retry could issue a second raw key that nobody captures.
   */
  retrySafe?: boolean;
  /**
   * The request issues raw keys. A 503 on it is not taken at its word ("not processed"): a
   * gateway that answers 503 after the service committed would make a blind retry issue a second
   * key and strand the first, so its outcome is settled by re-reading (the journal's recovery).
   * A 429 is still retried: throttling turns a request away before it is processed.
   */
  issuesKeys?: boolean;
  /**
   * Checks the parsed body of a 2xx answer; returns what is wrong with it, or undefined. A read
   * whose answer fails the check is an UnexpectedResponseError, a write's an AmbiguousWriteError.
   */
  expect?: (body: unknown) => string | undefined;
}

const RETRYABLE_STATUS = new Set([429, 502, 503, 504]);
/**
 * Answers that say the request was not processed, so that even a create (or a key-issuing write)
 * is retried like a read: 429 (throttled) and 503 (the service's front door turned it away; the
 * contract documents that a 503 changes nothing: schemas/kms-api.openapi.yaml, ServerError).
 * 502 and 504 come from a gateway that may have passed the request on: their outcome is unknown.
 */
const NOT_PROCESSED_STATUS = new Set([429, 503]);
/** Codes of our own timeouts: no connection within the time limit (never sent), or no answer on one. */
const CONNECT_TIMEOUT = 'CONNECT_TIMEOUT';
const ANSWER_TIMEOUT = 'ANSWER_TIMEOUT';
/** Failures before the request was sent: even a create may be retried. */
const CONNECT_ERRORS = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', CONNECT_TIMEOUT]);
/**
 * Failures a retry cannot fix: the name does not exist (NXDOMAIN). `EAI_AGAIN` (the resolver did
 * not answer in time) is transient and retried like a refused connection (a restarting service).
 */
const PERMANENT_ERRORS = new Set(['ENOTFOUND', 'BODY_TOO_LARGE']);
/** The default bound of one answer's body (a page of 1,000 clients is well under 2 MB). */
export const MAX_BODY_BYTES = 64 * 1024 * 1024;

/** `application/json`, `application/problem+json`, … */
const isJsonType = (contentType: string) => /^application\/([a-z0-9.+-]*\+)?json\s*(;|$)/i.test(contentType.trim());

const firstHeader = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

/** Non-printable characters of a service's text escaped, so a message cannot drive the terminal. */
const printable = (text: string) =>
  text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) =>
    c === '\n' || c === '\t' ? ' ' : `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`,
  );

function sleep(ms: number) {
  return new Promise((ok) => setTimeout(ok, ms));
}

/** Counting semaphore: at most `n` holders. */
class Semaphore {
  private active = 0;
  private readonly waiters: (() => void)[] = [];
  private readonly n: number;
  constructor(n: number) {
    this.n = n;
  }
  async acquire(): Promise<void> {
    if (this.active < this.n) {
      this.active++;
      return;
    }
    await new Promise<void>((ok) => this.waiters.push(ok));
  }
  release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.active--;
  }
}

/** Token bucket for --max-rps (burst of one second's worth). */
class RateLimiter {
  private tokens: number;
  private last = performance.now();
  private readonly rps: number;
  constructor(rps: number) {
    this.rps = rps;
    this.tokens = rps;
  }
  async take(): Promise<void> {
    for (;;) {
      const t = performance.now();
      this.tokens = Math.min(this.rps, this.tokens + ((t - this.last) / 1000) * this.rps);
      this.last = t;
      if (this.tokens >= 1) {
        this.tokens -= 1;
        return;
      }
      await sleep(((1 - this.tokens) / this.rps) * 1000);
    }
  }
}

function retryAfterMs(header: string | string[] | undefined): number | undefined {
  const v = Array.isArray(header) ? header[0] : header;
  if (!v) return undefined;
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

interface Answer {
  statusCode: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/**
 * The exchanges on the wire, each in a slot that the next one reuses once it has ended. A Set
 * here kept the pages read alive through the young-generation collections: its table, once in
 * the old generation, is replaced as it grows and shrinks, and the tables left behind point at
 * the requests they held (each request at its answer) until a full collection. 1,000 pages of
 * 100 clients read and dropped, 32 at a time: 29-41% of what each scavenge saw survived it, 12%
 * with slots (5% tracking nothing), so far less is copied and promoted to be collected later.
 */
class OnTheWire {
  private readonly slots: (ClientRequest | undefined)[] = [];
  private readonly free: number[] = [];

  /** Holds `req`; the function returned lets it go (its 'close'). */
  add(req: ClientRequest): () => void {
    const slot = this.free.pop() ?? this.slots.length;
    this.slots[slot] = req;
    return () => {
      if (this.slots[slot] !== req) return;
      this.slots[slot] = undefined;
      this.free.push(slot);
    };
  }

  /** Destroys every exchange held, each with an error of its own. */
  cutAll(error: () => Error): void {
    for (let i = 0; i < this.slots.length; i++) {
      const req = this.slots[i];
      if (!req) continue;
      this.slots[i] = undefined;
      this.free.push(i);
      req.destroy(error());
    }
  }
}

export class HttpTransport {
  /** The connection pool and its module, made on the first request (commands that never call the service load neither). */
  private poolPromise: Promise<{ agent: Agent; request: typeof import('node:http').request }> | undefined;
  private readonly maxSockets: number;
  private readonly lookup: LookupFunction | undefined;
  private readonly url: URL;
  private readonly basePath: string;
  private readonly origin: string;
  /** Every request holds it: sized for the reads. */
  private readonly sem: Semaphore;
  /** Writes hold it too (before `sem`): at most `parallelism` of them. */
  private readonly writeSem: Semaphore;
  private readonly limiter?: RateLimiter;
  private readonly opts: Required<Omit<HttpOptions, 'maxRps' | 'onRetry' | 'userAgent' | 'lookup'>> &
    Pick<HttpOptions, 'onRetry' | 'userAgent'>;
  /** Requests sent, by kind (benchmarks and tests read this). */
  readonly requestCounts: Record<string, number> = {};
  /** Set by stop()/close(): nothing more is sent, nothing is retried. */
  private stopped = false;
  /** Exchanges on the wire, cut by stop(). */
  private readonly live = new OnTheWire();
  private readonly options: HttpOptions;

  constructor(options: HttpOptions) {
    this.options = options;
    const url = new URL(options.baseUrl);
    this.url = url;
    this.basePath = url.pathname.replace(/\/+$/, '');
    this.origin = url.origin;
    const parallelism = options.parallelism ?? 8;
    this.opts = {
      maxAttempts: 5,
      baseDelayMs: 200,
      maxDelayMs: 30_000,
      timeoutMs: 30_000,
      maxBodyBytes: MAX_BODY_BYTES,
      ...options,
      parallelism,
      readParallelism: options.readParallelism ?? 4 * parallelism,
    };
    const inFlight = Math.max(this.opts.parallelism, this.opts.readParallelism);
    this.maxSockets = inFlight;
    this.lookup = options.lookup;
    this.sem = new Semaphore(inFlight);
    this.writeSem = new Semaphore(this.opts.parallelism);
    if (options.maxRps) this.limiter = new RateLimiter(options.maxRps);
  }

  /** The most requests on the wire at once (reads): a paged list keeps this many pages in flight. */
  get readSlots(): number {
    return this.maxSockets;
  }

  get totalRequests(): number {
    return Object.values(this.requestCounts).reduce((a, b) => a + b, 0);
  }

  private pool(): Promise<{ agent: Agent; request: typeof import('node:http').request }> {
    // The module itself, not import(): an ESM import of node:http builds a facade of all its
    // exports, and reading its WebSocket export loads Node's bundled undici (30 ms per run).
    if (this.poolPromise) return this.poolPromise;
    const m =
      this.url.protocol === 'https:' ? process.getBuiltinModule('node:https') : process.getBuiltinModule('node:http');
    this.poolPromise = Promise.resolve({
      // Idle connections are kept 10 s for the next request, and never keep the process alive.
      agent: new m.Agent({ keepAlive: true, maxSockets: this.maxSockets, timeout: 10_000 }),
      request: m.request as typeof import('node:http').request,
    });
    return this.poolPromise;
  }

  async close(): Promise<void> {
    // Requests still in flight (a read started ahead of a configuration that then failed) end
    // here, said by whoever closed: cut as stop() cuts them, never retried on a new connection.
    this.live.cutAll(() => Object.assign(new Error('closed'), { code: 'STOPPED' }));
    if (this.poolPromise) (await this.poolPromise).agent.destroy();
  }

  /**
   * Stops this transport for good: requests in flight are cut, later ones refused, each failing
   * with RequestsStoppedError (no retry, no retry line). For reads being abandoned (an interrupt
   * while planning, a configuration that did not load), never for writes whose outcome matters.
   */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.live.cutAll(() => Object.assign(new Error('stopped'), { code: 'STOPPED' }));
  }

  /**
   * The settings of a transport in another thread that makes part `k` of `of` parts of this one's
   * reads (engine/plan-threads.ts): its reads in flight and requests per second a share of these,
   * so that all parts together send no more at once than this transport would. No callbacks:
   * its retries are said here (retried).
   */
  shareOf(k: number, of: number): Omit<HttpOptions, 'onRetry' | 'lookup'> {
    const { onRetry: _r, lookup: _l, ...plain } = this.options;
    const share = (n: number) => Math.floor(n / of) + (k < n % of ? 1 : 0);
    const reads = Math.max(this.opts.parallelism, this.opts.readParallelism);
    return {
      ...plain,
      parallelism: Math.max(1, share(this.opts.parallelism)),
      readParallelism: Math.max(1, share(reads)),
      ...(this.options.maxRps ? { maxRps: this.options.maxRps / of } : {}),
    };
  }

  /** A retry another thread's transport made for this one (shareOf): said as this transport's own. */
  retried(info: Parameters<NonNullable<HttpOptions['onRetry']>>[0]): void {
    this.opts.onRetry?.(info);
  }

  /** A new transport with the same settings and its own connections (the run lock's, which an interrupt does not stop). */
  fork(): HttpTransport {
    return new HttpTransport(this.options);
  }

  /**
   * One exchange on a pooled connection: the answer's status, headers and body text. A connection
   * or an answer that stays silent for `timeoutMs` fails with CONNECT_TIMEOUT (nothing was sent) or
   * ANSWER_TIMEOUT; other failures carry Node's system error codes (ECONNREFUSED, ECONNRESET, …).
   */
  private async exchange(
    method: string,
    path: string,
    headers: Record<string, string>,
    body: string | undefined,
    secretHeaders: Record<string, string> = {},
    timeoutMs = this.opts.timeoutMs,
  ): Promise<Answer> {
    const { agent, request } = await this.pool();
    return new Promise<Answer>((resolve, reject) => {
      const req = request(
        {
          // An IPv6 literal is written in brackets in a URL, without them for a connection.
          protocol: this.url.protocol,
          hostname: this.url.hostname.replace(/^\[(.*)\]$/, '$1'),
          port: this.url.port,
          path,
          method,
          agent,
          // The key is set on the request below, not passed in these options: NODE_DEBUG=http prints
          // the options (headers included) a connection is made with, and would show it in clear.
          headers: body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) },
          timeout: timeoutMs,
          ...(this.lookup ? { lookup: this.lookup } : {}),
        },
        (res) => {
          const chunks: Buffer[] = [];
          const max = this.opts.maxBodyBytes;
          const tooLarge = () => {
            const e = Object.assign(new Error(`the answer is larger than ${Math.round(max / 1024 / 1024)} MB`), {
              code: 'BODY_TOO_LARGE',
            });
            res.destroy();
            req.destroy();
            reject(e);
          };
          if (Number(res.headers['content-length']) > max) return tooLarge();
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size > max) {
              chunks.length = 0;
              return tooLarge();
            }
            chunks.push(c);
          });
          res.on('end', () =>
            resolve({ statusCode: res.statusCode ?? 0, headers: res.headers, text: bodyText(chunks) }),
          );
          res.on('error', reject);
        },
      );
      for (const [k, v] of Object.entries(secretHeaders)) req.setHeader(k, v);
      req.on('close', this.live.add(req));
      req.on('timeout', () => {
        const connected = req.socket !== null && !req.socket.connecting;
        req.destroy(
          Object.assign(
            new Error(connected ? `no answer within ${timeoutMs} ms` : `no connection within ${timeoutMs} ms`),
            { code: connected ? ANSWER_TIMEOUT : CONNECT_TIMEOUT },
          ),
        );
      });
      // A reset on a kept-alive connection the server was closing as this request went out (its
      // idle timeout): the request never reached it, the race every HTTP client with keep-alive has.
      req.on('error', (e: NodeJS.ErrnoException) =>
        reject(
          req.reusedSocket && STALE_CONNECTION.has(e.code ?? '') ? Object.assign(e, { staleConnection: true }) : e,
        ),
      );
      req.end(body);
    });
  }

  /** Sends one request; returns the parsed JSON body of a 2xx answer. */
  async request<T>(spec: RequestSpec): Promise<T> {
    const idempotent = spec.retrySafe ?? spec.method !== 'POST';
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(spec.query ?? {})) if (v !== undefined) qs.set(k, String(v));
    const path = `${this.basePath}${spec.path}${qs.size ? `?${qs}` : ''}`;
    const write = spec.method !== 'GET';
    const body = spec.body === undefined ? undefined : JSON.stringify(spec.body);
    const kind = spec.kind ?? `${spec.method} ${spec.path}`;
    let staleRetried = false;
    for (let attempt = 1; ; attempt++) {
      if (this.stopped) throw new RequestsStoppedError(spec.method, spec.path);
      if (write) await this.writeSem.acquire();
      await this.sem.acquire();
      // An operation's time limit (a Terraform `timeouts` block): no attempt starts past it.
      const left = deadlineLeft();
      if (left && left.ms <= 0) {
        this.sem.release();
        if (write) this.writeSem.release();
        throw new DeadlineExceededError(left.what, `${spec.method} ${spec.path}`);
      }
      let status: number;
      let text: string;
      let headers: Record<string, string | string[] | undefined>;
      try {
        if (this.limiter) await this.limiter.take();
        if (this.stopped) throw new RequestsStoppedError(spec.method, spec.path);
        this.requestCounts[kind] = (this.requestCounts[kind] ?? 0) + 1;
        const res = await this.exchange(
          spec.method,
          path,
          {
            accept: 'application/json',
            'user-agent': this.opts.userAgent ?? 'kms-sync',
            ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          },
          body,
          { 'x-api-key': this.opts.apiKey },
          left ? Math.max(1, Math.min(this.opts.timeoutMs, left.ms)) : this.opts.timeoutMs,
        );
        status = res.statusCode;
        headers = res.headers;
        text = res.text;
      } catch (err) {
        // Refused or cut by stop(): said once by whoever stopped it, never as a network failure. A
        // write cut on the wire may have taken effect: that is an unknown outcome, never "not sent".
        if (err instanceof RequestsStoppedError) throw err;
        if (this.stopped || (err as NodeJS.ErrnoException).code === 'STOPPED')
          throw write && !idempotent
            ? new AmbiguousWriteError(spec.method, spec.path, 'cut off by an interrupt')
            : new RequestsStoppedError(spec.method, spec.path);
        // A read on a connection the server had just closed is sent again at once on a new one, once,
        // without a retry line or an attempt (Node's documented answer to req.reusedSocket).
        if (idempotent && !staleRetried && (err as { staleConnection?: boolean }).staleConnection) {
          staleRetried = true;
          attempt--;
          continue;
        }
        const code = connectErrorCode(err);
        const neverSent = CONNECT_ERRORS.has(code);
        const reason = code || (err as Error).message;
        if (!neverSent && !idempotent)
          throw new AmbiguousWriteError(spec.method, spec.path, `connection failed: ${reason}`);
        if (PERMANENT_ERRORS.has(code) || attempt >= this.opts.maxAttempts)
          throw this.networkError(spec.method, path, code, reason, attempt);
        await this.backoff(spec, attempt, undefined, reason);
        continue;
      } finally {
        this.sem.release();
        if (write) this.writeSem.release();
      }
      if (status >= 200 && status < 300) {
        const { value, problem } = readSuccess(text, firstHeader(headers['content-type']), spec.expect);
        // Raw keys are redacted by value from the moment they are parsed: the service's key format
        // is not fixed (no prefix to recognise them by), and a later error may echo one.
        if (write) registerRawKeys(value);
        if (problem === undefined) return value as T;
        // A write answered with something unreadable may still have happened: re-read to find out.
        if (write) throw new AmbiguousWriteError(spec.method, spec.path, `the ${status} answer ${problem}`);
        throw new UnexpectedResponseError(
          spec.method,
          path,
          status,
          `${problem} (is ${this.origin}${this.basePath} the service's API?)`,
        );
      }
      const err = parseError(spec.method, spec.path, status, text, firstHeader(headers['content-type']));
      // A 429 or 503 says the request was not processed: safe to retry even a create.
      const notProcessed = NOT_PROCESSED_STATUS.has(status) && !(spec.issuesKeys && status === 503);
      const retryable = RETRYABLE_STATUS.has(status) && (idempotent || notProcessed);
      if (!retryable) {
        if (!idempotent && status >= 500)
          throw new AmbiguousWriteError(spec.method, spec.path, `${status} ${err.code}`);
        throw err;
      }
      if (attempt >= this.opts.maxAttempts) throw err;
      await this.backoff(spec, attempt, retryAfterMs(headers['retry-after']), `${status} ${err.code}`);
    }
  }

  /** Our wording for a service that could not be reached; names the service URL, never credentials. */
  private networkError(method: string, path: string, code: string, reason: string, attempts: number): NetworkError {
    const tries = attempts > 1 ? ` after ${attempts} attempts` : '';
    const host = new URL(this.origin).hostname;
    if (code === 'ENOTFOUND')
      return new NetworkError(
        `${method} ${path}: the service host '${host}' does not resolve (DNS: no such name; not retried): check the service URL ${this.origin}${this.basePath} (see docs/troubleshooting.md#connection-refused)`,
        code,
      );
    if (code === 'EAI_AGAIN')
      return new NetworkError(
        `${method} ${path}: the name server did not answer for '${host}'${tries} (DNS EAI_AGAIN): check the network, or the service URL ${this.origin}${this.basePath}`,
        code,
      );
    if (code === 'BODY_TOO_LARGE')
      return new NetworkError(
        `${method} ${path}: the answer is larger than ${Math.round(this.opts.maxBodyBytes / 1024 / 1024)} MB, the most kms-sync reads of one answer; stopped reading it (not retried): is ${this.origin}${this.basePath} the service's API?`,
        code,
      );
    if (code === 'ECONNREFUSED')
      return new NetworkError(
        `${method} ${path}: connection refused by ${this.origin}${tries}: is the service running at ${this.origin}${this.basePath}? (see docs/troubleshooting.md#connection-refused)`,
        code,
      );
    return new NetworkError(`${method} ${path}: ${reason}${tries} (service at ${this.origin})`, code);
  }

  private async backoff(spec: RequestSpec, attempt: number, retryAfter: number | undefined, reason: string) {
    const exp = Math.min(this.opts.maxDelayMs, this.opts.baseDelayMs * 2 ** (attempt - 1));
    const delayMs = Math.min(this.opts.maxDelayMs, retryAfter ?? Math.random() * exp);
    if (this.stopped) throw new RequestsStoppedError(spec.method, spec.path);
    // A retry that would start past the operation's time limit is not waited for.
    const left = deadlineLeft();
    if (left && left.ms <= delayMs)
      throw new DeadlineExceededError(
        left.what,
        `${spec.method} ${spec.path} (retry ${attempt + 1}, after: ${reason})`,
      );
    this.opts.onRetry?.({ method: spec.method, path: spec.path, attempt, delayMs, reason });
    await sleep(delayMs);
  }
}

/** Errors of a request written on a kept-alive connection the server had closed. */
const STALE_CONNECTION = new Set(['ECONNRESET', 'EPIPE']);

/**
 * A body's text. JSON answers are nearly always ASCII, which decodes as Latin-1 to the same string
 * with a copy instead of UTF-8 validation (a plan of 100,000 clients reads ~75 MB of them).
 */
function bodyText(chunks: Buffer[]): string {
  const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  return isAscii(body) ? body.toString('latin1') : body.toString('utf8');
}

/** The system error code of a failed connection (happy eyeballs may aggregate several). */
function connectErrorCode(err: unknown): string {
  const e = err as { code?: string; message?: string; errors?: { code?: string }[] };
  if (e.code && e.code !== 'ERR_AGGREGATE') return e.code;
  const inner = e.errors?.find((x) => x.code)?.code;
  if (inner) return inner;
  return /ECONNREFUSED/.test(e.message ?? '') ? 'ECONNREFUSED' : (e.code ?? '');
}

/** Every `keys[].key` string of a write's answer (a client, or a list of clients) is registered for redaction. */
function registerRawKeys(value: unknown, depth = 0): void {
  if (depth > 3 || value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    for (const item of value) registerRawKeys(item, depth + 1);
    return;
  }
  const keys = (value as { keys?: unknown }).keys;
  if (!Array.isArray(keys)) return;
  for (const k of keys) {
    const raw = k !== null && typeof k === 'object' ? (k as { key?: unknown }).key : undefined;
    if (typeof raw === 'string' && raw !== '') registerSecret(raw, 'raw key');
  }
}

/** The JSON of a 2xx answer, or what is wrong with it. An empty body (204) is undefined. */
function readSuccess(
  text: string,
  contentType: string | undefined,
  expect: RequestSpec['expect'],
): { value?: unknown; problem?: string } {
  const type = contentType?.split(';')[0]?.trim();
  if (text !== '' && type && !isJsonType(contentType!))
    return {
      problem: `has content type ${printable(type).slice(0, 80)} instead of application/json (a proxy or login page answers like this)`,
    };
  let value: unknown;
  if (text !== '') {
    try {
      value = JSON.parse(text);
    } catch {
      return {
        problem: `${type ? `says ${printable(type).slice(0, 80)}` : 'has no content type'} but its body is not valid JSON (${text.length} characters)`,
      };
    }
  }
  const problem = expect?.(value);
  return problem === undefined ? { value } : { problem: `is not the documented shape: ${problem}` };
}

function parseError(
  method: string,
  path: string,
  status: number,
  text: string,
  contentType: string | undefined,
): ApiError {
  try {
    const j = JSON.parse(text) as { code?: unknown; error?: unknown; message?: unknown };
    if (!j || typeof j !== 'object') throw new Error('not an object');
    const code = typeof j.code === 'string' ? j.code : `HTTP_${status}`;
    const message =
      typeof j.error === 'string' ? j.error : typeof j.message === 'string' ? j.message : printable(text.slice(0, 200));
    return new ApiError(method, path, status, code, printable(message));
  } catch {
    const type = contentType?.split(';')[0]?.trim();
    const what =
      type && !isJsonType(type)
        ? `a ${printable(type).slice(0, 80)} answer`
        : 'an answer that is not the documented JSON error';
    const detail = text ? `${what}: ${printable(text.slice(0, 120))}${text.length > 120 ? '…' : ''}` : 'no body';
    return new ApiError(method, path, status, `HTTP_${status}`, detail);
  }
}
