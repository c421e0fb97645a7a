// Where a configuration's inventory (plan/inventory.ts: the clients and endpoints it created or
// claimed) is kept between runs, and why each copy may be believed (DESIGN.md "Trust boundary"):
// - the agent's state folder (agent/agent.ts): the operator's, believed as it is;
// - for the CLI, beside the journal (`.kms-sync/inventory.json`): that folder sits in the
//   configuration's checkout, which a pull request can write, so its ownership entries count only
//   under a seal made with the service credential (an HMAC a pull request author cannot make);
//   without one it gives drift its digests, never ownership;
// - in the service, per environment (records under `/__kms-sync/inventory/<owner hash>`, written
//   by an apply under the run lock with the operator's credential), so that a CI runner with a
//   fresh checkout needs nothing local. A record holds at most RECORD_BUDGET bytes; a larger
//   inventory is split into parts, and the head record names the generation of its parts, so a
//   write killed half-way leaves the previous generation in force (measured in docs/ownership.md:
//   100,000 clients of one environment are 12 records).
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { AmbiguousWriteError, ApiError } from '../api/http.js';
import type { KmsClient } from '../api/client.js';
import {
  canonicalJson,
  identityKey,
  INVENTORY_RECORD_PREFIX,
  ownerRecordId,
  splitMethodPath,
  address,
  type DesiredState,
  type JsonObject,
  type LiveRecord,
  type LiveState,
} from '../model/index.js';
import { testPoint } from '../model/test-hooks.js';
import type { ApplyResult } from '../apply/execute.js';
import {
  afterApply,
  InventoryIndex,
  nextInventory,
  ownedEntries,
  INVENTORY_ENTRY_FIELDS,
  parsedWhole,
  parseInventory,
  plainEntries,
  plainEntry,
  type Inventory,
  type InventoryEntry,
  type InventoryScan,
} from '../plan/inventory.js';
import type { Plan } from '../plan/types.js';
import { withLock } from '../secrets/fsutil.js';
import { readStateJsonKnown, writeStateJson, writeStateText, type StateJsonRead } from './state-files.js';

// ---------------------------------------------------------------- the local copy

/** Where the CLI keeps a configuration's inventory: beside its journal (`.kms-sync/`). */
export const cliInventoryFile = (baseDir: string) => path.join(baseDir, '.kms-sync', 'inventory.json');

/** The key of the local copy's seal, derived from the service credential (never the credential itself). */
export const inventorySealKey = (apiKey: string): Buffer =>
  createHmac('sha256', apiKey).update('kms-sync inventory seal v1').digest();

const sealOf = (inv: Pick<Inventory, 'owner' | 'entries'>, key: Buffer) =>
  createHmac('sha256', key).update(sealedText(inv)).digest('base64url');

/**
 * What the seal covers: canonicalJson({ owner, entries }), byte for byte (seals written before
 * stay valid), without sorting the keys of every entry: JSON.stringify writes the keys SEALED_KEYS
 * lists, in its (sorted) order, in every object (and leaves out those undefined), with no copy of
 * the entries made. An entry with any other field or a value that is not a string (a hand-edited
 * file) makes it canonicalJson's.
 */
function sealedText(inv: Pick<Inventory, 'owner' | 'entries'>): string {
  if (!plainEntries(inv.entries))
    return canonicalJson({ owner: inv.owner, entries: inv.entries as unknown as JsonObject[] });
  return JSON.stringify({ entries: inv.entries, owner: inv.owner }, SEALED_KEYS);
}
/** The top level's keys and an entry's, sorted: canonicalJson's order. */
const SEALED_KEYS = ['entries', 'owner', ...[...INVENTORY_ENTRY_FIELDS].sort()];

/** The same entries in the same order (an entry of another form is never the same but as the same object). */
function sameEntries(a: readonly InventoryEntry[], b: readonly InventoryEntry[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  // Entries of the known form throughout (as an inventory read and checked, and a scan, hold them): their fields tell.
  const plain = plainEntries(a) && plainEntries(b);
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x === y) continue;
    if (
      x.address !== y.address ||
      x.applied !== y.applied ||
      x.id !== y.id ||
      x.kind !== y.kind ||
      x.projectEnv !== y.projectEnv ||
      (!plain && (!plainEntry(x) || !plainEntry(y)))
    )
      return false;
  }
  return true;
}

/**
 * Whether `inv` carries a seal made with `key` over its owner and entries. `text`: the file `inv`
 * was read from; in the form sealedFile writes, the seal is checked over its entries' text as it
 * is there (what was sealed, byte for byte, and what was parsed), without writing them again.
 */
export function sealHolds(inv: Inventory, key: Buffer | undefined, text?: string): boolean {
  if (!key || typeof inv.seal !== 'string') return false;
  const onText = text !== undefined ? sealOnText(inv, text, key) : undefined;
  // A text of another form, or one that does not hold there (written before, hand-edited): the entries written again.
  return (onText !== undefined && sameSeal(inv.seal, onText)) || sameSeal(inv.seal, sealOf(inv, key));
}

