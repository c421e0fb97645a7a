// The wire thread (issue 37): a plan of one large environment reads ~1,000 pages, and the HTTP
// client's own work (each request's write, the answer's parse, its socket events: ~20% of the main
// thread's CPU profile) ran on the thread that also loads the configuration and plans. A transport
// that reads a long list hands its GET exchanges to a thread of its own (wire-worker.ts) once it
// has started; the main thread keeps the requests' order, limits, retries, parsing and errors.
import type { Worker } from 'node:worker_threads';
import type { Answer, ExchangeTarget } from './exchange.js';
import type { FromWire, ToWire, WireInit } from './wire-worker.js';

/** The worker's module beside this one (dist/api/ or the bundle's dist/bin/); none when run from the sources. */
function wireEntry(): URL | undefined {
  const url = new URL('./wire-worker.js', import.meta.url);
  if (url.protocol !== 'file:') return undefined;
  const { existsSync } = process.getBuiltinModule('node:fs');
  const { fileURLToPath } = process.getBuiltinModule('node:url');
  return existsSync(fileURLToPath(url)) ? url : undefined;
}

/**
 * A list this long or longer (pages after the first) is read through the wire thread: its start (a
 * small module, ~0.1 CPU-s of the other core, Node's HTTP modules compiled again in its isolate)
 * pays back over a few hundred pages; a plan of 10,000 clients (100 pages) stays on one thread.
 */
const WIRE_FROM_PAGES = 200;

/**
 * From how many pages a list's transport starts a wire thread, or undefined for never: on the main
 * thread only (a plan worker reads its environments on a thread of its own already), when the
 * module is there. KMS_SYNC_WIRE_THREAD=0: never; =1: from a list of two pages (tests).
 */
export function wireThreadFrom(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const set = env.KMS_SYNC_WIRE_THREAD?.trim();
  if (set === '0') return undefined;
  if (!process.getBuiltinModule('node:worker_threads').isMainThread || !wireEntry()) return undefined;
  return set === '1' ? 1 : WIRE_FROM_PAGES;
}

/** KMS_SYNC_WIRE_THREAD=1 (tests): the reads go to the thread from when it is made, waiting for its start. */
export const wireThreadEager = (env: NodeJS.ProcessEnv = process.env) => env.KMS_SYNC_WIRE_THREAD?.trim() === '1';

export class WireThread {
  private readonly worker: Worker;
  private readonly pending = new Map<number, { resolve: (a: Answer) => void; reject: (e: Error) => void }>();
  private nextId = 0;
  private failure: Error | undefined;
  /** Set once the thread has started. */
  private ready = false;
  private sent = false;
  private readonly eager: boolean;

  /**
   * `base`: every read's target but its path and time limit (the transport's GET). `eager`: reads
   * are taken before the thread has started (they wait for it), not only from then.
   */
  constructor(base: ExchangeTarget, maxSockets: number, eager = false) {
    this.eager = eager;
    const { Worker } = process.getBuiltinModule('node:worker_threads');
    this.worker = new Worker(wireEntry()!, { workerData: { base, maxSockets } satisfies WireInit });
    // Never what keeps the process alive: it is held only while an exchange waits on it.
    this.worker.unref();
    // The profile's wireMs (KMS_SYNC_PROFILE): from the start of the thread to its first read.
    performance.mark('kms:wire-start');
    this.worker.once('online', () => {
      if (!this.failure) this.ready = true;
    });
    this.worker.on('message', (m: FromWire) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.settled(m.id);
      if (m.type === 'answer') p.resolve({ statusCode: m.statusCode, headers: m.headers, text: m.text });
      else p.reject(Object.assign(new Error(m.error.message), m.error));
    });
    const down = (e: Error) => {
      this.ready = false;
      this.failure ??= e;
      for (const [id, p] of this.pending) {
        this.settled(id);
        p.reject(Object.assign(new Error(`the wire thread stopped: ${e.message}`), { code: 'WIRE_THREAD' }));
      }
    };
    this.worker.on('error', down);
    this.worker.on('exit', (code) => down(new Error(`exit code ${code}`)));
  }

  private settled(id: number) {
    this.pending.delete(id);
    if (this.pending.size === 0) this.worker.unref();
  }

  /** Whether a read goes to the thread now: once it has started (or at once when eager), until it fails or is closed. */
  get takesReads(): boolean {
    return !this.failure && (this.ready || this.eager);
  }

  /** A GET of `path` (the base target's, with its own time limit). */
  get(path: string, timeoutMs: number): Promise<Answer> {
    if (!this.sent) {
      this.sent = true;
      performance.mark('kms:wire-end');
    }
    return new Promise<Answer>((resolve, reject) => {
      const id = this.nextId++;
      if (this.pending.size === 0) this.worker.ref();
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ type: 'get', id, path, timeoutMs } satisfies ToWire);
    });
  }

  /** Cuts every exchange on the wire, each failing with `code` (stop() and close() of the transport). */
  cutAll(code: string): void {
    if (this.ready) this.worker.postMessage({ type: 'cut', code } satisfies ToWire);
  }

  async close(): Promise<void> {
    this.ready = false;
    this.failure ??= new Error('closed');
    // Cut as the transport's own exchanges are on close(): said by whoever closed, never retried.
    for (const [id, p] of this.pending) {
      this.settled(id);
      p.reject(Object.assign(new Error('closed'), { code: 'STOPPED' }));
    }
    await this.worker.terminate();
  }
}
