// The emulator keeps its own contract (schemas/kms-api.openapi.yaml) where Node's HTTP layer would
// answer on its own: methods the parser does not know, headers over the limit, bodies over 1 MiB.
// Over raw sockets, against a real `kms-sync emulator` process.
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertMatchesContract, getOperation, listOperations } from '../support/contract.js';
import {
  isErrorShape,
  rawExchange,
  requestBytes,
  startEmulatorProcess,
  type EmulatorProcess,
  type RawResponse,
} from './raw-http.js';

const API_KEY = 'sk_test_limits';
let emulator: EmulatorProcess;
let port: number;

beforeAll(async () => {
  emulator = await startEmulatorProcess(API_KEY, []);
  port = emulator.port;
});
afterAll(() => emulator?.stop());

function expectError(res: RawResponse, status: number, code: string) {
  expect(
    { status: res.status, code: (res.json as { code?: string } | undefined)?.code },
    res.raw.slice(0, 400),
  ).toEqual({ status, code });
  expect(isErrorShape(res.json, status), res.body).toBe(true);
}

/** The methods the contract lists for a path template. */
const methodsOf = (template: string) =>
  listOperations()
    .filter(([, p]) => p === template)
    .map(([m]) => m.toUpperCase())
    .sort();

describe('methods the HTTP parser does not know', () => {
  for (const method of ['FROB', 'get', 'Post', 'GETX']) {
    it(`${method} on every path of the contract → 405 with the path's methods in Allow, as documented`, async () => {
      const templates = [...new Set(listOperations().map(([, p]) => p))];
      expect(templates.length).toBeGreaterThan(10);
      for (const template of templates) {
        const path = template.replace('{method_path}', 'GET%3A%2Fx').replace(/\{[a-z_]+\}/g, 'x-production');
        const res = await rawExchange(port, requestBytes(method, `/api/v1${path}`, { 'x-api-key': API_KEY }));
        expectError(res, 405, 'METHOD_NOT_ALLOWED');
        expect(res.headers.connection).toBe('close');
        const allow = res.headers.allow?.split(/,\s*/).sort();
        expect(allow, `${method} ${template}`).toEqual(methodsOf(template));
        // (The contract's method names are upper-case: FROB stands for any method it does not list.)
        assertMatchesContract('FROB', template, 405, res.json, res.headers);
      }
    });
  }

  it('on a path that is not in the contract → 404; a request line that is not "METHOD target HTTP/1.1" → 400', async () => {
    expectError(await rawExchange(port, requestBytes('FROB', '/api/v1/nothing/here')), 404, 'NOT_FOUND');
    expectError(await rawExchange(port, 'FROB\r\n\r\n'), 400, 'BAD_REQUEST');
    expectError(await rawExchange(port, 'FROB /api/v1/project HTTP/1.1 extra\r\nHost: x\r\n\r\n'), 400, 'BAD_REQUEST');
  });
});

describe('request headers over 16 KiB', () => {
  it('→ 431 HEADERS_TOO_LARGE, declared by every operation, on every path', async () => {
    for (const [method, template] of listOperations()) {
      expect(getOperation(method, template)?.responses['431'], `${method} ${template} declares 431`).toBeDefined();
      expect(getOperation(method, template)?.responses['408'], `${method} ${template} declares 408`).toBeDefined();
    }
    const res = await rawExchange(
      port,
      requestBytes('GET', '/api/v1/project', { 'x-api-key': API_KEY, 'X-Big': 'a'.repeat(20_000) }),
    );
    expectError(res, 431, 'HEADERS_TOO_LARGE');
    assertMatchesContract('GET', '/project', 431, res.json, res.headers);
  });
});

/**
 * Sends a whole request as a simple client does (every byte written before reading the answer),
 * then reads until the server closes. `writeError` is what the writes ended with (EPIPE when the
 * server closed before reading the body).
 */
function sendAllThenRead(
  head: string,
  body: Buffer,
  chunked = false,
): Promise<{ answer: string; writeError?: string }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    let writeError: string | undefined;
    socket.on('data', (d: Buffer) => {
      answer += d.toString('latin1');
    });
    socket.on('error', (e: NodeJS.ErrnoException) => {
      writeError ??= e.code ?? e.message;
    });
    socket.on('close', () => resolve({ answer, writeError }));
    socket.write(head);
    if (chunked) {
      socket.write(`${body.length.toString(16)}\r\n`);
      socket.write(body);
      socket.end('\r\n0\r\n\r\n');
    } else socket.end(body);
  });
}

describe('bodies over 1 MiB', () => {
  const MiB = 1024 * 1024;
  const head = (length: number | 'chunked') =>
    `POST /api/v1/project HTTP/1.1\r\nHost: x\r\nx-api-key: ${API_KEY}\r\nContent-Type: application/json\r\n${
      length === 'chunked' ? 'Transfer-Encoding: chunked' : `Content-Length: ${length}`
    }\r\n\r\n`;

  for (const size of [MiB + 1, 8 * MiB]) {
    for (const chunked of [false, true]) {
      it(`${size} bytes${chunked ? ' (chunked)' : ''}, all sent before reading → 413 with Connection: close, read without a write error`, async () => {
        const r = await sendAllThenRead(head(chunked ? 'chunked' : size), Buffer.alloc(size, 0x61), chunked);
        expect(r.writeError, r.answer.slice(0, 300)).toBeUndefined();
        expect(r.answer).toMatch(/^HTTP\/1\.1 413 /);
        expect(r.answer).toMatch(/\r\nConnection: close\r\n/i);
        const json = JSON.parse(r.answer.slice(r.answer.indexOf('\r\n\r\n') + 4)) as unknown;
        expect(isErrorShape(json, 413)).toBe(true);
        assertMatchesContract('POST', '/project', 413, json, { connection: 'close' });
      });
    }
  }

  it('a Node.js client sending 8 MiB gets the 413 (no EPIPE), and the emulator serves the next request', async () => {
    const payload = Buffer.alloc(8 * MiB, 0x61);
    const res = await new Promise<{ status: number; body: string } | { error: string }>((resolve) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          path: '/api/v1/project',
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': payload.length, 'x-api-key': API_KEY },
        },
        (r) => {
          let body = '';
          r.on('data', (c: Buffer) => {
            body += c.toString('utf8');
          });
          r.on('end', () => resolve({ status: r.statusCode ?? 0, body }));
        },
      );
      req.on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
      req.end(payload);
    });
    expect(res).toMatchObject({ status: 413 });
    expect(JSON.parse((res as { body: string }).body)).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', status: 413 });
    const list = await rawExchange(port, requestBytes('GET', '/api/v1/project', { 'x-api-key': API_KEY }));
    expect(list.status).toBe(200);
    expect((list.json as { data: unknown[] }).data).toEqual([]);
  });
});
