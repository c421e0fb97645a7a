// A tiny recording HTTP(S) server on 127.0.0.1 that the vendor fakes build on. Every request is
// recorded (method, path, query, headers, body) so tests can assert the wire format the official
// SDKs produce.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import * as path from 'node:path';
import type { AddressInfo } from 'node:net';
import { scratchDir } from '../../support/scratch.js';

export interface RecordedRequest {
  method: string;
  /** Path without the query, percent-decoding left as sent. */
  path: string;
  query: URLSearchParams;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
}

export type Handler = (req: RecordedRequest) => Reply | Promise<Reply>;

export interface FakeServer {
  url: string;
  port: number;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

export async function startFake(handler: Handler, tls?: { key: string; cert: string }): Promise<FakeServer> {
  const requests: RecordedRequest[] = [];
  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const u = new URL(req.url ?? '/', 'http://x');
      const rec: RecordedRequest = {
        method: req.method ?? '',
        path: u.pathname,
        query: u.searchParams,
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      requests.push(rec);
      Promise.resolve()
        .then(() => handler(rec))
        .catch((err: unknown) => ({ status: 500, body: { message: `fake server bug: ${String(err)}` } }) as Reply)
        .then((r) => {
          const body = r.body === undefined ? '' : typeof r.body === 'string' ? r.body : JSON.stringify(r.body);
          res.writeHead(r.status, {
            'content-type': 'application/json',
            ...r.headers,
            'content-length': String(Buffer.byteLength(body)),
          });
          res.end(body);
        });
    });
  };
  const server = tls ? https.createServer({ key: tls.key, cert: tls.cert }, onRequest) : http.createServer(onRequest);
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `${tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    port,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A self-signed certificate for 127.0.0.1 / localhost, made with the openssl CLI. */
export function selfSignedCert(): { key: string; cert: string } {
  const dir = scratchDir('kms-sync-tls-');
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '2',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1,DNS:localhost',
        '-keyout',
        path.join(dir, 'key.pem'),
        '-out',
        path.join(dir, 'cert.pem'),
      ],
      { stdio: 'pipe' },
    );
    return {
      key: fs.readFileSync(path.join(dir, 'key.pem'), 'utf8'),
      cert: fs.readFileSync(path.join(dir, 'cert.pem'), 'utf8'),
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** No raw key in the request line or any header (bodies legitimately carry it to the store). */
export function expectNoSecretInUrlOrHeaders(reqs: RecordedRequest[], values: string[]): void {
  for (const r of reqs) {
    const head = `${r.method} ${r.url}\n${JSON.stringify(r.headers)}`;
    for (const v of values) {
      if (head.includes(v) || head.includes(encodeURIComponent(v)))
        throw new Error(`a raw key leaked into the URL or headers of ${r.method} ${r.path}`);
    }
    if (/kmsc_[A-Za-z0-9_-]{8,}/.test(head))
      throw new Error(`something shaped like a customer key is in the URL or headers of ${r.method} ${r.path}`);
  }
}
