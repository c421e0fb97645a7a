// The inventory of a configuration (DESIGN.md "Ownership and deletes"), as Flux keeps one in a
// Kustomization's status: what it created or claimed, kept where its run keeps state. Markers in
// live metadata can be stripped by anyone with the service's API; the inventory is what still
// says "ours" then, so a stripped client is drift that is restored (its keys still checked, its
// offboarding still revoking them), never a client silently dropped from management.
//
// Clients are held by their live id (a client renamed outside is still ours), endpoints by their
// address (the service gives them no id). For the kinds without metadata (projects,
// environments, templates) an entry records the digest of the fields last applied, so drift can
// tell an edit of the configuration not applied yet from a change made outside (issue 39), as
// the `kms-sync/applied` digest does for clients and endpoints. Pure functions; the files are the
// front ends' (the agent's state folder).
import {
  address,
  appliedDigest,
  OWNER_ID_KEY,
  ownershipAsksHeld,
  ownershipOf,
  type DesiredState,
  type JsonObject,
  type LiveState,
  type ResourceKind,
} from '../model/index.js';
import { envRecord } from './kinds/env.js';
import { projectRecord } from './kinds/project.js';
import { templateRecord } from './kinds/template.js';
import type { Operation, Plan } from './types.js';

export interface InventoryEntry {
  kind: Extract<ResourceKind, 'project' | 'env' | 'template' | 'client' | 'endpoint'>;
  address: string;
  /** Environment (absent for a project). */
  projectEnv?: string;
  /** Clients: the live id. */
  id?: string;
  /** Projects, environments, templates: digest of the fields last applied (in sync with the configuration). */
  applied?: string;
}

/** An entry's fields, as an inventory file writes them. */
export const INVENTORY_ENTRY_FIELDS: ReadonlySet<string> = new Set(['address', 'applied', 'id', 'kind', 'projectEnv']);

/** An entry of the known fields only, each a string when present (the form the seal's fast text and sameEntries take). */
export function plainEntry(e: InventoryEntry): boolean {
  const fields = e as unknown as Record<string, unknown>;
  for (const k in fields)
    if (!INVENTORY_ENTRY_FIELDS.has(k) || (fields[k] !== undefined && typeof fields[k] !== 'string')) return false;
  return true;
}

/**
 * Lists of entries known to hold plain entries only (plainEntry): those this module makes (a
 * scan, the next inventory) and those found so, checked once. Such a list is never given other
 * entries afterwards (a scan's list is only added to from scans).
 */
const PLAIN = new WeakSet<readonly InventoryEntry[]>();

/** Whether every entry of `entries` is plain; the answer is kept for the list. */
export function plainEntries(entries: readonly InventoryEntry[]): boolean {
  if (PLAIN.has(entries)) return true;
  for (let i = 0; i < entries.length; i++) if (!plainEntry(entries[i]!)) return false;
  PLAIN.add(entries);
  return true;
}

/** Records `entries` as a list of plain entries (made so, and only ever added to with plain entries). */
export function madePlain<T extends readonly InventoryEntry[]>(entries: T): T {
  PLAIN.add(entries);
  return entries;
}

export interface Inventory {
  formatVersion: 1;
  /** The owner id the entries belong to: another owner's inventory is not this configuration's. */
  owner: string;
  updatedAt: string;
  /** The revision (agent) the last update was planned from. */
  revision?: string;
  entries: InventoryEntry[];
  /** The CLI's copy: an HMAC over owner and entries with a key of the service credential (engine/inventory.ts). */
  seal?: string;
  /**
   * The CLI's copy: per environment, the mark of the records the service held (or was written)
   * when this copy was written, which then held exactly its clients and endpoints of that
   * environment (engine/inventory.ts serviceMark): a run that finds the same mark there need not
   * decode them. Believed only under `serviceSeal`.
   */
  service?: Record<string, string>;
  /** An HMAC over `seal` and `service` with the seal's key (engine/inventory.ts). */
  serviceSeal?: string;
}

/** What a plan asks of the inventory. */
/** An InventoryIndex as plain data (InventoryIndex.portable). */
export interface PortableInventory {
  clients: string[];
  endpoints: string[];
  records: [address: string, digest: string][];
  marks?: [projectEnv: string, mark: string][];
}

/** Client ids and endpoint addresses (InventoryIndex.hold). */
interface Holdings {
  clients?: Iterable<string>;
  endpoints?: Iterable<string>;
}

