// A server whose every answer is 200 with a body that does not end on its own (bounded at 300 MiB so
// that a client that never stops reading cannot keep a test busy forever): for the tests that a
// reader stops at its size limit instead of running out of memory.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface EndlessServer {
  port: number;
  /** Bytes of body written so far. */
  sent: () => number;
  close: () => Promise<void>;
}

export async function startEndlessServer(o: {
  chunk: Buffer;
  prefix?: string;
  headers?: Record<string, string>;
}): Promise<EndlessServer> {
  let sent = 0;
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', ...o.headers });
    if (o.prefix) res.write(o.prefix);
    const pump = () => {
      while (!res.destroyed && sent < 300 * 1024 * 1024) {
        sent += o.chunk.length;
        if (!res.write(o.chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    res.on('error', () => undefined);
    pump();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    sent: () => sent,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
