// A small gRPC server over node:http2: unary calls and one server-streaming call, which is all
// go-plugin and tfplugin6 use. @grpc/grpc-js spent most of a 1,000-resource plan's provider time
// in its per-call layers (call objects, metadata, filters); this speaks the same wire format
// (gRPC over HTTP/2, https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md) with
// one message in, one message out per call. Compression is refused (go-plugin never asks for it).
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';

/** gRPC status codes used here. */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
} as const;

/** A call that fails with a gRPC status (the host sees the code and the details). */
export class GrpcError extends Error {
  readonly code: number;
  constructor(code: number, details: string) {
    super(details);
    this.code = code;
  }
}

/** A response already encoded (answers that never change, encoded at build time): sent as these bytes. */
export class EncodedMessage {
  readonly bytes: Buffer;
  constructor(bytes: Buffer) {
    this.bytes = bytes;
  }
}

/** One method of a service: its path and its message codecs (as protocol.ts builds them). */
export interface MethodDefinition {
  path: string;
  responseStream: boolean;
  requestDeserialize: (bytes: Buffer) => unknown;
  responseSerialize: (message: unknown) => Buffer;
}
export type ServiceDefinition = Record<string, MethodDefinition>;

/** A unary call: the decoded request in, the response message out; a throw ends it with an error status. */
export type UnaryHandler = (request: unknown) => Promise<unknown> | unknown;
/** A server-streaming call, held open until `end()` or until the client goes away (`onCancel`). */
export interface ServerStream {
  write(message: unknown): void;
  end(): void;
  onCancel(listener: () => void): void;
}
export type StreamHandler = (request: unknown, stream: ServerStream) => void;

export interface TlsOptions {
  /** PEM of our certificate and key. */
  cert: Buffer;
  key: Buffer;
  /** PEM of the one client certificate accepted (mutual TLS). */
  clientCa: Buffer;
}

const GRPC_HEADERS = { ':status': 200, 'content-type': 'application/grpc+proto', 'grpc-accept-encoding': 'identity' };
// No `date` header (node:http2 reads `sendDate` though its types omit it): gRPC does not read it, and
// formatting it cost ~10% of a call's CPU, thousands of calls per plan.
const RESPOND: http2.ServerStreamResponseOptions = { waitForTrailers: true, sendDate: false } as never;
const RESPOND_ENDED: http2.ServerStreamResponseOptions = { endStream: true, sendDate: false } as never;

/** grpc-message is percent-encoded (printable ASCII but '%' passes as is). */
const encodeMessage = (s: string) => s.replace(/[^\x20-\x24\x26-\x7e]+/g, (m) => encodeURIComponent(m));

function frame(message: Buffer): Buffer {
  const out = Buffer.allocUnsafe(5 + message.length);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  message.copy(out, 5);
  return out;
}

/** The trailers of a call that succeeded (the stream may have been reset meanwhile: then nothing is sent). */
function sendOk(stream: http2.ServerHttp2Stream): void {
  try {
    stream.sendTrailers({ 'grpc-status': '0' });
  } catch {
    // reset by the client
  }
}

export class GrpcServer {
  private readonly methods = new Map<string, { def: MethodDefinition; unary?: UnaryHandler; stream?: StreamHandler }>();
  private server: http2.Http2Server | http2.Http2SecureServer | undefined;
  private readonly sessions = new Set<http2.ServerHttp2Session>();
  /** Calls whose handler has not answered yet: a graceful shutdown waits for them. */
  private running = 0;
  private drained: (() => void)[] = [];

  private readonly maxMessageBytes: number;
  constructor(maxMessageBytes: number) {
    this.maxMessageBytes = maxMessageBytes;
  }

  addService(service: ServiceDefinition, handlers: Record<string, UnaryHandler | StreamHandler>): void {
    for (const [name, def] of Object.entries(service)) {
      const h = handlers[name];
      if (!h) continue;
      this.methods.set(
        def.path,
        def.responseStream ? { def, stream: h as StreamHandler } : { def, unary: h as UnaryHandler },
      );
    }
  }

