// Requests that never reach a route: what Node's HTTP parser rejects (a malformed request line,
// headers over the size limit, a bad chunk) and CONNECT. Node's defaults answer these with an
// empty body or not at all; a service answers every request in its documented error shape.
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ApiError } from './errors.js';

/** Node's default `maxHeaderSize` (the request line and headers together). */
export const MAX_HEADER_BYTES = 16 * 1024;

/** Our wording for the parser's error codes (llhttp `HPE_*`). */
const PARSER_ERRORS: Record<string, [number, string, string]> = {
  HPE_HEADER_OVERFLOW: [431, 'HEADERS_TOO_LARGE', `the request line and headers exceed ${MAX_HEADER_BYTES} bytes`],
  HPE_INVALID_METHOD: [400, 'BAD_REQUEST', 'malformed request line: expected "METHOD /path HTTP/1.1"'],
  HPE_INVALID_URL: [
    400,
    'BAD_REQUEST',
    'malformed request target: it starts with / and has no space, control or non-ASCII character (percent-encode them)',
  ],
  HPE_INVALID_CONSTANT: [400, 'BAD_REQUEST', 'malformed request line: expected "METHOD /path HTTP/1.1"'],
  HPE_INVALID_VERSION: [400, 'BAD_REQUEST', 'malformed request line: unsupported HTTP version'],
  HPE_INVALID_HEADER_TOKEN: [400, 'BAD_REQUEST', 'a header name has a character that is not allowed'],
  HPE_INVALID_HEADER_VALUE: [400, 'BAD_REQUEST', 'a header value has a character that is not allowed'],
  HPE_LF_EXPECTED: [400, 'BAD_REQUEST', 'malformed line ending: lines end in CRLF'],
  HPE_CR_EXPECTED: [400, 'BAD_REQUEST', 'malformed line ending: lines end in CRLF'],
  HPE_INVALID_CONTENT_LENGTH: [400, 'BAD_REQUEST', 'Content-Length is not a single non-negative integer'],
  HPE_UNEXPECTED_CONTENT_LENGTH: [400, 'BAD_REQUEST', 'Content-Length and Transfer-Encoding must not be sent together'],
  HPE_INVALID_TRANSFER_ENCODING: [
    400,
    'BAD_REQUEST',
    'unsupported Transfer-Encoding, or Transfer-Encoding sent together with Content-Length',
  ],
  HPE_INVALID_CHUNK_SIZE: [400, 'BAD_REQUEST', 'malformed chunked body: a chunk size is not hexadecimal'],
  HPE_INVALID_EOF_STATE: [400, 'BAD_REQUEST', 'the connection ended in the middle of the request'],
  HPE_PAUSED_H2_UPGRADE: [400, 'BAD_REQUEST', 'HTTP/2 is not supported; use HTTP/1.1'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'REQUEST_TIMEOUT', 'the request was not received in time'],
  HPE_HEADERS_TIMEOUT: [408, 'REQUEST_TIMEOUT', 'the request headers were not received in time'],
};

/** Writes a complete error answer straight onto the socket and closes it. */
export function writeRawError(
  socket: Duplex,
  status: number,
  code: string,
  message: string,
  extra: Record<string, string> = {},
): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const body = JSON.stringify({ code, status, error: message });
  const headers = {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(body)),
    Connection: 'close',
    ...extra,
  };
  const head = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ];
  socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
  // A client that never reads must not keep the socket open.
  setTimeout(() => socket.destroy(), 1000).unref();
}

/** The request line around the byte the parser stopped at, split, when it has the usual three parts. */
export function requestLineAt(
  raw: Buffer | undefined,
  at: number | undefined,
): { method: string; target: string } | undefined {
  if (!raw) return undefined;
  const text = raw.toString('latin1');
  const pos = Math.min(Math.max(at ?? 0, 0), text.length);
  const start = text.lastIndexOf('\n', pos - 1) + 1;
  const end = text.indexOf('\r\n', start);
  const m = /^(\S+) (\S+) HTTP\/1\.[01]$/.exec(text.slice(start, end < 0 ? undefined : end));
  return m ? { method: m[1]!, target: m[2]! } : undefined;
}

/**
 * The `clientError` handler: the parser rejected the bytes on this connection. A method it does not
 * know (it only knows the registered ones, upper-case) in an otherwise well-formed request line is
 * answered as the routes would answer it (`refuseMethod`: 405 with Allow, or 404); everything else
 * by PARSER_ERRORS.
 */
export function clientErrorHandler(refuseMethod: (method: string, target: string) => ApiError) {
  return (err: Error & { code?: string; rawPacket?: Buffer; bytesParsed?: number }, socket: Duplex): void => {
    const code = err.code ?? '';
    if (code === 'ECONNRESET' || code === 'EPIPE') {
      socket.destroy();
      return;
    }
    // An answer already under way on this connection cannot be replaced (Node's own handler checks
    // the same): the connection is closed instead.
    const current = (socket as { _httpMessage?: ServerResponse })._httpMessage;
    if (current?.headersSent) {
      socket.destroy();
      return;
    }
    const line = code === 'HPE_INVALID_METHOD' ? requestLineAt(err.rawPacket, err.bytesParsed) : undefined;
    if (line) {
      const refusal = refuseMethod(line.method, line.target);
      const extra = Object.fromEntries(
        Object.entries(refusal.headers).map(([k, v]) => [k === 'allow' ? 'Allow' : k, v]),
      );
      writeRawError(socket, refusal.status, refusal.code, refusal.message, extra);
      return;
    }
    const [status, errorCode, message] = PARSER_ERRORS[code] ?? [
      400,
      'BAD_REQUEST',
      `malformed HTTP request (${code || 'unparseable'})`,
    ];
    writeRawError(socket, status, errorCode, message);
  };
}

/** `connect` handler: the emulator is an origin server, not a proxy. */
export function answerConnect(req: IncomingMessage, socket: Duplex): void {
  writeRawError(
    socket,
    405,
    'METHOD_NOT_ALLOWED',
    `CONNECT is not supported: the emulator is not a proxy (target ${JSON.stringify(String(req.url).slice(0, 80))})`,
    { Allow: 'GET, POST, PUT, DELETE' },
  );
}
