/**
 * Shared plumbing of the remote backends: URI options, entry validation, bounded concurrency,
 * value-free errors, and a small JSON-over-HTTP client (undici) that never puts a value in a URL
 * or a header and never quotes a request body in an error.
 */
import * as fs from 'node:fs/promises';
import { Agent, request, type Dispatcher } from 'undici';
import { SecretStoreError, describeIoError, redactSecrets, type SecretStoreErrorCode } from '../errors.js';
import type { OpenStoreOptions, SecretEntry } from '../store.js';

/** What a backend's `open` receives (the declaration's `options:` included). */
export type BackendOpenOptions = OpenStoreOptions;

export function envOf(opts: OpenStoreOptions): NodeJS.ProcessEnv {
  return opts.env ?? process.env;
}

/** A string option: URI query first, then the declaration's options. */
export function optString(query: URLSearchParams, opts: BackendOpenOptions, name: string): string | undefined {
  const q = query.get(name);
  if (q !== null) return q;
  const o = opts.options?.[name];
  if (typeof o === 'string') return o;
  if (typeof o === 'number' || typeof o === 'boolean') return String(o);
  return undefined;
}

export function optBool(
  query: URLSearchParams,
  opts: BackendOpenOptions,
  name: string,
  dflt: boolean,
  bad: (why: string) => Error,
): boolean {
  const v = optString(query, opts, name);
  if (v === undefined || v === '') return dflt;
  if (/^(true|1|yes)$/i.test(v)) return true;
  if (/^(false|0|no)$/i.test(v)) return false;
  throw bad(`option '${name}' must be true or false`);
}

/** Refuses query parameters the backend does not know (a typo must not silently change behaviour). */
export function checkKnownParams(query: URLSearchParams, known: readonly string[], bad: (why: string) => Error): void {
  for (const k of query.keys()) {
    if (!known.includes(k)) throw bad(`unknown option '${k}' (known: ${known.join(', ')})`);
  }
}

export function decodeComponent(s: string, bad: (why: string) => Error): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw bad('malformed percent-encoding');
  }
}

/** Same checks as the file store: a name, a non-empty string value, complete metadata. */
export function validateEntry(e: SecretEntry, fail: (message: string) => Error): void {
  if (typeof e.name !== 'string' || e.name === '' || e.name.length > 1024 || /[\u0000-\u001f\u007f]/.test(e.name)) {
    throw fail('invalid secret name (empty, too long or with control characters)');
  }
  if (typeof e.value !== 'string' || e.value === '')
    throw fail(`secret '${e.name}': the value must be a non-empty string`);
  const m = e.meta as unknown as Record<string, unknown> | undefined;
  if (!m || typeof m !== 'object') throw fail(`secret '${e.name}': metadata missing`);
  for (const f of ['projectEnv', 'client', 'key', 'keyId', 'issuedAt'] as const) {
    if (typeof m[f] !== 'string') throw fail(`secret '${e.name}': metadata '${f}' must be a string`);
  }
  if (m.expiresAt !== undefined && m.expiresAt !== null && typeof m.expiresAt !== 'string') {
    throw fail(`secret '${e.name}': metadata 'expiresAt' must be a string or null`);
  }
  if (m.target !== undefined && (typeof m.target !== 'string' || m.target === '')) {
    throw fail(`secret '${e.name}': metadata 'target', when given, must be a non-empty string`);
  }
}

/** The last entry per name wins (a later key supersedes an earlier one in the same batch). */
export function latestPerName(entries: SecretEntry[]): SecretEntry[] {
  const m = new Map<string, SecretEntry>();
  for (const e of entries) m.set(e.name, e);
  return [...m.values()];
}

/** Runs `fn` over `items`, at most `limit` at a time, results in input order. */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/**
 * Removes every value (and its base64 / base64url / URI-encoded forms) from a text, then the
 * generic customer-key redaction. Used on anything a server said before it goes into a message.
 */
export function scrub(text: string, values: Iterable<string> = []): string {
  let t = text;
  for (const v of values) {
    if (!v) continue;
    const forms = [
      v,
      Buffer.from(v, 'utf8').toString('base64'),
      Buffer.from(v, 'utf8').toString('base64url'),
      encodeURIComponent(v),
    ];
    for (const f of forms) if (f.length >= 4) t = t.split(f).join('[REDACTED]');
  }
  return redactSecrets(t);
}