/**
 * The seal of a copy's service marks (Inventory.service): over its entries' seal and the marks,
 * so that marks are believed only beside the entries they were written with. Kept apart from
 * `seal` so that a copy with marks still holds for a reader that knows none.
 */
const serviceSealOf = (seal: string, marks: Record<string, string>, key: Buffer) =>
  createHmac('sha256', key)
    .update(`kms-sync inventory service v1\n${seal}\n${canonicalJson(marks)}`)
    .digest('base64url');

/** Whether the service marks of `inv` (its seal checked: sealHolds) carry a seal made with `key`. */
export function serviceSealHolds(inv: Inventory, key: Buffer | undefined): boolean {
  if (!key || inv.seal === undefined || inv.service === undefined || inv.serviceSeal === undefined) return false;
  return sameSeal(inv.serviceSeal, serviceSealOf(inv.seal, inv.service, key));
}

const sameSeal = (seal: string, want: string) => {
  const a = Buffer.from(want);
  const b = Buffer.from(seal);
  return a.length === b.length && timingSafeEqual(a, b);
};

/**
 * The seal of `inv` made on the text it was read from, when that text is sealedFile's of it:
 * its head and tail as `inv`'s own fields write them (no other key, no key twice outside the
 * entries), every entry of the known form and kept by parseInventory. Between them is the text of
 * the entries parsed; a seal made over it by the key's holder was made over sealedText of those
 * entries (undefined: another form, checked by writing the entries again).
 */
function sealOnText(inv: Inventory, text: string, key: Buffer): string | undefined {
  if (!parsedWhole(inv.entries) || !plainEntries(inv.entries)) return undefined;
  const head = sealedFileHead(inv);
  const tail = sealedFileTail(inv);
  if (text.length < head.length + tail.length || !text.startsWith(head) || !text.endsWith(tail)) return undefined;
  return createHmac('sha256', key)
    .update('{"entries":')
    .update(text.slice(head.length, text.length - tail.length))
    .update(`,"owner":${JSON.stringify(inv.owner)}}`)
    .digest('base64url');
}

/** A sealed inventory's file text before its entries: its fields in the order an Inventory has them. */
const sealedFileHead = (inv: Inventory) =>
  `{"formatVersion":1,"owner":${JSON.stringify(inv.owner)},"updatedAt":${JSON.stringify(inv.updatedAt)}${
    inv.revision !== undefined ? `,"revision":${JSON.stringify(inv.revision)}` : ''
  },"entries":`;
const sealedFileTail = (inv: Inventory) =>
  `,"seal":${JSON.stringify(inv.seal)}${
    inv.service !== undefined
      ? `,"service":${JSON.stringify(inv.service)},"serviceSeal":${JSON.stringify(inv.serviceSeal)}`
      : ''
  }}\n`;

/**
 * The sealed copy of `next` and its file text: the JSON of it, with the entries written as the
 * seal covers them (sealedText's keys and order), once for both, so that the seal of the file
 * read back is checked on its text (sealOnText). Entries of another form: JSON.stringify's.
 */
function sealedFile(next: Inventory, key: Buffer): { sealed: Inventory; text: string } {
  const { service, ...rest } = next;
  // The marks after the seal they are sealed with (rest has neither).
  const marked = (seal: string): Inventory =>
    service !== undefined
      ? { ...rest, seal, service, serviceSeal: serviceSealOf(seal, service, key) }
      : { ...rest, seal };
  if (!plainEntries(next.entries)) {
    const sealed = marked(sealOf(next, key));
    return { sealed, text: `${JSON.stringify(sealed)}\n` };
  }
  const entries = JSON.stringify(next.entries, SEALED_KEYS);
  const sealed = marked(
    createHmac('sha256', key)
      .update(`{"entries":${entries},"owner":${JSON.stringify(next.owner)}}`)
      .digest('base64url'),
  );
  return { sealed, text: `${sealedFileHead(sealed)}${entries}${sealedFileTail(sealed)}` };
}

/**
 * The inventory kept in `file`, when it is this owner's (undefined: none, damaged, or another
 * owner id's, which `warn` is told: it is made again from the ownership markers).
 */
export async function readInventory(
  file: string,
  owner: string,
  warn: (line: string) => void,
): Promise<Inventory | undefined> {
  return (await readOwnInventory(file, owner, warn)).value;
}

/** readInventory with the digest of the text read; the text of `known` is not parsed again. */
async function readOwnInventory(
  file: string,
  owner: string,
  warn: (line: string) => void,
  known?: StateJsonRead<Inventory>,
  withText = false,
): Promise<StateJsonRead<Inventory>> {
  const read = await readStateJsonKnown(
    file,
    parseInventory,
    (why) => warn(`the inventory ${file} ${why}; it is made again from the ownership markers`),
    known,
    withText,
  );
  if (read !== known && read.value && read.value.owner !== owner) {
    warn(
      `the inventory ${file} belongs to owner '${read.value.owner}', this configuration is '${owner}': it is made again from the ownership markers`,
    );
    return { value: undefined, ...(read.digest ? { digest: read.digest } : {}) };
  }
  return read;
}

