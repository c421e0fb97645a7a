// One HTTP exchange on a pooled connection, the part of the transport (http.ts) that touches the
// wire: the same code runs on the main thread and on the wire thread (wire-worker.ts), which reads
// the pages of a long list so that the main thread's CPU is left to the configuration and the plan.
// Nothing here imports our other modules: the wire thread loads this file alone.
import { isAscii } from 'node:buffer';
import type { Agent, ClientRequest, IncomingHttpHeaders } from 'node:http';
import type { LookupFunction } from 'node:net';

/** Codes of our own timeouts: no connection within the time limit (never sent), or no answer on one. */
export const CONNECT_TIMEOUT = 'CONNECT_TIMEOUT';
export const ANSWER_TIMEOUT = 'ANSWER_TIMEOUT';

/** Errors of a request written on a kept-alive connection the server had closed. */
const STALE_CONNECTION = new Set(['ECONNRESET', 'EPIPE']);

export interface Answer {
  statusCode: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/** What one exchange sends, and how long and how much it waits for (plain data: it crosses to the wire thread). */
export interface ExchangeTarget {
  protocol: string;
  hostname: string;
  port: string;
  path: string;
  method: string;
  headers: Record<string, string>;
  body: string | undefined;
  /** Set on the request, not in its options: NODE_DEBUG=http prints the options a connection is made with. */
  secretHeaders: Record<string, string>;
  timeoutMs: number;
  maxBodyBytes: number;
}

/**
 * The exchanges on the wire, each in a slot that the next one reuses once it has ended. A Set
 * here kept the pages read alive through the young-generation collections: its table, once in
 * the old generation, is replaced as it grows and shrinks, and the tables left behind point at
 * the requests they held (each request at its answer) until a full collection. 1,000 pages of
 * 100 clients read and dropped, 32 at a time: 29-41% of what each scavenge saw survived it, 12%
 * with slots (5% tracking nothing), so far less is copied and promoted to be collected later.
 */
export class OnTheWire {
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

/**
 * One exchange: the answer's status, headers and body text. A connection or an answer that stays
 * silent for `timeoutMs` fails with CONNECT_TIMEOUT (nothing was sent) or ANSWER_TIMEOUT; other
 * failures carry Node's system error codes (ECONNREFUSED, ECONNRESET, …).
 */
export function exchangeOn(
  pool: { agent: Agent; request: typeof import('node:http').request },
  t: ExchangeTarget,
  live: OnTheWire,
  lookup?: LookupFunction,
): Promise<Answer> {
  return new Promise<Answer>((resolve, reject) => {
    const req = pool.request(
      {
        protocol: t.protocol,
        hostname: t.hostname,
        port: t.port,
        path: t.path,
        method: t.method,
        agent: pool.agent,
        headers:
          t.body === undefined ? t.headers : { ...t.headers, 'content-length': String(Buffer.byteLength(t.body)) },
        timeout: t.timeoutMs,
        ...(lookup ? { lookup } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        const max = t.maxBodyBytes;
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
        res.on('end', () => resolve({ statusCode: res.statusCode ?? 0, headers: res.headers, text: bodyText(chunks) }));
        res.on('error', reject);
      },
    );
    for (const [k, v] of Object.entries(t.secretHeaders)) req.setHeader(k, v);
    req.on('close', live.add(req));
    req.on('timeout', () => {
      const connected = req.socket !== null && !req.socket.connecting;
      req.destroy(
        Object.assign(
          new Error(connected ? `no answer within ${t.timeoutMs} ms` : `no connection within ${t.timeoutMs} ms`),
          { code: connected ? ANSWER_TIMEOUT : CONNECT_TIMEOUT },
        ),
      );
    });
    // A reset on a kept-alive connection the server was closing as this request went out (its
    // idle timeout): the request never reached it, the race every HTTP client with keep-alive has.
    req.on('error', (e: NodeJS.ErrnoException) =>
      reject(req.reusedSocket && STALE_CONNECTION.has(e.code ?? '') ? Object.assign(e, { staleConnection: true }) : e),
    );
    req.end(t.body);
  });
}

/** The pool of one transport: Node's own client, keep-alive connections. */
export function makePool(
  protocol: string,
  maxSockets: number,
): { agent: Agent; request: typeof import('node:http').request } {
  // The module itself, not import(): an ESM import of node:http builds a facade of all its
  // exports, and reading its WebSocket export loads Node's bundled undici (30 ms per run).
  const m = protocol === 'https:' ? process.getBuiltinModule('node:https') : process.getBuiltinModule('node:http');
  return {
    // Idle connections are kept 10 s for the next request, and never keep the process alive.
    agent: new m.Agent({ keepAlive: true, maxSockets, timeout: 10_000 }),
    request: m.request as typeof import('node:http').request,
  };
}

/**
 * A body's text. JSON answers are nearly always ASCII, which decodes as Latin-1 to the same string
 * with a copy instead of UTF-8 validation (a plan of 100,000 clients reads ~75 MB of them).
 */
function bodyText(chunks: Buffer[]): string {
  const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  return isAscii(body) ? body.toString('latin1') : body.toString('utf8');
}
