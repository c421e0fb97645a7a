// HTTP/1.1 over a raw node:net socket: sends exactly the bytes given (malformed ones included) and
// parses one answer by hand, so parser-level rejects can be seen as a client sees them.
import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { cliPath } from '../support/cli.js';
import { patient } from '../support/patience.js';

export interface RawResponse {
  /** 0 when the connection closed without a complete answer. */
  status: number;
  headers: Record<string, string>;
  body: string;
  /** The body parsed as JSON when it is JSON, else undefined. */
  json: unknown;
  /** Every byte received. */
  raw: string;
}

function parse(all: Buffer, head: boolean): RawResponse | undefined {
  let buf = all;
  let end = buf.indexOf('\r\n\r\n');
  // Interim answers (100 Continue) come before the real one.
  while (end >= 0 && /^HTTP\/1\.[01] 1\d\d/.test(buf.subarray(0, 12).toString('latin1'))) {
    buf = buf.subarray(end + 4);
    end = buf.indexOf('\r\n\r\n');
  }
  if (end < 0) return undefined;
  const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '');
  if (!m) throw new Error(`not an HTTP response: ${JSON.stringify(lines[0])}`);
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const i = line.indexOf(':');
    headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  const status = Number(m[1]);
  let rest = buf.subarray(end + 4);
  let body: Buffer;
  if (head || status === 204 || status === 304) body = Buffer.alloc(0);
  else if (headers['transfer-encoding']?.toLowerCase() === 'chunked') {
    const parts: Buffer[] = [];
    for (;;) {
      const nl = rest.indexOf('\r\n');
      if (nl < 0) return undefined;
      const size = parseInt(rest.subarray(0, nl).toString('latin1'), 16);
      if (rest.length < nl + 2 + size + 2) return undefined;
      if (size === 0) break;
      parts.push(rest.subarray(nl + 2, nl + 2 + size));
      rest = rest.subarray(nl + 2 + size + 2);
    }
    body = Buffer.concat(parts);
  } else if (headers['content-length'] !== undefined) {
    const n = Number(headers['content-length']);
    if (rest.length < n) return undefined;
    body = rest.subarray(0, n);
  } else return undefined; // read to the end of the connection
  const text = body.toString('utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status, headers, body: text, json, raw: all.toString('latin1') };
}

/**
 * Sends `request` on a fresh connection and resolves with the first answer (HEAD: no body).
 * Rejects only on timeout (`timeoutMs`, 5 s unless given: a quiet machine's limit, scaled by
 * patient()); a connection closed without an answer resolves with status 0.
 */
export function rawExchange(
  port: number,
  request: string | Buffer,
  opts: { head?: boolean; timeoutMs?: number; host?: string } = {},
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, opts.host ?? '127.0.0.1');
    let buf = Buffer.alloc(0);
    let done = false;
    const finish = (r: RawResponse | Error) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      if (r instanceof Error) reject(r);
      else resolve(r);
    };
    const limit = patient(opts.timeoutMs ?? 5000);
    const timer = setTimeout(
      () => finish(new Error(`no answer within ${limit} ms to ${JSON.stringify(String(request).slice(0, 120))}`)),
      limit,
    );
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      try {
        const r = parse(buf, opts.head ?? false);
        if (r) finish(r);
      } catch (e) {
        finish(e as Error);
      }
    });
    const closed = () => {
      if (done) return;
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return finish({ status: 0, headers: {}, body: '', json: undefined, raw: buf.toString('latin1') });
      const r = parse(buf, opts.head ?? false);
      if (r) return finish(r);
      // An answer without a length ends with the connection.
      const text = buf.subarray(end + 4).toString('utf8');
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(buf.toString('latin1'))?.[1] ?? 0);
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
      finish({ status, headers: {}, body: text, json, raw: buf.toString('latin1') });
    };
    socket.on('end', closed);
    socket.on('close', closed);
    // The server may close while we still write (e.g. after rejecting the headers): read what it answered.
    socket.on('error', () => closed());
    socket.write(request);
  });
}

/** A well-formed request's bytes; `Connection: close` so the server ends the exchange. */
export function requestBytes(
  method: string,
  target: string,
  headers: Record<string, string> = {},
  body?: string,
): string {
  const all: Record<string, string> = { Host: '127.0.0.1', Connection: 'close', ...headers };
  if (body !== undefined && all['Content-Length'] === undefined && all['Transfer-Encoding'] === undefined)
    all['Content-Length'] = String(Buffer.byteLength(body));
  const head = `${method} ${target} HTTP/1.1\r\n${Object.entries(all)
    .map(([k, v]) => `${k}: ${v}`)
    .join('\r\n')}\r\n\r\n`;
  return body === undefined ? head : head + body;
}

/** True when `json` is the documented error shape `{code, status, error}` for `status`. */
export function isErrorShape(json: unknown, status: number): boolean {
  const j = json as { code?: unknown; status?: unknown; error?: unknown } | undefined;
  return (
    !!j &&
    typeof j === 'object' &&
    typeof j.code === 'string' &&
    /^[A-Z0-9_]+$/.test(j.code) &&
    j.status === status &&
    typeof j.error === 'string' &&
    j.error.length > 0
  );
}

/** `kms-sync emulator` as its own process on a free port; its stderr is kept (tests expect it empty). */
export interface EmulatorProcess {
  child: ChildProcess;
  port: number;
  stderr: () => string;
  stop: () => void;
}

export async function startEmulatorProcess(apiKey: string, extraArgs: string[] = []): Promise<EmulatorProcess> {
  const child = spawn(process.execPath, [cliPath, 'emulator', '--port', '0', ...extraArgs], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      TMPDIR: process.env.TMPDIR,
      NO_COLOR: '1',
      KMS_EMULATOR_API_KEY: apiKey,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString('utf8');
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString('utf8');
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)\/api\/v1/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`the emulator exited (${code}): ${stderr}`)));
  });
  return {
    child,
    port,
    stderr: () => stderr,
    stop: () => {
      child.kill('SIGTERM');
    },
  };
}
