// Plans of a fleet made on several threads (issue 37): the main thread reads the configuration's
// skeleton and the service's projects, then hands whole environments to a few worker threads
// (engine/plan-worker.ts), each of which loads, reads and plans them, and takes their plan parts
// back in the environments' order, so the plan is the one a single thread makes. A worker holds
// the configuration's skeleton and the environments it is planning, never the whole; the main
// thread hands each environment's text over, or, for an ASCII file, nothing: the worker reads the
// text from the file by offset (config/paths.ts readPart) and scans its lines, and the main thread
// keeps no text at all. The reads of all workers together stay
// within the transport's limits (HttpTransport.shareOf); the secret stores are asked by the main
// thread alone (it holds their presence cache), in the environments' order.
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { Worker } from 'node:worker_threads';
import { ApiError, NetworkError, RequestsStoppedError, UnexpectedResponseError } from '../api/http.js';
import type { PageRead, WireTemplate } from '../api/client.js';
import type { HttpOptions } from '../api/http.js';
import type { OrphanKey } from '../apply/recover.js';
import { NotStreamable, type HandedPart, type StreamedSkeleton } from '../config/index.js';
import type { DuplicateLive } from '../live/read.js';
import type { LiveEnv, LiveState, OperatorPolicy } from '../model/index.js';
import type { PortableInventory } from '../plan/inventory.js';
import type { SecretStatus } from '../plan/key-health.js';
import type { Plan } from '../plan/types.js';
import { UsageError } from './errors.js';
import type { PlannedPart, SecretQuery } from './plan-env.js';

/**
 * Configurations smaller than this (in characters, ~300,000 clients) are planned on one thread: a
 * worker's start and warm-up (its modules, its code, its heap) cost ~0.5 CPU-s, and 100,000
 * clients over 10 environments (22 M characters) took 5.6-5.8 CPU-s on two workers against 4.65 on
 * one thread (docs/performance.md).
 */
const THREADED_FROM = 64_000_000;
/** Environments a worker holds at once: one planned while the next is read. */
const JOBS_PER_WORKER = 2;

/**
 * How many worker threads plan a streamed configuration of `size` characters: KMS_SYNC_PLAN_THREADS
 * (1: on this thread, as before), else the CPUs the process may use when the configuration is
 * large (THREADED_FROM), else 1.
 */
export function planThreadCount(size: number, env: NodeJS.ProcessEnv = process.env): number {
  const set = env.KMS_SYNC_PLAN_THREADS?.trim();
  if (set) {
    if (!/^\d+$/.test(set) || Number(set) < 1 || Number(set) > 64)
      throw new UsageError(`KMS_SYNC_PLAN_THREADS must be a whole number from 1 to 64 (got ${JSON.stringify(set)})`);
    return workerEntry() ? Number(set) : 1;
  }
  if (size < THREADED_FROM || !workerEntry()) return 1;
  return Math.min(availableParallelism(), 8);
}

/** The worker's module beside this one (dist/engine/ or the bundle's dist/bin/); none when run from the sources. */
function workerEntry(): URL | undefined {
  const url = new URL('./plan-worker.js', import.meta.url);
  return url.protocol === 'file:' && existsSync(fileURLToPath(url)) ? url : undefined;
}

/** What a worker starts with (workerData). */
export interface PlanThreadInit {
  skeleton: StreamedSkeleton;
  envVars: Record<string, string | undefined>;
  /** The policy `${env:}` is read under (none: the variables as they are). */
  envPolicy?: OperatorPolicy;
  policy: OperatorPolicy;
  baseDir: string;
  http: Omit<HttpOptions, 'onRetry' | 'lookup'>;
  /** Whether the pages read are told (the terminal's progress line: PlanThreadHooks.pageRead). */
  pages: boolean;
  plan: {
    prune: boolean;
    takeOwnership?: boolean;
    force?: string[];
    revokeOld?: boolean;
    rotateMissingSecrets?: boolean;
    now: string;
    target: Plan['target'];
    checkCapacity: boolean;
    secretCheck: boolean;
    fingerprints: boolean;
    inventory?: PortableInventory;
    ownedScan: boolean;
  };
}