/**
 * The CLI's copy as a run read it first (cliInventory), and whether its seal held: read again
 * under the lock after the run, the same text is neither parsed nor checked again.
 */
export interface KnownInventory {
  read: StateJsonRead<Inventory>;
  sealed: boolean;
  sealKey: Buffer | undefined;
}

/**
 * The inventory after a run (plan/inventory.ts nextInventory), written to `file` when it changed.
 * `plan`: what still differs after the run (the operations it did not apply). `sealKey`: the
 * copy is sealed with it (the CLI's, see above). Read again under a lock first: shards of one
 * configuration on one runner each write their environments' part.
 */
export async function keepInventory(
  file: string,
  scan: InventoryScan,
  desired: DesiredState | undefined,
  plan: Plan,
  owner: string,
  o: {
    now: Date;
    revision?: string;
    sealKey?: Buffer;
    before?: Inventory;
    known?: KnownInventory;
    /**
     * With `sealKey`: the marks of the service's records after the run, per environment it wrote
     * or found unchanged (keepServiceRecords; the environments read and not there are left
     * unmarked). Marks of environments not read are kept from the copy, whose entries there are.
     */
    marks?: ReadonlyMap<string, string>;
    /** The next inventory as made from `from` already (keepRunInventory), and whether it is `from`'s entries. */
    draft?: Draft;
  },
): Promise<Inventory> {
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const write = async (before: Inventory | undefined, sealChecked?: boolean) => {
    // Entries a copy without a valid seal holds are not carried over (they may be forged).
    const holds = before !== undefined && (!o.sealKey || (sealChecked ?? sealHolds(before, o.sealKey)));
    const drafted = holds && o.draft?.from === before ? o.draft : undefined;
    const made =
      drafted?.next ?? nextInventory(holds ? before : withoutOwnership(before), scan, desired, plan, owner, o);
    const marks = o.sealKey && o.marks ? nextMarks(holds ? before : undefined, o.sealKey, scan, o.marks) : undefined;
    const next = marks ? { ...made, service: marks } : made;
    // Unchanged (a sealed copy's seal holds for the next one too): nothing to write or seal.
    if (
      holds &&
      (drafted?.same ?? (before.owner === next.owner && sameEntries(before.entries, next.entries))) &&
      sameMarks(before, marks, o.sealKey)
    )
      return before;
    if (!o.sealKey) {
      await writeStateJson(file, next);
      return next;
    }
    const { sealed, text } = sealedFile(next, o.sealKey);
    await writeStateText(file, text);
    return sealed;
  };
  const sealKey = o.sealKey;
  if (!sealKey) return write(o.before);
  return withLock(`${file}.lock`, { timeoutMs: 60_000 }, async () => {
    const known = o.known;
    const read = await readOwnInventory(file, owner, () => undefined, known?.read, true);
    // The text the run read first, unchanged since: its seal was checked then, with this key.
    const same = known !== undefined && read === known.read && known.sealKey?.equals(sealKey) === true;
    return write(
      read.value,
      same ? known.sealed : read.value !== undefined && sealHolds(read.value, sealKey, read.text),
    );
  });
}

/** A next inventory made ahead (keepRunInventory) from the copy `from`; `same`: it holds `from`'s entries. */
interface Draft {
  from: Inventory;
  next: Inventory;
  same: boolean;
}

/**
 * The service marks of the next copy: `marks` (the environments the run wrote or found
 * unchanged) and those of `before` (its marks' seal holding) for the environments the run did
 * not read, whose entries it keeps; keys sorted, as canonicalJson writes them. Undefined: none.
 */
function nextMarks(
  before: Inventory | undefined,
  key: Buffer,
  scan: InventoryScan,
  marks: ReadonlyMap<string, string>,
): Record<string, string> | undefined {
  const read = new Set(scan.envsRead);
  const all = new Map(marks);
  if (before?.service && serviceSealHolds(before, key))
    for (const [pe, mark] of Object.entries(before.service)) if (!read.has(pe) && !all.has(pe)) all.set(pe, mark);
  if (!all.size) return undefined;
  const out: Record<string, string> = {};
  for (const pe of [...all.keys()].sort()) out[pe] = all.get(pe)!;
  return out;
}

/** Whether `before` carries `marks` (none: none), sealed with `key`. */
function sameMarks(before: Inventory, marks: Record<string, string> | undefined, key: Buffer | undefined): boolean {
  if (marks === undefined) return before.service === undefined;
  if (before.service === undefined || !serviceSealHolds(before, key)) return false;
  const had = Object.keys(before.service);
  return had.length === Object.keys(marks).length && had.every((pe) => before.service![pe] === marks[pe]);
}