export class InventoryIndex {
  /**
   * The clients (by live id) and endpoints (by address) held, made when first asked: a live
   * resource is looked up only when its markers leave its owner to the inventory (most runs find
   * every marker in place and ask none). Until then, where they come from.
   */
  private held: { clients: Set<string>; endpoints: Set<string> } | undefined;
  private readonly pending: (readonly InventoryEntry[] | Holdings)[] = [];
  private readonly records = new Map<string, string>();
  private readonly marks: ReadonlyMap<string, string>;
  /** The entries it was made with, when they count (ownership) and are plain: ownedEntries hands them out again. */
  readonly reusable: readonly InventoryEntry[] | undefined;

  /**
   * `o.ownership`: whether its clients and endpoints count as ours (the agent's inventory, in the
   * operator's state folder). An inventory beside the configuration (the CLI's) is the
   * configuration's data, which a pull request can write: it gives drift its digests, never
   * ownership (DESIGN.md "Trust boundary"). `o.marks`: per environment, the mark of the service's
   * records that hold exactly these entries' clients and endpoints of it (Inventory.service, its
   * seal checked; only with ownership).
   */
  constructor(
    entries: readonly InventoryEntry[],
    o: { ownership: boolean; marks?: Readonly<Record<string, string>> } = { ownership: true },
  ) {
    this.marks = new Map(o.ownership && o.marks ? Object.entries(o.marks) : []);
    if (o.ownership && entries.length) this.pending.push(entries);
    this.reusable = o.ownership && entries.length && PLAIN.has(entries) ? entries : undefined;
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!;
      if (e.kind !== 'client' && e.kind !== 'endpoint' && e.applied) this.records.set(e.address, e.applied);
    }
  }

  /**
   * Holds more clients (by live id) and endpoints (by address): the inventory a run kept in the
   * service (engine/inventory.ts), added environment by environment as the live read finds it.
   */
  hold(o: Holdings): void {
    if (!this.held) this.pending.push({ clients: [...(o.clients ?? [])], endpoints: [...(o.endpoints ?? [])] });
    else {
      for (const id of o.clients ?? []) this.held.clients.add(id);
      for (const a of o.endpoints ?? []) this.held.endpoints.add(a);
    }
  }

  private holdings(): { clients: Set<string>; endpoints: Set<string> } {
    if (this.held) return this.held;
    const held = { clients: new Set<string>(), endpoints: new Set<string>() };
    for (const from of this.pending) {
      if ('clients' in from || 'endpoints' in from) {
        const h = from as Holdings;
        for (const id of h.clients ?? []) held.clients.add(id);
        for (const a of h.endpoints ?? []) held.endpoints.add(a);
        continue;
      }
      for (const e of from as readonly InventoryEntry[]) {
        if (e.kind === 'client' && e.id) held.clients.add(e.id);
        else if (e.kind === 'endpoint') held.endpoints.add(e.address);
      }
    }
    this.pending.length = 0;
    this.held = held;
    return held;
  }

  /**
   * The mark of the service's records of `projectEnv` that hold exactly the clients and endpoints
   * this index was made with there (undefined: none known): records found with it add nothing.
   */
  serviceMark(projectEnv: string): string | undefined {
    return this.marks.get(projectEnv);
  }

  /** What it holds, as plain data (a worker thread's copy: InventoryIndex.of). */
  portable(): PortableInventory {
    const { clients, endpoints } = this.holdings();
    return {
      clients: [...clients],
      endpoints: [...endpoints],
      records: [...this.records],
      ...(this.marks.size ? { marks: [...this.marks] } : {}),
    };
  }

  /** An index holding what `p` (portable()) holds. */
  static of(p: PortableInventory): InventoryIndex {
    const index = new InventoryIndex([], { ownership: true, marks: Object.fromEntries(p.marks ?? []) });
    index.hold(p);
    for (const [a, d] of p.records) index.records.set(a, d);
    return index;
  }

  /** The digest last applied to a project, environment or template (undefined: none recorded). */
  applied(addr: string): string | undefined {
    return this.records.get(addr);
  }

  /** Marks the live clients and endpoints the inventory holds (LiveClient.held), in place. */
  markHeld(state: LiveState): void {
    if (!this.held && this.pending.length === 0) return;
    // Only where ownership asks (ownershipOf decides the rest from the markers alone).
    for (let i = 0; i < state.clients.length; i++) {
      const c = state.clients[i]!;
      if (ownershipAsksHeld(c.metadata) && this.holdings().clients.has(c.id)) c.held = true;
    }
    for (let i = 0; i < state.endpoints.length; i++) {
      const e = state.endpoints[i]!;
      if (
        ownershipAsksHeld(e.metadata) &&
        this.holdings().endpoints.has(address.endpoint(e.projectEnv, e.method, e.path))
      )
        e.held = true;
    }
  }
}