/** One environment for a worker: planned, or only checked (`checkOnly`: out of the plan's scope, as StreamedBodies.finish checks it). */
export interface EnvJob {
  i: number;
  pe: string;
  /** Its parts (StreamedBodies.handOver): their texts, or nothing for those the worker reads from the file. */
  parts: HandedPart[];
  checkOnly?: true;
  inDesired: boolean;
  live?: { env: LiveEnv; embedded: WireTemplate[] | undefined };
  orphans: OrphanKey[];
}

export interface EnvResult {
  envRead: string[];
  names: { taken: [store: string, names: string[]][]; selfNamedIn: string[] };
  /** The environment's plan part (engine/plan-env.ts planEnvironment); none when only checked. */
  planned?: PlannedPart;
  duplicates?: DuplicateLive[];
  kept?: Pick<LiveState, 'templates' | 'clients' | 'endpoints'>;
}

export type ToWorker =
  | { type: 'env'; job: EnvJob }
  | { type: 'presence'; i: number; results: [string, SecretStatus][]; warnings: string[] }
  | { type: 'stop' };

export type ToMain =
  | { type: 'ready' }
  | { type: 'done'; i: number; result: EnvResult }
  | { type: 'failed'; i: number; error: PortableError }
  | { type: 'presence'; i: number; queries: SecretQuery[] }
  | { type: 'retry'; info: Parameters<NonNullable<HttpOptions['onRetry']>>[0] }
  | { type: 'pages'; es: PageRead[] };

/** An error as data, made again on the main thread as the class it was (those a run's caller tells apart). */
export interface PortableError {
  name: string;
  message: string;
  fields: Record<string, unknown>;
}

const KINDS: Record<string, { prototype: Error }> = {
  ApiError,
  NetworkError,
  RequestsStoppedError,
  UnexpectedResponseError,
  UsageError,
  NotStreamable,
};

export function portableError(e: unknown): PortableError {
  if (!(e instanceof Error)) return { name: 'Error', message: String(e), fields: {} };
  const fields: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(e)) if (v === null || typeof v !== 'object') fields[k] = v;
  return { name: e.constructor.name, message: e.message, fields };
}

function errorOf(p: PortableError): Error {
  const kind = KINDS[p.name];
  const e: Error = kind ? Object.create(kind.prototype) : new Error(p.message);
  Object.assign(e, p.fields, { message: p.message });
  if (kind) Object.defineProperty(e, 'stack', { value: `${p.name}: ${p.message}`, configurable: true, writable: true });
  return e;
}

export interface PlanThreadHooks {
  /** The stores' presence of one environment's keys, asked in environment order. */
  presence(queries: SecretQuery[]): Promise<{ results: [string, SecretStatus][]; warnings: string[] }>;
  retried(info: Parameters<NonNullable<HttpOptions['onRetry']>>[0]): void;
  pageRead(e: PageRead): void;
}

/**
 * Plans `jobs` on `count` worker threads and hands each result to `take` in the jobs' order.
 * `shareOf(k, count)`: worker k's transport settings. Stops every worker on the first failure
 * (thrown, as the class it was) and on `signal`'s stop.
 */