const withoutOwnership = (inv: Inventory | undefined): Inventory | undefined =>
  inv && { ...inv, entries: inv.entries.filter((e) => e.kind !== 'client' && e.kind !== 'endpoint') };

/**
 * The CLI's inventory of a configuration (beside its journal) and its index for planFor's
 * `inventory`: its ownership entries count only when sealed with this credential's key (see
 * above); the service's copy is added to the index by the plan as it reads each environment.
 */
export async function cliInventory(
  baseDir: string,
  owner: string,
  sealKey: Buffer | undefined,
  warn: (line: string) => void,
): Promise<{ file: string; before: Inventory | undefined; index: InventoryIndex; known: KnownInventory }> {
  const file = cliInventoryFile(baseDir);
  const { text, ...read } = await readOwnInventory(file, owner, warn, undefined, true);
  const before = read.value;
  const sealed = before !== undefined && sealHolds(before, sealKey, text);
  if (before && !sealed && before.entries.some((e) => e.kind === 'client' || e.kind === 'endpoint'))
    warn(
      `the inventory ${file} is not sealed with this service credential (written with another one, or edited): its clients and endpoints are not taken as this configuration's; the inventory kept in the service is`,
    );
  const marks = sealed && serviceSealHolds(before, sealKey) ? before.service : undefined;
  return {
    file,
    before,
    index: new InventoryIndex(before?.entries ?? [], { ownership: sealed, ...(marks ? { marks } : {}) }),
    known: { read, sealed, sealKey },
  };
}

// ---------------------------------------------------------------- the service's copy

/** A record's metadata budget (its JSON): a fraction of the service's 1 MiB request limit, so a list page of them stays small. */
export const RECORD_BUDGET = 192 * 1024;
/**
 * Records made by one request (POST /endpoint with an array): four of RECORD_BUDGET, with their
 * paths and descriptions, stay well within the service's 1 MiB request limit.
 */
const RECORDS_PER_REQUEST = 4;
/**
 * Environments whose records are written at once after an apply (each environment's records are
 * its own: a write killed in one leaves the others as they are); the client's transport bounds
 * the requests in flight (its --parallelism) in any case.
 */
const ENVS_AT_ONCE = 8;
const RECORD_METHOD = 'POST';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The path of a configuration's inventory record in each environment (its head; parts sit below it). */
export const inventoryRecordPath = (owner: string) => `${INVENTORY_RECORD_PREFIX}${ownerRecordId(owner)}`;
const partPath = (owner: string, generation: string, i: number) => `${inventoryRecordPath(owner)}/${generation}/${i}`;

interface RecordBody extends JsonObject {
  'kms-sync/record': 'inventory';
  format: 1;
  owner: string;
  generation: string;
  part: number;
  parts: number;
  updatedAt: string;
  /** Client ids in UUID form, 16 bytes each, base64url. */
  clients: string;
  /** Client ids of another form. */
  clientIds: string[];
  /** Endpoints, `METHOD:/path`. */
  endpoints: string[];
}

/** What the service holds of one environment's inventory, as the live read found it. */
export interface ServiceInventory {
  projectEnv: string;
  clients: string[];
  /** `METHOD:/path`. */
  endpoints: string[];
  /** The generation in force (its head names it); undefined when no head was found. */
  generation?: string;
  /** Every record path of this owner's inventory found (the head, its parts, parts of torn writes). */
  paths: string[];
  /** False when a part the head names is missing (what was found is used; the next apply writes it again). */
  complete: boolean;
  /** The records' mark (serviceMark), when complete. */
  mark?: string;
  /**
   * The mark is the one the local copy the run read has for this environment (with its seal):
   * the records hold exactly that copy's clients and endpoints there, and are not decoded
   * (`clients` and `endpoints` are left empty).
   */
  asLocal?: true;
}

/**
 * The mark of an environment's records: their generation and number, and a digest of what
 * serviceInventory reads of them (the client ids and endpoints of each part, in order). The CLI's
 * copy keeps it beside the entries the records held then (Inventory.service), under a seal.
 */
function serviceMark(parts: readonly RecordBody[]): string {
  const h = createHash('sha256');
  for (const p of parts)
    h.update(p.clients)
      .update('\n')
      .update(JSON.stringify(stringsOf(p.clientIds)))
      .update('\n')
      .update(JSON.stringify(stringsOf(p.endpoints)))
      .update('\n');
  return `${parts[0]!.generation}.${parts.length}.${h.digest('base64url')}`;
}

const stringsOf = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x) => typeof x === 'string') : []);

function isRecord(m: JsonObject | undefined, owner: string): m is RecordBody {
  return (
    m?.['kms-sync/record'] === 'inventory' &&
    m.format === 1 &&
    m.owner === owner &&
    typeof m.generation === 'string' &&
    typeof m.parts === 'number' &&
    typeof m.clients === 'string'
  );
}

/**
 * This owner's inventory among an environment's kms-sync records (undefined: it keeps none
 * there). `localMark`: the local copy's mark of them (InventoryIndex.serviceMark); records of
 * that mark are not decoded (asLocal).
 */