/**
 * The clients and endpoints of a live state this configuration owns (by marker, or held with the
 * marker removed). `index`: the inventory the plan holds; an entry of its own list with exactly
 * the fields one made here would have is handed out instead of a new one (found by walking its
 * list, sorted by address, beside the live state's order), which nextInventory then knows.
 */
export function ownedEntries(state: LiveState, owner: string, index?: InventoryIndex): InventoryEntry[] {
  const out: InventoryEntry[] = [];
  const again = index?.reusable && new Reuse(index.reusable);
  for (let i = 0; i < state.clients.length; i++) {
    const c = state.clients[i]!;
    if (ownershipOf(c.metadata, owner, c.held).kind !== 'ours') continue;
    out.push(
      again?.client(c.projectEnv, c.name, c.id) ?? {
        kind: 'client',
        address: address.client(c.projectEnv, c.name),
        projectEnv: c.projectEnv,
        id: c.id,
      },
    );
  }
  for (let i = 0; i < state.endpoints.length; i++) {
    const e = state.endpoints[i]!;
    if (ownershipOf(e.metadata, owner, e.held).kind !== 'ours') continue;
    const addr = address.endpoint(e.projectEnv, e.method, e.path);
    out.push(again?.endpoint(e.projectEnv, addr) ?? { kind: 'endpoint', address: addr, projectEnv: e.projectEnv });
  }
  return madePlain(out);
}

/** Per list, the places of the entries ownedEntries handed out again, in the order it did. */
const HANDED = new WeakMap<readonly InventoryEntry[], number[]>();

/**
 * A walk through a plain list of entries sorted by address, beside a live state's clients (by
 * environment, name) and endpoints: the entry a resource would make, when the list has it where
 * the walk is (a list in another order, or another entry there, gives none: a new one is made).
 */
class Reuse {
  private at = 0;
  private kind = '';
  private projectEnv = '';
  private prefix = '';
  private readonly list: readonly InventoryEntry[];
  private readonly handed: number[];
  constructor(list: readonly InventoryEntry[]) {
    this.list = list;
    let handed = HANDED.get(list);
    if (!handed) HANDED.set(list, (handed = []));
    this.handed = handed;
  }

  client(projectEnv: string, name: string, id: string): InventoryEntry | undefined {
    const prefix = this.seek('client', projectEnv);
    let e = this.list[this.at];
    // Without making the address: `client.<env>/<name>` is the prefix and the name.
    if (
      e === undefined ||
      e.address.length !== prefix.length + name.length ||
      !e.address.endsWith(name) ||
      !e.address.startsWith(prefix)
    ) {
      const addr = prefix + name;
      // Entries of clients gone since are passed.
      while (e !== undefined && e.address < addr && e.address.startsWith(prefix)) e = this.list[++this.at];
      if (e === undefined || e.address !== addr) return undefined;
    }
    return e.kind === 'client' && e.id === id && e.projectEnv === projectEnv && e.applied === undefined
      ? this.take(e)
      : undefined;
  }

  endpoint(projectEnv: string, addr: string): InventoryEntry | undefined {
    const prefix = this.seek('endpoint', projectEnv);
    let e = this.list[this.at];
    while (e !== undefined && e.address < addr && e.address.startsWith(prefix)) e = this.list[++this.at];
    return e !== undefined &&
      e.address === addr &&
      e.kind === 'endpoint' &&
      e.projectEnv === projectEnv &&
      e.id === undefined &&
      e.applied === undefined
      ? this.take(e)
      : undefined;
  }

  private take(e: InventoryEntry): InventoryEntry {
    this.handed.push(this.at++);
    return e;
  }

