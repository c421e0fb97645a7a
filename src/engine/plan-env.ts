// The plan of one part of a configuration (the projects' own operations, or one environment), the
// same on the main thread (engine/run.ts planStreamed) and on a worker thread (engine/plan-worker.ts):
// the diff, the template capacity, the secret-presence queries, the key assessment, and the
// bookkeeping of the inventory. What differs between the two is passed in: how the stores'
// presence is asked (the main thread holds the presence cache; a worker asks it), how an
// environment's live state is read, and where its clients come from.
import type { OrphanKey } from '../apply/recover.js';
import { NotStreamable, type HandedPart, type StreamedBodies } from '../config/index.js';
import type { LiveEnvRead } from '../live/read.js';
import {
  address,
  emptyLiveState,
  type DesiredClient,
  type DesiredEnv,
  type DesiredState,
  type LiveClient,
  type LiveState,
} from '../model/index.js';
import { capacityProblems, type CapacityProblem } from '../plan/capacity.js';
import { buildPlanPhased, type PlanLive } from '../plan/diff.js';
import type { KeptMatch } from '../plan/kinds/identity-index.js';
import { ownedEntries, type InventoryEntry, type InventoryIndex } from '../plan/inventory.js';
import { assessKeys, keysToCheck, type SecretStatus } from '../plan/key-health.js';
import type { PlanPart } from '../plan/merge.js';
import { WARNING_PHASE, type Plan, type WarningOrder } from '../plan/types.js';
import { mixedStores, secretCollisions, type SecretNamesTaken } from '../secrets/collisions.js';
import type { StoreRegistry } from '../secrets/registry.js';
import { UsageError } from './errors.js';
import { holdFromService, type ServiceInventory } from './inventory.js';

/** A key whose secret the plan checks in its store (keysToCheck). */
export type SecretQuery = ReturnType<typeof keysToCheck>[number];

/** Asks the stores whether the queried keys' secrets are there (in the parts' order: the presence cache is shared). */
export type AskPresence = (
  queries: SecretQuery[],
) => Promise<{ results: Iterable<[string, SecretStatus]>; warnings: string[] }>;

/** What planning a part takes: the same for every part of one plan. */
export interface PartSettings {
  prune: boolean;
  takeOwnership?: boolean;
  force?: string[];
  revokeOld?: boolean;
  rotateMissingSecrets?: boolean;
  now: Date;
  target: Plan['target'];
  /** Refuse a part that fills a template past its maximum (collected in PlannedPart.overCapacity). */
  checkCapacity: boolean;
  /** Check that every managed key's secret is in its store. */
  secretCheck: boolean;
  registry: StoreRegistry;
  /** The configuration's inventory: what it holds of the part's live state is marked held. */
  inventory?: InventoryIndex;
  /** Collect what the part finds owned (PlannedPart.owned). */
  ownedScan: boolean;
}

/** A part's plan and what the run collects of it. */
export interface PlannedPart {
  part: PlanPart;
  overCapacity: CapacityProblem[];
  /** What the service held of this owner's inventory, per environment read. */
  serviceRead: [string, ServiceInventory][];
  owned: InventoryEntry[];
  /** Why stores were not asked (KMS_SYNC_PLAN_STORES), each once. */
  refused: string[];
  presenceWarnings: string[];
}

/** What a plan's key assessment takes of its options (assessKeys), only those set. */
export const rotation = (o: { force?: string[]; revokeOld?: boolean; rotateMissingSecrets?: boolean }) => ({
  ...(o.force ? { force: o.force } : {}),
  ...(o.revokeOld ? { revokeOld: true } : {}),
  ...(o.rotateMissingSecrets ? { rotateMissingSecrets: true } : {}),
});

/**
 * The keys of `desired` whose secrets may be asked of their stores; the stores the operator does
 * not let the plan contact are left out, and why is added to `refused` (each reason once).
 */
export function secretQueries(
  desired: DesiredState,
  live: LiveState,
  owner: string,
  registry: StoreRegistry,
  refused: string[],
  clientMatch?: KeptMatch<DesiredClient, LiveClient>,
): SecretQuery[] {
  return keysToCheck(desired, live, owner, clientMatch).filter((q) => {
    const why = storeContactRefused(registry, q.store, process.env);
    if (why && !refused.includes(why)) refused.push(why);
    return !why;
  });
}