export function serviceInventory(
  records: readonly LiveRecord[] | undefined,
  projectEnv: string,
  owner: string,
  localMark?: string,
): ServiceInventory | undefined {
  const head = inventoryRecordPath(owner);
  const mine = (records ?? []).filter(
    (r) => r.projectEnv === projectEnv && (r.path === head || r.path.startsWith(`${head}/`)),
  );
  if (!mine.length) return undefined;
  const out: ServiceInventory = {
    projectEnv,
    clients: [],
    endpoints: [],
    paths: mine.map((r) => r.path),
    complete: false,
  };
  const first = mine.find((r) => r.path === head)?.metadata;
  if (!isRecord(first, owner)) return out;
  out.generation = first.generation;
  const parts = [first];
  for (let i = 1; i < first.parts; i++) {
    const p = mine.find((r) => r.path === partPath(owner, first.generation, i))?.metadata;
    if (isRecord(p, owner) && p.generation === first.generation) parts.push(p);
  }
  out.complete = parts.length === first.parts;
  if (out.complete) out.mark = serviceMark(parts);
  if (localMark !== undefined && out.mark === localMark) {
    out.asLocal = true;
    return out;
  }
  for (const p of parts) {
    const hex = Buffer.from(p.clients, 'base64url').toString('hex');
    for (const id of uuidsOf(hex)) out.clients.push(id);
    out.clients.push(...stringsOf(p.clientIds));
    out.endpoints.push(...stringsOf(p.endpoints));
  }
  return out;
}

/** The client ids and endpoint addresses a service inventory holds (for InventoryIndex.hold). */
export const serviceHoldings = (s: ServiceInventory) => ({
  clients: s.clients,
  endpoints: s.endpoints.flatMap((mp) => {
    try {
      const { method, path: p } = splitMethodPath(mp);
      return [address.endpoint(s.projectEnv, method, p)];
    } catch {
      return [];
    }
  }),
});

/**
 * The UUIDs of 32 hex digits each (a trailing part shorter than that left out), dashed in one
 * replace and one split of the text: strings of one piece each, not five joined per id, which a
 * set of ids would join again to hash them.
 */
function uuidsOf(hex: string): string[] {
  const whole = hex.length - (hex.length % 32);
  if (whole === 0) return [];
  const ids = hex.slice(0, whole).replace(UUID_HEX, '$1-$2-$3-$4-$5 ').split(' ');
  ids.pop(); // after the last id's space
  return ids;
}
const UUID_HEX = /(.{8})(.{4})(.{4})(.{4})(.{12})/g;

/** An environment's owned client ids (UUIDs apart: they pack to 16 bytes) and endpoints (`METHOD:/path`). */
interface EnvHoldings {
  /** Every client id, as given. */
  ids: string[];
  /** Client ids in UUID form (unsorted). */
  uuids: string[];
  otherIds: string[];
  endpoints: string[];
}

function envHoldings(projectEnv: string, entries: readonly InventoryEntry[]): EnvHoldings {
  const prefix = identityKey('endpoint', [projectEnv, '']);
  const out: EnvHoldings = { ids: [], uuids: [], otherIds: [], endpoints: [] };
  for (const e of entries) {
    if (e.projectEnv !== projectEnv) continue;
    if (e.kind === 'client' && e.id) {
      out.ids.push(e.id);
      if (UUID.test(e.id)) out.uuids.push(e.id);
      else out.otherIds.push(e.id);
    } else if (e.kind === 'endpoint' && e.address.startsWith(prefix))
      out.endpoints.push(e.address.slice(prefix.length));
  }
  out.otherIds.sort();
  out.endpoints.sort();
  return out;
}

/** The record body without holdings (its size is every record's overhead). */
const emptyRecord = (owner: string, o: { generation: string; now: Date }): RecordBody => ({
  'kms-sync/record': 'inventory',
  format: 1,
  owner,
  generation: o.generation,
  part: 0,
  parts: 0,
  updatedAt: o.now.toISOString(),
  clients: '',
  clientIds: [],
  endpoints: [],
});

/**
 * How holdings pack into records of at most RECORD_BUDGET bytes (UUIDs, then other ids, then
 * endpoints, each record filled before the next): the first item of each record after the first,
 * counted over that order. All UUIDs cost alike, so their order does not change the packing.
 */
function packing(h: EnvHoldings, overhead: number): number[] {
  const breaks: number[] = [];
  let size = overhead;
  let i = 0;
  const add = (cost: number) => {
    if (size + cost > RECORD_BUDGET) {
      breaks.push(i);
      size = overhead;
    }
    size += cost;
    i++;
  };
  for (let n = 0; n < h.uuids.length; n++) add(22);
  for (const id of h.otherIds) add(Buffer.byteLength(JSON.stringify(id)) + 1);
  for (const mp of h.endpoints) add(Buffer.byteLength(JSON.stringify(mp)) + 1);
  return breaks;
}