export async function planOnThreads(
  count: number,
  init: (k: number) => PlanThreadInit,
  jobs: Iterator<EnvJob>,
  take: (job: EnvJob, result: EnvResult) => void,
  hooks: PlanThreadHooks,
  onStop: (stop: () => void) => () => void,
): Promise<void> {
  const entry = workerEntry();
  if (!entry) throw new Error('the plan worker module is missing');
  // Loaded here, not with the module: a run planned on one thread (every configuration under
  // THREADED_FROM) never starts a worker, and node:worker_threads cost ~3.5 ms of each start.
  const { Worker } = await import('node:worker_threads');
  const workers: Worker[] = [];
  const inFlight = new Map<number, { job: EnvJob; worker: number }>();
  const done = new Map<number, { job: EnvJob; result: EnvResult }>();
  const load = new Array<number>(count).fill(0);
  const asked = new Map<number, { worker: number; queries: SecretQuery[] }>();
  let nextTake = 0;
  let nextPresence = 0;
  let answering = false;
  let exhausted = false;
  let failure: Error | undefined;
  let finish!: () => void;
  let fail!: (e: Error) => void;
  const finished = new Promise<void>((resolve, reject) => {
    finish = resolve;
    fail = reject;
  });
  const stopAll = (e: Error) => {
    if (failure) return;
    failure = e;
    for (const w of workers) void w.terminate();
    fail(e);
  };
  const dispatch = () => {
    // Results wait for the ones before them: at most a round of jobs beyond the next taken.
    while (!failure && !exhausted && inFlight.size + done.size < 2 * count * JOBS_PER_WORKER) {
      let k = -1;
      for (let w = 0; w < count; w++) if (load[w]! < JOBS_PER_WORKER && (k < 0 || load[w]! < load[k]!)) k = w;
      if (k < 0) return;
      const n = jobs.next();
      if (n.done) {
        exhausted = true;
        break;
      }
      load[k]!++;
      inFlight.set(n.value.i, { job: n.value, worker: k });
      workers[k]!.postMessage({ type: 'env', job: n.value } satisfies ToWorker);
    }
    if (exhausted && inFlight.size === 0 && done.size === 0) finish();
  };
  const answer = async () => {
    if (answering) return;
    answering = true;
    try {
      for (let a = asked.get(nextPresence); a; a = asked.get(nextPresence)) {
        asked.delete(nextPresence);
        const i = nextPresence;
        const reply = await hooks.presence(a.queries);
        workers[a.worker]!.postMessage({ type: 'presence', i, ...reply } satisfies ToWorker);
        nextPresence++;
      }
    } catch (e) {
      stopAll(e as Error);
    } finally {
      answering = false;
    }
  };
  const received = (k: number, m: ToMain) => {
    if (failure) return;
    switch (m.type) {
      case 'ready':
        return;
      case 'retry':
        return hooks.retried(m.info);
      case 'pages':
        for (const e of m.es) hooks.pageRead(e);
        return;
      case 'presence':
        asked.set(m.i, { worker: k, queries: m.queries });
        void answer();
        return;
      case 'failed':
        return stopAll(errorOf(m.error));
      case 'done': {
        const f = inFlight.get(m.i)!;
        inFlight.delete(m.i);
        load[k]!--;
        done.set(m.i, { job: f.job, result: m.result });
        for (let d = done.get(nextTake); d; d = done.get(nextTake)) {
          done.delete(nextTake);
          try {
            take(d.job, d.result);
          } catch (e) {
            return stopAll(e as Error);
          }
          nextTake++;
          if (nextPresence < nextTake) nextPresence = nextTake;
        }
        void answer();
        dispatch();
      }
    }
  };
  const unsubscribe = onStop(() => stopAll(new RequestsStoppedError('GET', '/envs')));
  try {
    for (let k = 0; k < count; k++) {
      const w = new Worker(entry, { workerData: init(k) });
      w.on('message', (m: ToMain) => received(k, m));
      w.on('error', (e) => stopAll(e));
      w.on('exit', (code) => {
        if (code !== 0 && !failure) stopAll(new Error(`a plan worker thread exited with code ${code}`));
      });
      workers.push(w);
    }
    dispatch();
    await finished;
  } finally {
    unsubscribe();
    if (!failure) for (const w of workers) w.postMessage({ type: 'stop' } satisfies ToWorker);
    await Promise.all(workers.map((w) => (failure ? w.terminate() : new Promise((ok) => w.once('exit', ok)))));
  }
}