/**
 * One part's plan: its diff (`live` read of `l`), its template capacity, its keys' secrets asked
 * through `presence`, its keys assessed. `keyOf`: a warning's key in the merged plan's order.
 */
export async function planPart(
  s: PartSettings,
  x: { desired: DesiredState; live: PlanLive; orphans: OrphanKey[]; keyOf: (warning: string) => string },
  presence: AskPresence,
): Promise<PlannedPart> {
  const d = x.desired;
  const l = x.live.state;
  const owner = s.target.owner;
  const serviceRead: [string, ServiceInventory][] = [];
  const owned: InventoryEntry[] = [];
  if (s.inventory) {
    // The inventory this owner keeps in the service, per environment (engine/inventory.ts).
    for (const held of holdFromService(s.inventory, l, owner)) serviceRead.push(held);
    s.inventory.markHeld(l);
    if (s.ownedScan) for (const e of ownedEntries(l, owner, s.inventory)) owned.push(e);
  }
  const {
    plan: base,
    phases,
    clientMatch,
  } = buildPlanPhased({
    desired: d,
    live: x.live,
    prune: s.prune,
    now: s.now,
    target: s.target,
    ...(s.takeOwnership ? { takeOwnership: true } : {}),
    ...(s.inventory ? { inventory: s.inventory } : {}),
  });
  // Template capacity is per environment: checked on each, said for all at the end (before any write or report).
  const overCapacity = s.checkCapacity ? capacityProblems(base, l) : [];
  let secrets = new Map<string, SecretStatus>();
  const refused: string[] = [];
  let presenceWarnings: string[] = [];
  if (s.secretCheck) {
    const answer = await presence(secretQueries(d, l, owner, s.registry, refused, clientMatch));
    secrets = answer.results instanceof Map ? answer.results : new Map(answer.results);
    presenceWarnings = answer.warnings;
  }
  const plan = assessKeys({
    plan: base,
    desired: d,
    live: l,
    secrets,
    now: s.now,
    orphans: x.orphans,
    ...(clientMatch ? { clientMatch } : {}),
    ...rotation(s),
  });
  const warningOrder = plan.warnings.map((w, i): WarningOrder => [phases[i] ?? WARNING_PHASE.keys, x.keyOf(w)]);
  return { part: { plan, warningOrder }, overCapacity, serviceRead, owned, refused, presenceWarnings };
}

/**
 * The clients and endpoints of environment `pe` of a configuration loaded environment by
 * environment, their secret names checked as checkSecretNames checks the whole, against the names
 * `seen` in the environments before it: any problem loads the whole (NotStreamable). `texts`: the
 * environment's parts handed to a worker thread (StreamedBodies.handOver).
 */
export async function takeEnvBodies(
  bodies: StreamedBodies,
  pe: string,
  names: { desired: DesiredState; registry: StoreRegistry; seen: SecretNamesTaken },
  handed?: readonly HandedPart[],
): Promise<Pick<DesiredState, 'clients' | 'endpoints'>> {
  const mine = await bodies.take(pe, handed);
  const problems = await secretCollisions({ ...names.desired, clients: mine.clients }, names.registry, names.seen);
  if (problems.length > 0 || mixedStores(names.seen)) throw new NotStreamable('a secret name needs checking whole');
  return mine;
}

/**
 * One environment's plan: its clients and endpoints taken (`take`), its live state read (`read`:
 * undefined when the service has no such environment), then its part planned against the
 * skeleton `desired` (its projects, stores and settings) with `envDef` and `templates` in it.
 */
export async function planEnvironment(
  s: PartSettings,
  x: {
    pe: string;
    desired: DesiredState;
    envDef: DesiredEnv | undefined;
    templates: DesiredState['templates'];
    orphans: OrphanKey[];
    take: () => Promise<Pick<DesiredState, 'clients' | 'endpoints'>>;
    read: () => Promise<LiveEnvRead | undefined>;
  },
  presence: AskPresence,
): Promise<{ planned: PlannedPart; live: LiveEnvRead | undefined }> {
  // The read starts before the take, so its pages are in flight while this thread builds the
  // environment's clients (a plan worker's read used to wait for them: the 1,000,000-client plan
  // left ~0.7 of its 2 cores idle). A failure of the take still comes first; the read's is dropped.
  const reading = x.read();
  reading.catch(() => {});
  const mine = await x.take();
  const live = await reading;
  const d: DesiredState = {
    ...x.desired,
    projects: [],
    envs: x.envDef ? [x.envDef] : [],
    templates: x.templates,
    ...mine,
  };
  delete d.externalProjects;
  const l: LiveState = live ? live.state : emptyLiveState();
  const planned = await planPart(
    s,
    {
      desired: d,
      live: { state: l, duplicates: live?.duplicates ?? [], fingerprints: live?.fingerprints ?? {} },
      orphans: x.orphans,
      keyOf: () => x.pe,
    },
    presence,
  );
  return { planned, live };
}