const recordOverhead = (owner: string, o: { generation: string; now: Date }) =>
  Buffer.byteLength(JSON.stringify(emptyRecord(owner, o))) + 64;

/** An environment's owned entries as record bodies of at most RECORD_BUDGET bytes each. */
export function inventoryRecords(
  owner: string,
  projectEnv: string,
  entries: readonly InventoryEntry[],
  o: { generation: string; now: Date },
): RecordBody[] {
  return recordsOf(owner, envHoldings(projectEnv, entries), o);
}

function recordsOf(owner: string, h: EnvHoldings, o: { generation: string; now: Date }): RecordBody[] {
  // 32 hex digits each, sorted as strings, as their bytes sort.
  const uuids = h.uuids.map((u) => u.replace(/-/g, '')).sort();
  const breaks = packing(h, recordOverhead(owner, o));
  const bodies: RecordBody[] = [emptyRecord(owner, o)];
  let packed: string[] = [];
  const flush = () => {
    bodies[bodies.length - 1]!.clients = Buffer.from(packed.join(''), 'hex').toString('base64url');
    packed = [];
  };
  let i = 0;
  let next = 0;
  const place = () => {
    if (i++ === breaks[next]) {
      next++;
      flush();
      bodies.push(emptyRecord(owner, o));
    }
    return bodies[bodies.length - 1]!;
  };
  for (const u of uuids) {
    place();
    packed.push(u);
  }
  for (const id of h.otherIds) place().clientIds.push(id);
  for (const mp of h.endpoints) place().endpoints.push(mp);
  flush();
  bodies.forEach((b, n) => {
    b.part = n;
    b.parts = bodies.length;
  });
  return bodies;
}

const sameSet = (a: readonly string[], b: readonly string[]) => {
  if (a.length !== b.length) return false;
  const s = new Set(a);
  return b.every((x) => s.has(x));
};

/**
 * Writes one environment's part of the inventory to the service when it differs from what the
 * read found: the parts of a new generation first, then the head naming it, then the records of
 * earlier generations go. Called under the run lock. 'gone': the environment no longer exists.
 */
export async function writeServiceInventory(
  api: KmsClient,
  owner: string,
  projectEnv: string,
  entries: readonly InventoryEntry[],
  before: ServiceInventory | undefined,
  now: Date,
): Promise<'unchanged' | 'written' | 'gone'> {
  return (await writeEnvInventory(api, owner, projectEnv, entries, before, now)).outcome;
}

/**
 * The local copy a run read (with its seal) and whether the run's entries are its entries: what
 * records found with its mark (ServiceInventory.asLocal) hold.
 */
interface LocalCopy {
  before: Inventory;
  same: boolean;
}

/** writeServiceInventory, with the mark of the records in force after it (undefined: not known). */
async function writeEnvInventory(
  api: KmsClient,
  owner: string,
  projectEnv: string,
  entries: readonly InventoryEntry[],
  found: ServiceInventory | undefined,
  now: Date,
  local?: LocalCopy,
): Promise<{ outcome: 'unchanged' | 'written' | 'gone'; mark?: string }> {
  let before = found;
  if (before?.asLocal) {
    // The records hold the local copy's clients and endpoints here: the same as this run's when its entries are.
    if (local?.same) return { outcome: 'unchanged', ...(before.mark ? { mark: before.mark } : {}) };
    const was = local && envHoldings(projectEnv, local.before.entries);
    before = was
      ? { ...before, clients: was.ids, endpoints: was.endpoints }
      : // Not known here: written again.
        { ...before, complete: false };
  }
  const generation = randomBytes(6).toString('hex');
  const held = envHoldings(projectEnv, entries);
  // What the records would hold, as serviceInventory reads it back (a UUID as it was given: the
  // pattern takes lower case only), compared before any record is made: most applies change none.
  if (
    before?.complete &&
    before.paths.length === packing(held, recordOverhead(owner, { generation, now })).length + 1 &&
    sameSet(before.clients, held.ids) &&
    sameSet(before.endpoints, held.endpoints)
  )
    return { outcome: 'unchanged', ...(before.mark ? { mark: before.mark } : {}) };
  if (!before && held.ids.length === 0 && held.endpoints.length === 0) return { outcome: 'unchanged' };
  const bodies = recordsOf(owner, held, { generation, now });
  const fields = (metadata: RecordBody) => ({
    name: 'kms-sync inventory',
    description: `What kms-sync configuration ${owner} created or claimed here (part ${metadata.part + 1} of ${metadata.parts}); kept by its applies.`,
    metadata,
  });
  const put = async (p: string, metadata: RecordBody, exists: boolean) => {
    const mp = `${RECORD_METHOD}:${p}`;
    if (exists) {
      await api.updateEndpoint(projectEnv, mp, fields(metadata));
      return;
    }
    try {
      await api.createEndpoints(projectEnv, [{ method: RECORD_METHOD, path: p, ...fields(metadata) }]);
    } catch (e) {
      // There already (a lost answer that took effect, a record made meanwhile): written over.
      if ((e instanceof ApiError && e.status === 409) || e instanceof AmbiguousWriteError)
        await api.updateEndpoint(projectEnv, mp, fields(metadata));
      else throw e;
    }
  };
  /**
   * Records that do not exist yet, made RECORDS_PER_REQUEST to a request, in the order given (a
   * service that makes an array's items one by one makes them in that order). A request refused
   * for a record already there (409), or whose answer was lost: its records one by one, each
   * written over where it exists.
   */
  const create = async (records: readonly { path: string; body: RecordBody }[]) => {
    for (let i = 0; i < records.length; i += RECORDS_PER_REQUEST) {
      const batch = records.slice(i, i + RECORDS_PER_REQUEST);
      try {
        await api.createEndpoints(
          projectEnv,
          batch.map((r) => ({ method: RECORD_METHOD, path: r.path, ...fields(r.body) })),
        );
      } catch (e) {
        if (!((e instanceof ApiError && e.status === 409) || e instanceof AmbiguousWriteError)) throw e;
        for (const r of batch) await put(r.path, r.body, false);
      }
    }
  };
  const head = inventoryRecordPath(owner);
  const parts = bodies.slice(1).map((body, i) => ({ path: partPath(owner, generation, i + 1), body }));
  try {
    // The parts of the new generation before the head that names it: a head already there is
    // written over once they all are (until then the previous generation is in force); a new
    // one goes last, after the parts, in their last request (a write killed before it leaves
    // parts no head names, which the next write removes).
    if (before?.paths.includes(head)) {
      await create(parts);
      await put(head, bodies[0]!, true);
    } else await create([...parts, { path: head, body: bodies[0]! }]);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return { outcome: 'gone' };
    throw e;
  }
  const kept = new Set([head, ...parts.map((r) => r.path)]);
  await Promise.all(
    (before?.paths ?? [])
      .filter((p) => !kept.has(p))
      .map((p) => api.deleteEndpoint(projectEnv, `${RECORD_METHOD}:${p}`).catch(() => undefined)),
  );
  return { outcome: 'written', mark: serviceMark(bodies) };
}