  /** Listens on 127.0.0.1:port (0: any free port); resolves with the port. */
  listen(port: number, tls?: TlsOptions): Promise<number> {
    const settings: http2.ServerOptions = {
      // One session carries every call of a command (thousands): the default 10 MB of buffered
      // frames per session is far below a 256 MB message.
      maxSessionMemory: Math.ceil(this.maxMessageBytes / 1_000_000) * 2 + 10,
      settings: { initialWindowSize: 4 * 1024 * 1024, maxConcurrentStreams: 1_000 },
    };
    const server = tls
      ? http2.createSecureServer({
          ...settings,
          cert: tls.cert,
          key: tls.key,
          ca: tls.clientCa,
          requestCert: true,
          rejectUnauthorized: true,
          minVersion: 'TLSv1.2',
        })
      : http2.createServer(settings);
    server.on('session', (session) => {
      this.sessions.add(session);
      session.on('close', () => this.sessions.delete(session));
      session.on('error', () => undefined);
    });
    server.on('stream', (stream, headers) => this.onStream(stream, headers));
    // A failed TLS handshake (a stranger's certificate) ends that connection only.
    server.on('tlsClientError', () => undefined);
    server.on('sessionError', () => undefined);
    this.server = server;
    return new Promise((resolve, reject) => {
      const failed = (e: Error) => reject(e);
      server.once('error', failed);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', failed);
        server.on('error', () => undefined);
        resolve((server.address() as AddressInfo).port);
      });
    });
  }

  private onStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    stream.on('error', () => undefined);
    const method = this.methods.get(String(headers[':path']));
    const contentType = String(headers['content-type'] ?? '');
    if (headers[':method'] !== 'POST' || !contentType.startsWith('application/grpc')) {
      stream.respond({ ':status': 415 }, { endStream: true });
      return;
    }
    if (!method) {
      this.fail(stream, GrpcStatus.UNIMPLEMENTED, `unknown method ${String(headers[':path'])}`);
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let refused = false;
    stream.on('data', (chunk: Buffer) => {
      if (refused) return;
      size += chunk.length;
      if (size > this.maxMessageBytes + 5) {
        refused = true;
        this.fail(stream, GrpcStatus.RESOURCE_EXHAUSTED, `request larger than ${this.maxMessageBytes} bytes`);
        return;
      }
      chunks.push(chunk);
    });
    stream.on('end', () => {
      if (refused) return;
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
      if (body.length < 5) return this.fail(stream, GrpcStatus.INVALID_ARGUMENT, 'no request message');
      if (body[0] !== 0) return this.fail(stream, GrpcStatus.UNIMPLEMENTED, 'compressed messages are not accepted');
      const length = body.readUInt32BE(1);
      if (body.length !== 5 + length)
        return this.fail(stream, GrpcStatus.INVALID_ARGUMENT, 'a unary call carries exactly one message');
      let request: unknown;
      try {
        request = method.def.requestDeserialize(body.subarray(5));
      } catch (e) {
        return this.fail(stream, GrpcStatus.INTERNAL, `cannot decode the request: ${(e as Error).message}`);
      }
      if (method.stream) return this.serveStream(stream, method.def, method.stream, request);
      this.serveUnary(stream, method.def, method.unary!, request);
    });
  }

  private serveUnary(stream: http2.ServerHttp2Stream, def: MethodDefinition, handler: UnaryHandler, request: unknown) {
    this.running++;
    const done = () => {
      if (--this.running === 0) for (const f of this.drained.splice(0)) f();
    };
    Promise.resolve()
      .then(() => handler(request))
      .then(
        (response) => {
          let bytes: Buffer;
          try {
            bytes = response instanceof EncodedMessage ? response.bytes : def.responseSerialize(response);
          } catch (e) {
            return this.fail(stream, GrpcStatus.INTERNAL, `cannot encode the response: ${(e as Error).message}`);
          }
          if (bytes.length > this.maxMessageBytes)
            return this.fail(
              stream,
              GrpcStatus.RESOURCE_EXHAUSTED,
              `response larger than ${this.maxMessageBytes} bytes`,
            );
          if (stream.destroyed || stream.closed) return;
          stream.respond(GRPC_HEADERS, RESPOND);
          stream.once('wantTrailers', () => sendOk(stream));
          stream.end(frame(bytes));
        },
        (e: unknown) =>
          this.fail(
            stream,
            e instanceof GrpcError ? e.code : GrpcStatus.UNKNOWN,
            e instanceof Error ? e.message : String(e),
          ),
      )
      // A connection that dropped while the answer was on its way: nothing left to tell.
      .catch(() => undefined)
      .finally(done);
  }

  private serveStream(
    stream: http2.ServerHttp2Stream,
    def: MethodDefinition,
    handler: StreamHandler,
    request: unknown,
  ) {
    if (stream.destroyed || stream.closed) return;
    stream.respond(GRPC_HEADERS, RESPOND);
    stream.once('wantTrailers', () => sendOk(stream));
    let ended = false;
    handler(request, {
      write: (message) => {
        if (!ended && !stream.destroyed) stream.write(frame(def.responseSerialize(message)));
      },
      end: () => {
        if (ended || stream.destroyed) return;
        ended = true;
        stream.end();
      },
      onCancel: (listener) =>
        stream.once('close', () => {
          if (!ended) listener();
        }),
    });
  }

  /** Ends a call with an error status: trailers-only when nothing was sent yet. */
  private fail(stream: http2.ServerHttp2Stream, code: number, details: string): void {
    if (stream.destroyed || stream.closed) return;
    if (stream.headersSent) {
      stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
      return;
    }
    try {
      stream.respond(
        { ...GRPC_HEADERS, 'grpc-status': String(code), 'grpc-message': encodeMessage(details) },
        RESPOND_ENDED,
      );
      // The rest of a request we refused is not read.
      stream.resume();
    } catch {
      // The connection went away meanwhile.
    }
  }

  /** Stops accepting connections, lets the calls in flight answer, then closes every session. */
  tryShutdown(callback: () => void): void {
    const server = this.server;
    if (!server) {
      callback();
      return;
    }
    server.close(() => callback());
    const closeSessions = () => {
      for (const s of this.sessions) s.close();
    };
    if (this.running === 0) closeSessions();
    else this.drained.push(closeSessions);
  }

  /** Drops every connection at once. */
  forceShutdown(): void {
    for (const s of this.sessions) s.destroy();
    this.server?.close();
  }
}