/** Of one environment's live state, what the caller still needs after its plan: the templates, and of the clients
 * and endpoints those the plan names or whose keys expire (engine/run.ts planFor). */
export function keepNamed(kept: LiveState, state: LiveState, plan: Plan): void {
  const named = new Set<string>();
  let endpointNamed = false;
  for (const list of [plan.operations, plan.unmanaged])
    for (let i = 0; i < list.length; i++) {
      const a = list[i]!.address;
      named.add(a);
      if (a.startsWith('key.')) named.add(`client.${a.slice(4, a.lastIndexOf('/'))}`);
      else if (a.startsWith('endpoint.')) endpointNamed = true;
    }
  kept.templates.push(...state.templates);
  // A no-op plan names nothing: no address is built for its clients and endpoints then. Else a
  // client is looked up by name among the names its environment's client addresses carry
  // (`client.${projectEnv}/${name}`), without an address built per client. Indexed loops without
  // a closure per client: this runs once per environment, over its every client, mostly before V8
  // optimizes it (a `keys.some(...)` per client was ~half of its 10 ms over 10,000 clients).
  const clients = state.clients;
  const namesIn = new Map<string, Set<string>>();
  let namesEnv: string | undefined;
  let names: Set<string> | undefined;
  for (let i = 0; i < clients.length; i++) {
    const c = clients[i]!;
    if (expiring(c.keys)) {
      kept.clients.push(c);
      continue;
    }
    if (named.size === 0) continue;
    if (names === undefined || c.projectEnv !== namesEnv) {
      namesEnv = c.projectEnv;
      names = namesIn.get(namesEnv);
      if (!names) namesIn.set(namesEnv, (names = namesUnder(named, address.client(namesEnv, ''))));
    }
    if (names.has(c.name)) kept.clients.push(c);
  }
  // An endpoint's address is built only when the plan names an endpoint.
  if (endpointNamed)
    for (const e of state.endpoints)
      if (named.has(address.endpoint(e.projectEnv, e.method, e.path))) kept.endpoints.push(e);
}

/** Whether one of the keys expires. */
function expiring(keys: LiveState['clients'][number]['keys']): boolean {
  for (let k = 0; k < keys.length; k++) if (keys[k]!.expiresAt) return true;
  return false;
}

/** What follows `prefix` in each of `addresses` that starts with it. */
function namesUnder(addresses: ReadonlySet<string>, prefix: string): Set<string> {
  const names = new Set<string>();
  for (const a of addresses) if (a.startsWith(prefix)) names.add(a.slice(prefix.length));
  return names;
}

/**
 * KMS_SYNC_PLAN_STORES: which secret stores a plan (or drift) may contact to check that keys have
 * their secrets, for plans of configurations nobody trusted yet (a pull request's). `all` (the
 * default), `local` (only store files in the checkout: no store credential leaves the runner), or
 * `none` (like --no-secret-check). The store's declaration comes from the configuration being
 * planned, so a name cannot be trusted: the pull request can change what it points at.
 * Returns why the store is not contacted, or undefined when it may be.
 */
export function storeContactRefused(
  registry: StoreRegistry,
  store: string | undefined,
  env: NodeJS.ProcessEnv,
): string | undefined {
  const mode = (env.KMS_SYNC_PLAN_STORES ?? '').trim().toLowerCase() || 'all';
  if (mode === 'all') return undefined;
  if (mode !== 'none' && mode !== 'local')
    throw new UsageError(
      `KMS_SYNC_PLAN_STORES must be all, local or none (got ${JSON.stringify(env.KMS_SYNC_PLAN_STORES)})`,
    );
  let uri: string;
  try {
    uri = registry.uriOf(store);
  } catch {
    return undefined; // reported by the check itself
  }
  if (mode === 'local' && /^(sops|file):/i.test(uri)) return undefined;
  return `secrets in store ${store ?? 'default'} not checked: KMS_SYNC_PLAN_STORES=${mode} allows ${mode === 'none' ? 'no store' : 'only local store files'}`;
}
