// A worker thread of a plan made on several threads (engine/plan-threads.ts): it reads, loads and
// plans whole environments with the engine's function that planFor's loop calls on one thread
// (engine/plan-env.ts planEnvironment), and hands each environment's plan part back. It builds the configuration's skeleton from the main
// thread's skeleton read (plain data, no text), and each environment's clients and endpoints from
// the texts of their blocks, sent with the environment or read from the file by offset (an ASCII
// one: StreamedBodies.take), whose lines it scans itself. It reads the service through a transport
// of its own, whose share of the reads in flight the main thread gave it. It writes nothing.
import { parentPort, workerData } from 'node:worker_threads';
import { KmsClient, type PageRead } from '../api/client.js';
import { StreamedBodies } from '../config/index.js';
import { policedEnv } from '../config/load.js';
import { readEnvAlone } from '../live/read.js';
import { emptyLiveState } from '../model/index.js';
import { InventoryIndex } from '../plan/inventory.js';
import type { SecretStatus } from '../plan/key-health.js';
import { noSecretNamesTaken } from '../secrets/collisions.js';
import { StoreRegistry } from '../secrets/registry.js';
import { keepNamed, planEnvironment, rotation, takeEnvBodies, type PartSettings } from './plan-env.js';
import type { EnvJob, EnvResult, PlanThreadInit, ToMain, ToWorker } from './plan-threads.js';
import { portableError } from './plan-threads.js';

const init = workerData as PlanThreadInit;
const port = parentPort!;
const send = (m: ToMain) => port.postMessage(m);

const env = init.envPolicy ? policedEnv(init.envVars, init.envPolicy) : init.envVars;
const bodies = StreamedBodies.assemble(init.skeleton, env, () => '');
if (!bodies) throw new Error('the skeleton of the configuration does not build in a worker thread');
const desired = bodies.skeletonState;
const registry = new StoreRegistry({ declarations: desired.stores, baseDir: init.baseDir, policy: init.policy });
const api = new KmsClient({
  ...init.http,
  onRetry: (info) => send({ type: 'retry', info }),
});
// Pages read, for the terminal's progress line only (init.pages): sent in batches, since a message
// per page cost a worker ~1.7 CPU-s of the 1,000,000-client plan.
const pages: PageRead[] = [];
let pagesTimer: NodeJS.Timeout | undefined;
const flushPages = () => {
  if (pagesTimer) clearTimeout(pagesTimer);
  pagesTimer = undefined;
  if (pages.length) send({ type: 'pages', es: pages.splice(0) });
};
if (init.pages)
  api.onPageRead = (e) => {
    pages.push(e);
    pagesTimer ??= setTimeout(flushPages, 100);
  };
const inventory = init.plan.inventory ? InventoryIndex.of(init.plan.inventory) : undefined;
const answers = new Map<number, (a: { results: [string, SecretStatus][]; warnings: string[] }) => void>();

port.on('message', (m: ToWorker) => {
  if (m.type === 'presence') {
    answers.get(m.i)?.(m);
    answers.delete(m.i);
  } else if (m.type === 'env') {
    planEnv(m.job).then(
      (result) => {
        flushPages();
        send({ type: 'done', i: m.job.i, result });
      },
      (e: unknown) => send({ type: 'failed', i: m.job.i, error: portableError(e) }),
    );
  } else if (m.type === 'stop') {
    api.http.stop();
    void api.close().then(() => port.close());
  }
});

const settings: PartSettings = {
  prune: init.plan.prune,
  ...(init.plan.takeOwnership ? { takeOwnership: true } : {}),
  ...rotation(init.plan),
  now: new Date(init.plan.now),
  target: init.plan.target,
  checkCapacity: init.plan.checkCapacity,
  secretCheck: init.plan.secretCheck,
  registry,
  ...(inventory ? { inventory } : {}),
  ownedScan: init.plan.ownedScan,
};

/** One environment planned as planFor plans it on one thread (engine/plan-env.ts planEnvironment). */
async function planEnv(job: EnvJob): Promise<EnvResult> {
  const pe = job.pe;
  // The secret names of this environment, checked as checkSecretNames checks the whole; the main
  // thread checks them against the other environments' (names).
  const seen = noSecretNamesTaken();
  let envRead: string[] = [];
  const take = async () => {
    const mine = await takeEnvBodies(bodies!, pe, { desired, registry, seen }, job.parts);
    envRead = bodies!.envRead;
    return mine;
  };
  const names = () => ({
    taken: [...seen.taken].map(([store, inStore]): [string, string[]] => [store, [...inStore.keys()]]),
    selfNamedIn: [...seen.selfNamedIn],
  });
  if (job.checkOnly) {
    await take();
    return { envRead, names: names() };
  }
  const { planned, live } = await planEnvironment(
    settings,
    {
      pe,
      desired,
      envDef: job.inDesired ? desired.envs.find((e) => e.projectEnv === pe) : undefined,
      templates: job.inDesired ? desired.templates.filter((t) => t.projectEnv === pe) : [],
      orphans: job.orphans,
      take,
      read: async () =>
        job.live
          ? readEnvAlone(api, job.live.env, job.live.embedded, { fingerprints: init.plan.fingerprints })
          : undefined,
    },
    // Asked of the main thread in environment order: it holds the stores' presence cache.
    (queries) =>
      new Promise((resolve) => {
        answers.set(job.i, resolve);
        send({ type: 'presence', i: job.i, queries });
      }),
  );
  const kept = emptyLiveState();
  if (live) keepNamed(kept, live.state, planned.part.plan);
  return {
    envRead,
    names: names(),
    planned,
    ...(live ? { duplicates: live.duplicates } : {}),
    kept: { templates: kept.templates, clients: kept.clients, endpoints: kept.endpoints },
  };
}

send({ type: 'ready' });