/**
 * Writes many entries, at most `limit` at a time; every entry is tried. If any fail, throws one
 * error naming how many (and which) were not stored, so the journal keeps them all.
 */
export async function putAll(
  entries: SecretEntry[],
  limit: number,
  putOne: (e: SecretEntry) => Promise<void>,
  fail: (message: string, code: SecretStoreErrorCode) => SecretStoreError,
): Promise<void> {
  const errors: { name: string; err: unknown }[] = [];
  await mapLimit(entries, limit, async (e) => {
    try {
      await putOne(e);
    } catch (err) {
      errors.push({ name: e.name, err });
    }
  });
  if (errors.length === 0) return;
  const first = errors[0]!.err;
  if (errors.length === 1 && first instanceof SecretStoreError) throw first;
  const detail = errors
    .map((x) => `${x.name}: ${x.err instanceof Error ? x.err.message : describeIoError(x.err)}`)
    .join('; ');
  const code = first instanceof SecretStoreError ? first.code : 'IO';
  throw fail(`${errors.length} of ${entries.length} secret(s) were not stored (${detail})`, code);
}

// ---------------------------------------------------------------------------------------------
// HTTP

export interface HttpRequest {
  method: string;
  url: URL;
  headers: Record<string, string>;
  /** Serialised as JSON (content-type application/json) unless `rawBody` is given. */
  json?: unknown;
  rawBody?: string;
  contentType?: string;
  /** Safe to resend after a network error, a 429 or a 502/503/504. */
  idempotent: boolean;
}

export interface HttpResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** Parsed JSON, or undefined when the body was empty or not JSON. */
  body: unknown;
}

export interface HttpClientOptions {
  /** Shown in errors, e.g. "Vault". */
  service: string;
  dispatcher?: Dispatcher;
  retries?: number;
  timeoutMs?: number;
  /** Backoff base (ms) between retries. */
  backoffMs?: number;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export class HttpError extends Error {
  readonly status: number | undefined;
  readonly transport: boolean;
  constructor(message: string, status: number | undefined, transport: boolean) {
    super(redactSecrets(message));
    this.name = 'HttpError';
    this.status = status;
    this.transport = transport;
  }
}

/** The most of one answer a store backend reads (a store server the configuration names must not exhaust memory). */
export const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

/** An undici body as text, or undefined (the body destroyed) once it passes `max` bytes. */
export async function boundedText(
  body: Dispatcher.ResponseData['body'],
  max = MAX_ANSWER_BYTES,
): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of body as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > max) {
      body.destroy();
      return undefined;
    }
    chunks.push(c);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export class HttpClient {
  readonly service: string;
  private readonly dispatcher: Dispatcher | undefined;
  private readonly retries: number;
  private readonly timeoutMs: number;
  private readonly backoffMs: number;

  constructor(o: HttpClientOptions) {
    this.service = o.service;
    this.dispatcher = o.dispatcher;
    this.retries = o.retries ?? 2;
    this.timeoutMs = o.timeoutMs ?? 30_000;
    this.backoffMs = o.backoffMs ?? 200;
  }

  /** Sends a request; resolves with any HTTP status, rejects (HttpError) only when no answer came. */
  async send(req: HttpRequest): Promise<HttpResponse> {
    const body = req.rawBody ?? (req.json !== undefined ? JSON.stringify(req.json) : undefined);
    const headers: Record<string, string> = { accept: 'application/json', ...req.headers };
    if (body !== undefined) headers['content-type'] = req.contentType ?? 'application/json';
    for (let attempt = 0; ; attempt++) {
      let res: Dispatcher.ResponseData;
      try {
        res = await request(req.url, {
          method: req.method as Dispatcher.HttpMethod,
          headers,
          ...(body !== undefined ? { body } : {}),
          ...(this.dispatcher ? { dispatcher: this.dispatcher } : {}),
          headersTimeout: this.timeoutMs,
          bodyTimeout: this.timeoutMs,
        });
      } catch (err) {
        if (req.idempotent && attempt < this.retries) {
          await sleep(this.backoffMs * 2 ** attempt);
          continue;
        }
        throw new HttpError(
          `${this.service} ${req.method} ${routeOf(req.url)}: no answer (${describeIoError(err)})`,
          undefined,
          true,
        );
      }
      const text = await boundedText(res.body);
      if (text === undefined) {
        throw new HttpError(
          `${this.service} ${req.method} ${routeOf(req.url)}: the answer is larger than ${MAX_ANSWER_BYTES / 1024 / 1024} MB; stopped reading it`,
          undefined,
          true,
        );
      }
      let parsed: unknown;
      if (text !== '') {
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = undefined;
        }
      }
      const status = res.statusCode;
      if (
        req.idempotent &&
        attempt < this.retries &&
        (status === 429 || status === 502 || status === 503 || status === 504)
      ) {
        const after = Number(res.headers['retry-after']);
        await sleep(Number.isFinite(after) && after > 0 ? Math.min(after, 10) * 1000 : this.backoffMs * 2 ** attempt);
        continue;
      }
      return { status, headers: res.headers, text, body: parsed };
    }
  }
}