  /** The address prefix of the kind's entries in `projectEnv`; the walk moves to their first one when it changes. */
  private seek(kind: 'client' | 'endpoint', projectEnv: string): string {
    if (kind === this.kind && projectEnv === this.projectEnv) return this.prefix;
    const prefix =
      kind === 'client' ? address.client(projectEnv, '') : address.endpoint(projectEnv, '', '').slice(0, -1);
    this.kind = kind;
    this.projectEnv = projectEnv;
    this.prefix = prefix;
    let lo = 0;
    let hi = this.list.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.list[mid]!.address < prefix) lo = mid + 1;
      else hi = mid;
    }
    this.at = lo;
    return prefix;
  }
}

/** What a plan that read `envsRead` found this configuration owns: the inventory's next state (see nextInventory). */
export interface InventoryScan {
  owned: InventoryEntry[];
  envsRead: string[];
  /**
   * The run saw part of the configuration (`--shard`): entries of environments and projects it
   * did not plan are kept as they were (each shard keeps its environments' part).
   */
  partial?: boolean;
}

/**
 * What a run owns once it applied `done` (a scan is taken before the apply): what it created (a
 * client by the id its create returned, `createdIds` by address) or claimed (an update that wrote
 * this owner's marker) is added, what it deleted is dropped (an endpoint's address may be
 * registered again by the SDK: it is not ours then).
 */
export function afterApply(
  scan: InventoryScan,
  done: Iterable<Operation>,
  createdIds: ReadonlyMap<string, string>,
  owner: string,
): InventoryScan {
  const effects: [deleted: string | undefined, set: InventoryEntry | undefined][] = [];
  for (const op of done) {
    if ((op.kind !== 'client' && op.kind !== 'endpoint') || !op.projectEnv) continue;
    // The key an entry of this operation's resource has (a client's live id, an endpoint's address).
    const deleted =
      op.action === 'delete' || op.action === 'replace'
        ? `${op.kind} ${op.kind === 'client' ? op.live?.id : op.address}`
        : undefined;
    let set: InventoryEntry | undefined;
    const id = op.kind === 'client' ? (op.action === 'create' ? createdIds.get(op.address) : op.live?.id) : undefined;
    const metadata = (op.after as { metadata?: JsonObject } | null)?.metadata;
    if (
      op.action !== 'delete' &&
      (op.kind !== 'client' || id) &&
      (op.action === 'create' || op.action === 'replace' || metadata?.[OWNER_ID_KEY] === owner)
    )
      set = { kind: op.kind, address: op.address, projectEnv: op.projectEnv, ...(id ? { id } : {}) };
    if (deleted !== undefined || set) effects.push([deleted, set]);
  }
  // Most applies only update what was owned already (a claim written again): then each entry
  // set is the one the scan holds under its key, and the scan stands as it is, without a key
  // made for each of its entries (unless it holds two under one key: the map below keeps one).
  if (effects.every(([deleted]) => deleted === undefined) && scanHolds(scan.owned, effects)) return scan;
  const owned = new Map(scan.owned.map((e) => [`${e.kind} ${e.id ?? e.address}`, e]));
  for (const [deleted, set] of effects) {
    if (deleted !== undefined) owned.delete(deleted);
    if (set) owned.set(`${set.kind} ${set.id ?? set.address}`, set);
  }
  const next = [...owned.values()];
  return { ...scan, owned: PLAIN.has(scan.owned) ? madePlain(next) : next };
}

/** Whether `owned` holds one entry per key (clients and endpoints only), and each entry of `effects` under its key. */
function scanHolds(
  owned: readonly InventoryEntry[],
  effects: readonly [unknown, InventoryEntry | undefined][],
): boolean {
  // Per kind, by id or address: an owned entry's key is `${kind} ${id ?? address}`.
  const wanted = { client: new Map<string, InventoryEntry>(), endpoint: new Map<string, InventoryEntry>() };
  for (const [, set] of effects)
    (set!.kind === 'client' ? wanted.client : wanted.endpoint).set(set!.id ?? set!.address, set!);
  const seen = { client: new Set<string>(), endpoint: new Set<string>() };
  let found = 0;
  for (const e of owned) {
    if (e.kind !== 'client' && e.kind !== 'endpoint') return false;
    const k = e.id ?? e.address;
    const s = seen[e.kind];
    if (s.has(k)) return false;
    s.add(k);
    const w = wanted[e.kind].get(k);
    if (w === undefined) continue;
    if (!sameEntry(e, w)) return false;
    found++;
  }
  return found === wanted.client.size + wanted.endpoint.size;
}

