// The small HTTP client the comment publishers share: JSON in and out, bounded retries on 429 and
// 5xx, and error messages that name the method, route and status but never a credential.
import { request } from 'undici';

export class PublishError extends Error {
  readonly status: number | undefined;
  constructor(message: string, status?: number) {
    super(message);
    this.status = status;
  }
}

export interface JsonResponse<T> {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: T;
}

export interface CallOptions {
  /** Shown in errors, e.g. "GitHub API". */
  service: string;
  method: 'GET' | 'POST' | 'PATCH' | 'PUT';
  url: string;
  headers: Record<string, string>;
  body?: unknown;
  /** Retries of 429 / 5xx answers (default 2). */
  retries?: number;
}

const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function messageOf(body: unknown): string {
  if (body && typeof body === 'object') {
    const b = body as { message?: unknown; error?: unknown };
    const m = b.message ?? b.error;
    if (typeof m === 'string') return m;
    if (m !== undefined) return JSON.stringify(m);
  }
  return typeof body === 'string' ? body.slice(0, 200) : '';
}

export async function callJson<T>(o: CallOptions): Promise<JsonResponse<T>> {
  const retries = o.retries ?? 2;
  const route = new URL(o.url).pathname;
  for (let attempt = 0; ; attempt++) {
    let res;
    try {
      res = await request(o.url, {
        method: o.method,
        headers: { ...o.headers, ...(o.body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(o.body !== undefined ? { body: JSON.stringify(o.body) } : {}),
        headersTimeout: 30_000,
        bodyTimeout: 30_000,
      });
    } catch (e) {
      if (attempt < retries && o.method === 'GET') {
        await sleep(250 * 2 ** attempt);
        continue;
      }
      throw new PublishError(`${o.service} ${o.method} ${route}: ${(e as Error).message}`);
    }
    // Bounded: a comment API answer is small; a huge one fails cleanly instead of exhausting memory.
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of res.body as AsyncIterable<Buffer>) {
      size += c.length;
      if (size > MAX_ANSWER_BYTES) {
        res.body.destroy();
        throw new PublishError(
          `${o.service} ${o.method} ${route}: the answer is larger than ${MAX_ANSWER_BYTES / 1024 / 1024} MB; stopped reading it`,
          res.statusCode,
        );
      }
      chunks.push(c);
    }
    const text = Buffer.concat(chunks).toString('utf8');
    let body: unknown = text;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      // keep the text
    }
    if (res.statusCode >= 200 && res.statusCode < 300)
      return { status: res.statusCode, headers: res.headers, body: body as T };
    // A POST answered 5xx may have been processed: retrying it could post the comment twice.
    if ((res.statusCode === 429 || (res.statusCode >= 500 && o.method !== 'POST')) && attempt < retries) {
      const after = Number(res.headers['retry-after']);
      await sleep(Number.isFinite(after) && after > 0 ? Math.min(after, 10) * 1000 : 250 * 2 ** attempt);
      continue;
    }
    const msg = messageOf(body);
    throw new PublishError(
      `${o.service} ${o.method} ${route} failed with ${res.statusCode}${msg ? `: ${msg}` : ''}`,
      res.statusCode,
    );
  }
}

export function header(h: JsonResponse<unknown>['headers'], name: string): string | undefined {
  const v = h[name.toLowerCase()];
  return Array.isArray(v) ? v.join(', ') : v;
}

/** The `rel="next"` target of an RFC 8288 Link header. */
export function nextLink(link: string | undefined): string | undefined {
  if (!link) return undefined;
  for (const part of link.split(',')) {
    const m = /<([^>]+)>\s*;(.*)/.exec(part.trim());
    if (m && /\brel="?([^";]*\s)?next(\s[^";]*)?"?/.test(m[2]!)) return m[1];
  }
  return undefined;
}

export interface UpsertResult {
  action: 'created' | 'updated';
  id: number | string;
  url?: string;
}
