// The wire thread's entry (wire-thread.ts starts it): it makes the HTTP exchanges the main thread
// hands it, on a connection pool of its own, and answers each with its status, headers and body
// text, or its error as data. Retries, parsing and every decision stay on the main thread.
import type { IncomingHttpHeaders } from 'node:http';
import { type ExchangeTarget, exchangeOn, makePool, OnTheWire } from './exchange.js';

/** What the wire thread starts with: the target of every read but its path and time limit, and its connections. */
export interface WireInit {
  base: ExchangeTarget;
  maxSockets: number;
}

/** A message to the wire thread: small, since a page's read sends one. */
export type ToWire = { type: 'get'; id: number; path: string; timeoutMs: number } | { type: 'cut'; code: string };

/** A failed exchange as data: what the transport reads of an error (http.ts connectErrorCode). */
export interface WireError {
  message: string;
  code?: string;
  staleConnection?: boolean;
  errors?: { code?: string }[];
}

/** An answer carries only the headers the transport reads (http.ts). */
export type FromWire =
  | {
      type: 'answer';
      id: number;
      statusCode: number;
      headers: Pick<IncomingHttpHeaders, 'content-type' | 'retry-after'>;
      text: string;
    }
  | { type: 'failed'; id: number; error: WireError };

function asData(e: unknown): WireError {
  const x = e as { message?: unknown; code?: unknown; staleConnection?: unknown; errors?: unknown };
  return {
    message: typeof x?.message === 'string' ? x.message : String(e),
    ...(typeof x?.code === 'string' ? { code: x.code } : {}),
    ...(x?.staleConnection === true ? { staleConnection: true } : {}),
    ...(Array.isArray(x?.errors)
      ? { errors: x.errors.map((i: { code?: unknown }) => (typeof i?.code === 'string' ? { code: i.code } : {})) }
      : {}),
  };
}

// Read from the module when it runs, not imported: a bundle may place this module's code in a chunk
// the main thread loads, where it must do nothing (no parent port) and cost nothing.
const { parentPort: port, workerData } = process.getBuiltinModule('node:worker_threads');
if (port) {
  const { base, maxSockets } = workerData as WireInit;
  const pool = makePool(base.protocol, maxSockets);
  const live = new OnTheWire();
  port.on('message', (m: ToWire) => {
    if (m.type === 'cut') {
      live.cutAll(() => Object.assign(new Error('stopped'), { code: m.code }));
      return;
    }
    exchangeOn(pool, { ...base, path: m.path, timeoutMs: m.timeoutMs }, live).then(
      ({ statusCode, headers, text }) => {
        const kept = { 'content-type': headers['content-type'], 'retry-after': headers['retry-after'] };
        port.postMessage({ type: 'answer', id: m.id, statusCode, headers: kept, text } satisfies FromWire);
      },
      (e: unknown) => port.postMessage({ type: 'failed', id: m.id, error: asData(e) } satisfies FromWire),
    );
  });
}