/** Entries of the same fields (what an inventory file writes of them). */
const sameEntry = (a: InventoryEntry, b: InventoryEntry) =>
  a.kind === b.kind &&
  a.address === b.address &&
  a.projectEnv === b.projectEnv &&
  a.id === b.id &&
  a.applied === b.applied &&
  Object.keys(a).length === Object.keys(b).length;

/**
 * The inventory after a run: the clients and endpoints it found owned in the environments it
 * read; entries of environments it did not read are kept (a project that left the scope is not
 * forgotten). Projects, environments and templates of the configuration record the digest of
 * their fields when the final plan leaves them alone (live matches the configuration); one the
 * plan still changes keeps the digest recorded before (what was last applied).
 */
export function nextInventory(
  previous: Inventory | undefined,
  scan: InventoryScan,
  desired: DesiredState | undefined,
  plan: Plan,
  owner: string,
  o: { now: Date; revision?: string },
): Inventory {
  const read = new Set(scan.envsRead);
  const planned = new Set((desired?.projects ?? []).map((p) => address.project(p.slug)));
  const kept = (previous?.owner === owner ? previous.entries : []).filter((e) =>
    e.kind === 'client' || e.kind === 'endpoint'
      ? !read.has(e.projectEnv ?? '')
      : // Without the configuration (a saved plan's apply) the digests stay as they were; a
        // shard's run records only its own projects, environments and templates.
        desired === undefined ||
        (scan.partial === true && (e.kind === 'project' ? !planned.has(e.address) : !read.has(e.projectEnv ?? ''))),
  );
  // Only its digests are asked for (its clients and endpoints are not indexed), and only for what the plan still changes.
  let before: InventoryIndex | undefined;
  const changing = new Set(plan.operations.map((op) => op.address));
  const record = (
    kind: InventoryEntry['kind'],
    addr: string,
    fields: Parameters<typeof appliedDigest>[0],
    projectEnv?: string,
  ): InventoryEntry | undefined => {
    const applied = changing.has(addr)
      ? (before ??= new InventoryIndex(previous?.owner === owner ? previous.entries : [], {
          ownership: false,
        })).applied(addr)
      : appliedDigest(fields);
    return applied ? { kind, address: addr, ...(projectEnv ? { projectEnv } : {}), applied } : undefined;
  };
  const records =
    desired === undefined
      ? []
      : [
          ...desired.projects.map((p) => record('project', address.project(p.slug), projectRecord(p))),
          ...desired.envs.map((e) => record('env', address.env(e.projectEnv), envRecord(e), e.projectEnv)),
          ...desired.templates.map((t) =>
            record('template', address.template(t.projectEnv, t.name), templateRecord(t), t.projectEnv),
          ),
        ];
  const made = (entries: InventoryEntry[]): Inventory => ({
    formatVersion: 1,
    owner,
    updatedAt: o.now.toISOString(),
    ...(o.revision ? { revision: o.revision } : {}),
    entries,
  });
  if (previous?.owner === owner && isPrevious(previous.entries, kept, scan, records)) return made(previous.entries);
  // One entry per client id or address (the key `${kind} ${id ?? address}`, kept per kind): what
  // this run found replaces what was kept, in the place the key first took.
  const entries: InventoryEntry[] = [];
  const slots = new Map<string, Map<string, number>>();
  const put = (e: InventoryEntry) => {
    let ofKind = slots.get(e.kind);
    if (!ofKind) slots.set(e.kind, (ofKind = new Map()));
    const key = e.id ?? e.address;
    const at = ofKind.get(key);
    if (at === undefined) {
      ofKind.set(key, entries.length);
      entries.push(e);
    } else entries[at] = e;
  };
  for (const e of kept) put(e);
  for (const e of scan.owned) put(e);
  for (const e of records) if (e !== undefined) put(e);
  entries.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
  // Records are made here; kept entries and the scan's are plain when their lists are.
  if (PLAIN.has(scan.owned) && (kept.length === 0 || plainEntries(previous!.entries))) madePlain(entries);
  return made(entries);
}

/**
 * Whether the next inventory's entries are `list`'s own (a plain list sorted by address, of one
 * entry per key, as nextInventory makes them), known without the map and sort that make them:
 * what is kept of it, the scan's entries (each of them one of `list`'s, handed out again by
 * ownedEntries in the scan's order, none twice, of an environment read) and the records (each
 * equal to the entry of `list` at its address, none of them kept) are all of it.
 */
