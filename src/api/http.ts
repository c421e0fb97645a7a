// Transport of the service client: one undici pool, bounded concurrency, client-side rate limit,
// retries with exponential backoff and jitter where a retry is safe, typed errors, redaction.
import { Pool } from 'undici';

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly method: string;
  readonly path: string;
  constructor(method: string, path: string, status: number, code: string, message: string) {
    super(`${method} ${path} → ${status} ${code}: ${message}`);
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

/** The service could not be reached at all. */
export class NetworkError extends Error {}

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
  userAgent?: string;
  /** Called before each retry: the CLI prints a plain line. */
  onRetry?: (info: { method: string; path: string; attempt: number; delayMs: number; reason: string }) => void;
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
}

const RETRYABLE_STATUS = new Set([429, 502, 503, 504]);
const CONNECT_ERRORS = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT']);

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
    if (this.active < this.n) { this.active++; return; }
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
      if (this.tokens >= 1) { this.tokens -= 1; return; }
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

export class HttpTransport {
  private readonly pool: Pool;
  private readonly basePath: string;
  private readonly origin: string;
  /** Every request holds it: sized for the reads. */
  private readonly sem: Semaphore;
  /** Writes hold it too (before `sem`): at most `parallelism` of them. */
  private readonly writeSem: Semaphore;
  private readonly limiter?: RateLimiter;
  private readonly opts: Required<Omit<HttpOptions, 'maxRps' | 'onRetry' | 'userAgent'>> & Pick<HttpOptions, 'onRetry' | 'userAgent'>;
  /** Requests sent, by kind (benchmarks and tests read this). */
  readonly requestCounts: Record<string, number> = {};

  constructor(options: HttpOptions) {
    const url = new URL(options.baseUrl);
    this.basePath = url.pathname.replace(/\/+$/, '');
    this.origin = url.origin;
    const parallelism = options.parallelism ?? 8;
    this.opts = {
      maxAttempts: 5, baseDelayMs: 200, maxDelayMs: 30_000, timeoutMs: 30_000, ...options,
      parallelism, readParallelism: options.readParallelism ?? 4 * parallelism,
    };
    const inFlight = Math.max(this.opts.parallelism, this.opts.readParallelism);
    this.pool = new Pool(url.origin, {
      connections: inFlight,
      pipelining: 1,
      headersTimeout: this.opts.timeoutMs,
      bodyTimeout: this.opts.timeoutMs,
      keepAliveTimeout: 10_000,
    });
    this.sem = new Semaphore(inFlight);
    this.writeSem = new Semaphore(this.opts.parallelism);
    if (options.maxRps) this.limiter = new RateLimiter(options.maxRps);
  }

  get totalRequests(): number {
    return Object.values(this.requestCounts).reduce((a, b) => a + b, 0);
  }

  async close(): Promise<void> {
    await this.pool.close();
  }

  /** Sends one request; returns the parsed JSON body of a 2xx answer. */
  async request<T>(spec: RequestSpec): Promise<T> {
    const idempotent = spec.retrySafe ?? spec.method !== 'POST';
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(spec.query ?? {})) if (v !== undefined) qs.set(k, String(v));
    const path = `${this.basePath}${spec.path}${qs.size ? `?${qs}` : ''}`;
    const body = spec.body === undefined ? undefined : JSON.stringify(spec.body);
    const kind = spec.kind ?? `${spec.method} ${spec.path}`;
    const write = spec.method !== 'GET';
    for (let attempt = 1; ; attempt++) {
      if (write) await this.writeSem.acquire();
      await this.sem.acquire();
      let status: number;
      let text: string;
      let headers: Record<string, string | string[] | undefined>;
      try {
        if (this.limiter) await this.limiter.take();
        this.requestCounts[kind] = (this.requestCounts[kind] ?? 0) + 1;
        const res = await this.pool.request({
          method: spec.method,
          path,
          headers: {
            'x-api-key': this.opts.apiKey,
            accept: 'application/json',
            'user-agent': this.opts.userAgent ?? 'kms-sync',
            ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          },
          body,
        });
        status = res.statusCode;
        headers = res.headers;
        text = await res.body.text();
      } catch (err) {
        const code = (err as { code?: string }).code ?? '';
        const neverSent = CONNECT_ERRORS.has(code) || (err as Error).message?.includes('ECONNREFUSED');
        const reason = code || (err as Error).message;
        if (!neverSent && !idempotent) throw new AmbiguousWriteError(spec.method, spec.path, `connection failed: ${reason}`);
        if (attempt >= this.opts.maxAttempts) {
          throw new NetworkError(`${spec.method} ${spec.path}: ${reason} after ${attempt} attempt(s) (service at ${this.origin})`);
        }
        await this.backoff(spec, attempt, undefined, reason);
        continue;
      } finally {
        this.sem.release();
        if (write) this.writeSem.release();
      }
      if (status >= 200 && status < 300) return (text ? JSON.parse(text) : undefined) as T;
      const err = parseError(spec.method, spec.path, status, text);
      // A 429 says the request was not processed: safe to retry even a create.
      const retryable = RETRYABLE_STATUS.has(status) && (idempotent || status === 429);
      if (!retryable) {
        if (!idempotent && status >= 500) throw new AmbiguousWriteError(spec.method, spec.path, `${status} ${err.code}`);
        throw err;
      }
      if (attempt >= this.opts.maxAttempts) throw err;
      await this.backoff(spec, attempt, retryAfterMs(headers['retry-after']), `${status} ${err.code}`);
    }
  }

  private async backoff(spec: RequestSpec, attempt: number, retryAfter: number | undefined, reason: string) {
    const exp = Math.min(this.opts.maxDelayMs, this.opts.baseDelayMs * 2 ** (attempt - 1));
    const delayMs = Math.min(this.opts.maxDelayMs, retryAfter ?? Math.random() * exp);
    this.opts.onRetry?.({ method: spec.method, path: spec.path, attempt, delayMs, reason });
    await sleep(delayMs);
  }
}

function parseError(method: string, path: string, status: number, text: string): ApiError {
  try {
    const j = JSON.parse(text) as { code?: unknown; error?: unknown; message?: unknown };
    const code = typeof j.code === 'string' ? j.code : `HTTP_${status}`;
    const message = typeof j.error === 'string' ? j.error : typeof j.message === 'string' ? j.message : text.slice(0, 200);
    return new ApiError(method, path, status, code, message);
  } catch {
    return new ApiError(method, path, status, `HTTP_${status}`, text.slice(0, 200) || 'no body');
  }
}

