// A tiny HTTP server on 127.0.0.1 that records every request (method, raw path, query, headers,
// body) and answers through a handler. The fakes of Vault, GitHub, GitLab and the kube API server
// are handlers on top of it.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { scratchDir } from '../../../support/scratch.js';

export interface Recorded {
  method: string;
  /** Raw request target as sent (path + query, still percent-encoded). */
  url: string;
  /** Percent-encoded path without the query. */
  rawPath: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** Parsed JSON body, if any. */
  json: unknown;
}

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export type Handler = (req: Recorded) => Reply | Promise<Reply>;

export interface RecordingServer {
  url: string;
  port: number;
  requests: Recorded[];
  close(): Promise<void>;
}

export interface TlsMaterial {
  key: string;
  cert: string;
  /** The PEM file of the (self-signed) certificate, to trust as a CA. */
  caFile: string;
}

let tlsCache: TlsMaterial | undefined;

/**
 * A self-signed certificate for 127.0.0.1 (openssl), generated once per test file: made again once
 * the file that made it has ended and its scratch folder is gone (a shared worker's next file).
 */
export function selfSignedTls(): TlsMaterial {
  if (tlsCache && fs.existsSync(tlsCache.caFile)) return tlsCache;
  const dir = scratchDir('kms-tls-');
  const keyFile = path.join(dir, 'key.pem');
  const caFile = path.join(dir, 'cert.pem');
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
      '-keyout',
      keyFile,
      '-out',
      caFile,
      '-days',
      '2',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  tlsCache = { key: fs.readFileSync(keyFile, 'utf8'), cert: fs.readFileSync(caFile, 'utf8'), caFile };
  return tlsCache;
}

export async function startRecordingServer(handler: Handler, tls?: TlsMaterial): Promise<RecordingServer> {
  const requests: Recorded[] = [];
  const listener: http.RequestListener = (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const url = req.url ?? '/';
      const q = url.indexOf('?');
      let json: unknown;
      try {
        json = body ? JSON.parse(body) : undefined;
      } catch {
        json = undefined;
      }
      const rec: Recorded = {
        method: req.method ?? 'GET',
        url,
        rawPath: q < 0 ? url : url.slice(0, q),
        query: new URLSearchParams(q < 0 ? '' : url.slice(q + 1)),
        headers: req.headers,
        body,
        json,
      };
      requests.push(rec);
      Promise.resolve()
        .then(() => handler(rec))
        .catch(
          (err: unknown): Reply => ({ status: 500, body: { message: `fake server error: ${(err as Error).message}` } }),
        )
        .then((reply) => {
          const payload =
            reply.body === undefined ? '' : typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body);
          res.writeHead(reply.status, {
            ...(payload ? { 'content-type': 'application/json' } : {}),
            ...(reply.headers ?? {}),
          });
          res.end(payload);
        });
    });
  };
  const server = tls ? https.createServer({ key: tls.key, cert: tls.cert }, listener) : http.createServer(listener);
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

/** Asserts no recorded URL or header value contains any of the secret values (nor their base64). */
export function assertNoValuesInUrlsOrHeaders(requests: Recorded[], values: string[]): void {
  for (const r of requests) {
    const hay = `${r.url}\n${Object.entries(r.headers)
      .map(([k, v]) => `${k}: ${String(v)}`)
      .join('\n')}`;
    for (const v of values) {
      const forms = [v, encodeURIComponent(v), Buffer.from(v).toString('base64'), Buffer.from(v).toString('base64url')];
      for (const f of forms) {
        if (hay.includes(f))
          throw new Error(`a secret value appeared in the URL or headers of ${r.method} ${r.rawPath}`);
      }
    }
  }
}