/**
 * After an apply (under its run lock): each environment's part of the inventory in the service,
 * for the environments the run read and those it made entries in. Returns the lines to warn with
 * (a failed write is said, never fatal: the next apply writes it again).
 */
export async function keepServiceInventory(
  api: KmsClient,
  owner: string,
  scan: InventoryScan,
  read: ReadonlyMap<string, ServiceInventory | undefined>,
  now: Date,
): Promise<string[]> {
  return (await keepServiceRecords(api, owner, scan, read, now)).warnings;
}

/**
 * keepServiceInventory, with the mark of the records in force in each environment after it
 * (those it wrote, and those it found holding the same: not an environment it could not write).
 */
async function keepServiceRecords(
  api: KmsClient,
  owner: string,
  scan: InventoryScan,
  read: ReadonlyMap<string, ServiceInventory | undefined>,
  now: Date,
  local?: LocalCopy,
): Promise<{ warnings: string[]; marks: Map<string, string> }> {
  await testPoint('inventory-write');
  const envs = new Set(scan.envsRead);
  for (const e of scan.owned) if (e.projectEnv) envs.add(e.projectEnv);
  const sorted = [...envs].sort();
  const outcomes = new Map<string, { mark?: string } | { failed: string }>();
  // Environment by environment, ENVS_AT_ONCE at a time (each takes the next one left).
  const left = sorted.values();
  const writer = async () => {
    for (const pe of left) {
      try {
        outcomes.set(pe, await writeEnvInventory(api, owner, pe, scan.owned, read.get(pe), now, local));
      } catch (e) {
        outcomes.set(pe, { failed: (e as Error).message });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(ENVS_AT_ONCE, sorted.length) }, writer));
  const warnings: string[] = [];
  const marks = new Map<string, string>();
  for (const pe of sorted) {
    const o = outcomes.get(pe)!;
    if ('failed' in o)
      warnings.push(
        `the inventory of ${pe} could not be written to the service (${o.failed}); the next apply writes it`,
      );
    else if (o.mark !== undefined) marks.set(pe, o.mark);
  }
  return { warnings, marks };
}

/**
 * The inventory after an apply (the CLI's), under its run lock: what the plan found owned, with
 * what the apply created, claimed and deleted (plan/inventory.ts afterApply), written to the
 * service per environment and, sealed, beside the journal. Returns the warnings to show (a failed
 * write is never fatal: the next apply writes it again).
 */