/** The path of a URL (no query: queries may carry filters, never values, but stay out anyway). */
export function routeOf(url: URL): string {
  return url.pathname;
}

export function header(res: HttpResponse, name: string): string | undefined {
  const v = res.headers[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
}

/** A dispatcher trusting an extra CA bundle (PEM file), or undefined. */
export async function caDispatcher(caFile: string | undefined, what: string): Promise<Dispatcher | undefined> {
  if (!caFile) return undefined;
  let ca: Buffer;
  try {
    ca = await fs.readFile(caFile);
  } catch (err) {
    throw new SecretStoreError(`${what}: cannot read the CA certificate file ${caFile}: ${describeIoError(err)}`, {
      code: 'NOT_WRITABLE',
    });
  }
  return new Agent({ connect: { ca } });
}

/** A short excerpt of a server's error text, value-free. */
export function serverMessage(res: HttpResponse, values: Iterable<string> = []): string {
  const b = res.body as Record<string, unknown> | undefined;
  let m: string | undefined;
  if (b && typeof b === 'object') {
    const cand = b.errors ?? b.message ?? b.error ?? b.error_description;
    if (Array.isArray(cand)) m = cand.map((x) => (typeof x === 'string' ? x : JSON.stringify(x))).join('; ');
    else if (typeof cand === 'string') m = cand;
    else if (cand !== undefined) m = JSON.stringify(cand);
  }
  if (m === undefined) m = res.text.slice(0, 200);
  return scrub(m.slice(0, 500), values);
}

/**
 * Value-free errors of one remote store, shared by the HTTP backends: every message names the
 * store and what failed, never a value.
 */
export abstract class RemoteStoreBase {
  abstract readonly displayUri: string;
  abstract putMany(entries: SecretEntry[]): Promise<void>;
  abstract existsMany(names: string[]): Promise<Set<string>>;

  /** One secret is a batch of one: the same validation and guarantees as putMany. */
  async put(name: string, value: string, meta: SecretEntry['meta']): Promise<void> {
    await this.putMany([{ name, value, meta }]);
  }

  async exists(name: string): Promise<boolean> {
    return (await this.existsMany([name])).has(name);
  }

  protected error(message: string, code: SecretStoreErrorCode): SecretStoreError {
    return new SecretStoreError(`secret store ${this.displayUri}: ${message}`, { code, store: this.displayUri });
  }

  protected async guard<T>(fn: () => Promise<T>, what: string): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw this.wrap(err, what, 'IO');
    }
  }

  protected wrap(err: unknown, what: string, fallback: SecretStoreErrorCode, values: string[] = []): SecretStoreError {
    if (err instanceof SecretStoreError) {
      if (err.store !== undefined) return err;
      return this.error(`${what}: ${err.message}`, err.code);
    }
    if (err instanceof HttpError)
      return this.error(`${what}: ${err.message}`, fallback === 'NOT_WRITABLE' ? 'NOT_WRITABLE' : 'IO');
    return this.error(`${what}: ${scrub(this.describeFailure(err), values)}`, fallback);
  }

  /** How a failure that is neither ours nor an HTTP status reads (I/O by default). */
  protected describeFailure(err: unknown): string {
    return describeIoError(err);
  }
}
