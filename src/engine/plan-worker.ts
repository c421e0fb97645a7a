// A worker thread of a plan made on several threads (engine/plan-threads.ts): it reads, loads and
// plans whole environments, as planFor's loop does on one thread (engine/run.ts planStreamed), and
// hands each environment's plan part back. It builds the configuration's skeleton from the main
// thread's skeleton read (plain data, no text), and each environment's clients and endpoints from
// the texts of their blocks, sent with the environment. It reads the service through a transport
// of its own, whose share of the reads in flight the main thread gave it. It writes nothing.
import { parentPort, workerData } from 'node:worker_threads';
import { KmsClient, type PageRead } from '../api/client.js';
import { NotStreamable, StreamedBodies } from '../config/index.js';
import { policedEnv } from '../config/load.js';
import { readEnvAlone } from '../live/read.js';
import { emptyLiveState, type DesiredState, type LiveState } from '../model/index.js';
import { capacityProblems } from '../plan/capacity.js';
import { buildPlanPhased } from '../plan/diff.js';
import { InventoryIndex, ownedEntries } from '../plan/inventory.js';
import { assessKeys, keysToCheck, type SecretStatus } from '../plan/key-health.js';
import { WARNING_PHASE, type WarningOrder } from '../plan/types.js';
import { mixedStores, noSecretNamesTaken, secretCollisions } from '../secrets/collisions.js';
import { StoreRegistry } from '../secrets/registry.js';
import { holdFromService } from './inventory.js';
import type { EnvJob, EnvResult, PlanThreadInit, ToMain, ToWorker } from './plan-threads.js';
import { portableError } from './plan-threads.js';
import { keepNamed, rotation, storeContactRefused } from './run.js';

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
const now = new Date(init.plan.now);
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

async function planEnv(job: EnvJob): Promise<EnvResult> {
  const pe = job.pe;
  const mine = await bodies!.take(pe, job.texts);
  const envRead = bodies!.envRead;
  // The secret names of this environment, checked as checkSecretNames checks the whole; the main
  // thread checks them against the other environments' (names).
  const seen = noSecretNamesTaken();
  const problems = await secretCollisions({ ...desired, clients: mine.clients }, registry, seen);
  if (problems.length > 0 || mixedStores(seen)) throw new NotStreamable('a secret name needs checking whole');
  const names = {
    taken: [...seen.taken].map(([store, inStore]): [string, string[]] => [store, [...inStore.keys()]]),
    selfNamedIn: [...seen.selfNamedIn],
  };
  if (job.checkOnly) return { envRead, names };
  const live = job.live
    ? await readEnvAlone(api, job.live.env, job.live.embedded, { fingerprints: init.plan.fingerprints })
    : undefined;
  const envDef = job.inDesired ? desired.envs.find((e) => e.projectEnv === pe) : undefined;
  const d: DesiredState = {
    ...desired,
    projects: [],
    envs: envDef ? [envDef] : [],
    templates: job.inDesired ? desired.templates.filter((t) => t.projectEnv === pe) : [],
    ...mine,
  };
  delete d.externalProjects;
  const l: LiveState = live ? live.state : emptyLiveState();
  const owner = init.plan.target.owner;
  const serviceRead: EnvResult['serviceRead'] = [];
  const owned: EnvResult['owned'] = [];
  if (inventory) {
    for (const [x, kept] of holdFromService(inventory, l, owner)) serviceRead.push([x, kept]);
    inventory.markHeld(l);
    if (init.plan.ownedScan) owned.push(...ownedEntries(l, owner));
  }
  const { plan: base, phases } = buildPlanPhased({
    desired: d,
    live: { state: l, duplicates: live?.duplicates ?? [], fingerprints: live?.fingerprints ?? {} },
    prune: init.plan.prune,
    now,
    target: init.plan.target,
    ...(init.plan.takeOwnership ? { takeOwnership: true } : {}),
    ...(inventory ? { inventory } : {}),
  });
  const overCapacity = init.plan.checkCapacity ? capacityProblems(base, l) : [];
  let secrets = new Map<string, SecretStatus>();
  const refused: string[] = [];
  let presenceWarnings: string[] = [];
  if (init.plan.secretCheck) {
    const queries = keysToCheck(d, l, owner).filter((q) => {
      const why = storeContactRefused(registry, q.store, process.env);
      if (why && !refused.includes(why)) refused.push(why);
      return !why;
    });
    // Asked of the main thread in environment order: it holds the stores' presence cache.
    const answer = await new Promise<{ results: [string, SecretStatus][]; warnings: string[] }>((resolve) => {
      answers.set(job.i, resolve);
      send({ type: 'presence', i: job.i, queries });
    });
    secrets = new Map(answer.results);
    presenceWarnings = answer.warnings;
  }
  const plan = assessKeys({
    plan: base,
    desired: d,
    live: l,
    secrets,
    now,
    orphans: job.orphans,
    ...rotation(init.plan),
  });
  const warningOrder = plan.warnings.map((_w, i): WarningOrder => [phases[i] ?? WARNING_PHASE.keys, pe]);
  const kept = emptyLiveState();
  if (live) keepNamed(kept, live.state, plan);
  return {
    envRead,
    names,
    part: { plan, warningOrder },
    ...(live ? { duplicates: live.duplicates } : {}),
    kept: { templates: kept.templates, clients: kept.clients, endpoints: kept.endpoints },
    overCapacity,
    serviceRead,
    owned,
    refused,
    presenceWarnings,
  };
}

send({ type: 'ready' });