export async function keepRunInventory(
  conn: { api: KmsClient; sealKey: Buffer },
  o: {
    owner: string;
    scan: InventoryScan;
    serviceRead: ReadonlyMap<string, ServiceInventory> | undefined;
    result?: Pick<ApplyResult, 'done' | 'created'>;
    plan: Plan;
    /** The configuration (undefined: a saved plan's apply, which keeps the digests as they were). */
    desired: DesiredState | undefined;
    file: string;
    /** The local copy as the run read it first (cliInventory). */
    known?: KnownInventory;
  },
): Promise<string[]> {
  const done = new Set(o.result?.done ?? []);
  const now = new Date();
  const after = afterApply(o.scan, done, o.result?.created ?? new Map(), o.owner);
  const left = { ...o.plan, operations: o.plan.operations.filter((op) => !done.has(op)) };
  // The copy the run read, its seal held: the next one as made from it, and whether the run's
  // entries are its own (then records the plan found with its marks hold this run's, unread).
  const from = o.known?.sealed && o.known.sealKey?.equals(conn.sealKey) ? o.known.read.value : undefined;
  let draft: Draft | undefined;
  if (from) {
    const next = nextInventory(from, after, o.desired, left, o.owner, { now });
    draft = { from, next, same: from.owner === next.owner && sameEntries(from.entries, next.entries) };
  }
  const { warnings, marks } = await keepServiceRecords(
    conn.api,
    o.owner,
    after,
    o.serviceRead ?? new Map(),
    now,
    draft && { before: draft.from, same: draft.same },
  );
  await keepInventory(o.file, after, o.desired, left, o.owner, {
    now,
    sealKey: conn.sealKey,
    marks,
    ...(draft ? { draft } : {}),
    ...(o.known ? { known: o.known } : {}),
  }).catch((e: unknown) =>
    warnings.push(`the inventory ${o.file} could not be written (${(e as Error).message}); the next apply writes it`),
  );
  return warnings;
}

/**
 * What the service holds of this owner's inventory in each environment of `state`, added to
 * `index` (planFor does this environment by environment as it reads; a saved plan's apply on the
 * state it read again).
 */
export function holdFromService(
  index: InventoryIndex,
  state: Pick<LiveState, 'records'>,
  owner: string,
): Map<string, ServiceInventory> {
  const read = new Map<string, ServiceInventory>();
  for (const pe of new Set((state.records ?? []).map((r) => r.projectEnv))) {
    const kept = serviceInventory(state.records, pe, owner, index.serviceMark(pe));
    if (!kept) continue;
    read.set(pe, kept);
    // Records of the local copy's mark hold what the index was made with there.
    if (!kept.asLocal) index.hold(serviceHoldings(kept));
  }
  return read;
}

/**
 * A saved plan's apply (which has no configuration to plan): the inventory as its live read
 * (taken again under the run lock) finds it, for keepRunInventory after the apply.
 */
export async function savedPlanInventory(
  conn: { sealKey: Buffer },
  baseDir: string,
  owner: string,
  state: LiveState,
  warn: (line: string) => void,
): Promise<{ file: string; scan: InventoryScan; serviceRead: Map<string, ServiceInventory>; known: KnownInventory }> {
  const local = await cliInventory(baseDir, owner, conn.sealKey, warn);
  const serviceRead = holdFromService(local.index, state, owner);
  local.index.markHeld(state);
  return {
    file: local.file,
    scan: { owned: ownedEntries(state, owner, local.index), envsRead: state.envs.map((e) => e.projectEnv) },
    serviceRead,
    known: local.known,
  };
}

/**
 * The inventory after a destroy (under its run lock), as after an apply: the clients and endpoints
 * it deleted leave it, and so do the projects, environments and templates it deleted (an
 * environment's with it), in the service (an environment deleted took its records along) and in
 * the sealed copy beside the journal. `state`: the live state the destroy was planned from.
 */
export async function keepDestroyInventory(
  conn: { api: KmsClient; sealKey: Buffer },
  o: {
    owner: string;
    desired: DesiredState;
    state: LiveState;
    result?: Pick<ApplyResult, 'done' | 'created'>;
    plan: Plan;
    file: string;
  },
): Promise<string[]> {
  const gone = new Set((o.result?.done ?? []).filter((op) => op.action === 'delete').map((op) => op.address));
  // A project deleted takes its environments and their templates along (no operation of their own).
  const projectOf = new Map(o.desired.envs.map((e) => [e.projectEnv, e.project]));
  const envGone = (pe: string) => gone.has(address.env(pe)) || gone.has(address.project(projectOf.get(pe) ?? ''));
  const left: DesiredState = {
    ...o.desired,
    projects: o.desired.projects.filter((p) => !gone.has(address.project(p.slug))),
    envs: o.desired.envs.filter((e) => !envGone(e.projectEnv)),
    templates: o.desired.templates.filter(
      (t) => !envGone(t.projectEnv) && !gone.has(address.template(t.projectEnv, t.name)),
    ),
  };
  return keepRunInventory(conn, {
    owner: o.owner,
    scan: { owned: ownedEntries(o.state, o.owner), envsRead: o.state.envs.map((e) => e.projectEnv) },
    serviceRead: holdFromService(new InventoryIndex([]), o.state, o.owner),
    ...(o.result ? { result: o.result } : {}),
    plan: o.plan,
    desired: left,
    file: o.file,
  });
}