function isPrevious(
  list: readonly InventoryEntry[],
  kept: readonly InventoryEntry[],
  scan: InventoryScan,
  records: readonly (InventoryEntry | undefined)[],
): boolean {
  const owned = scan.owned;
  const defined = records.filter((r): r is InventoryEntry => r !== undefined);
  if (kept.length + owned.length + defined.length !== list.length) return false;
  if (!PLAIN.has(owned) || !plainEntries(list)) return false;
  for (let i = 1; i < list.length; i++) if (list[i - 1]!.address > list[i]!.address) return false;
  const read = new Set(scan.envsRead);
  const handed = HANDED.get(list);
  if (handed === undefined || handed.length < owned.length) return false;
  const taken = new Uint8Array(list.length);
  for (let i = 0; i < owned.length; i++) {
    const e = owned[i]!;
    const at = handed[i]!;
    if (list[at] !== e || taken[at] === 1 || !read.has(e.projectEnv ?? '')) return false;
    taken[at] = 1;
  }
  const keptRecords = new Set<string>();
  for (const e of kept) if (e.kind !== 'client' && e.kind !== 'endpoint') keptRecords.add(e.address);
  const seen = new Set<string>();
  for (const r of defined) {
    if (keptRecords.has(r.address) || seen.has(r.address)) return false;
    seen.add(r.address);
    // The first entry at or after its address (the list is sorted by address).
    let lo = 0;
    let hi = list.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (list[mid]!.address < r.address) lo = mid + 1;
      else hi = mid;
    }
    const e = list[lo];
    if (
      e === undefined ||
      e.address !== r.address ||
      e.kind !== r.kind ||
      e.projectEnv !== r.projectEnv ||
      e.applied !== r.applied ||
      e.id !== undefined ||
      taken[lo] === 1
    )
      return false;
    taken[lo] = 1;
  }
  return true;
}

/** Entry lists parseInventory left whole (every entry of the file was of the known kinds and forms). */
const WHOLE = new WeakSet<readonly InventoryEntry[]>();

/** Whether parseInventory kept every entry of the file `entries` came from. */
export const parsedWhole = (entries: readonly InventoryEntry[]) => WHOLE.has(entries);

/** An inventory file's parsed content, checked (undefined when it is not one); entries of another form are left out. */
export function parseInventory(v: unknown): Inventory | undefined {
  const o = v as Partial<Inventory> | null;
  if (!o || typeof o !== 'object' || o.formatVersion !== 1 || typeof o.owner !== 'string' || !Array.isArray(o.entries))
    return undefined;
  const entries: InventoryEntry[] = [];
  for (const e of o.entries as unknown[]) if (inventoryEntry(e)) entries.push(e);
  if (entries.length === o.entries.length) WHOLE.add(entries);
  return {
    formatVersion: 1,
    owner: o.owner,
    updatedAt: typeof o.updatedAt === 'string' ? o.updatedAt : '',
    ...(typeof o.revision === 'string' ? { revision: o.revision } : {}),
    entries,
    ...(typeof o.seal === 'string' ? { seal: o.seal } : {}),
    ...(isMarks(o.service) && typeof o.serviceSeal === 'string'
      ? { service: o.service, serviceSeal: o.serviceSeal }
      : {}),
  };
}

/** An object of strings (Inventory.service). */
const isMarks = (v: unknown): v is Record<string, string> =>
  typeof v === 'object' &&
  v !== null &&
  !Array.isArray(v) &&
  Object.values(v as Record<string, unknown>).every((x) => typeof x === 'string');

const ENTRY_KINDS: ReadonlySet<unknown> = new Set(['project', 'env', 'template', 'client', 'endpoint']);
const stringOrAbsent = (v: unknown) => v === undefined || typeof v === 'string';

/** An entry of an inventory file, of the known kinds and with string fields. */
const inventoryEntry = (e: unknown): e is InventoryEntry =>
  typeof e === 'object' &&
  e !== null &&
  ENTRY_KINDS.has((e as InventoryEntry).kind) &&
  typeof (e as InventoryEntry).address === 'string' &&
  stringOrAbsent((e as InventoryEntry).id) &&
  stringOrAbsent((e as InventoryEntry).projectEnv) &&
  stringOrAbsent((e as InventoryEntry).applied);
