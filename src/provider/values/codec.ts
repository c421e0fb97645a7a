// DynamicValue codec: MessagePack with unknown values as extension 0 (any extension reads as
// unknown, refinements ignored), JSON where Terraform sends it (state to upgrade). Decoding
// conforms the value to its type: object attributes absent on the wire become null, numbers sent
// as strings become numbers, `dynamic` values are unwrapped.
import { Decoder, Encoder, ExtData } from '@msgpack/msgpack';
import { parseType, UNKNOWN, type CtyType, type TfObject, type TfValue } from './types.js';

/** cty writes an unknown as fixext1 type 0 (the payload is ignored by readers). Reading, the
 * msgpack library hands every extension over as ExtData, which is how unknowns are recognised. */
const UNKNOWN_EXT = new ExtData(0, new Uint8Array([0]));
/** One of each for the process (the library's decode()/encode() build a new one per value; each clones itself if re-entered). */
const decoder = new Decoder();
const encoder = new Encoder();

export class ValueError extends Error {
  readonly path: (string | number)[];
  constructor(path: (string | number)[], message: string) {
    super(path.length ? `${path.join('.')}: ${message}` : message);
    this.path = path;
  }
}

/** Where a value sits, built into an array only for an error (most values convert without one). */
type Where = { readonly parent: Where; readonly step: string | number } | undefined;
const at = (parent: Where, step: string | number): Where => ({ parent, step });
function steps(w: Where): (string | number)[] {
  const out: (string | number)[] = [];
  for (let x = w; x; x = x.parent) out.unshift(x.step);
  return out;
}
const fail = (w: Where, message: string) => new ValueError(steps(w), message);

function conform(raw: unknown, type: CtyType, path: Where, fromJson: boolean): TfValue {
  if (raw === null || raw === undefined) return null;
  if (raw instanceof ExtData) return UNKNOWN;
  if (type === 'dynamic') {
    if (fromJson) {
      const o = raw as { type?: unknown; value?: unknown };
      return conform(o.value, o.type as CtyType, path, true);
    }
    const [typeBytes, inner] = raw as [Uint8Array, unknown];
    return conform(inner, JSON.parse(Buffer.from(typeBytes).toString('utf8')) as CtyType, path, false);
  }
  if (type === 'string') {
    if (typeof raw !== 'string') throw fail(path, `expected a string, got ${typeof raw}`);
    return raw;
  }
  if (type === 'number') {
    if (typeof raw === 'number') return raw;
    if (typeof raw === 'bigint') return Number(raw);
    if (typeof raw === 'string' && raw.trim() !== '' && Number.isFinite(Number(raw))) return Number(raw);
    throw fail(path, `expected a number, got ${JSON.stringify(raw)}`);
  }
  if (type === 'bool') {
    if (typeof raw !== 'boolean') throw fail(path, `expected a bool, got ${typeof raw}`);
    return raw;
  }
  const [kind, arg] = type;
  if (kind === 'list' || kind === 'set' || kind === 'tuple') {
    if (!Array.isArray(raw)) throw fail(path, `expected a ${kind}`);
    return raw.map((v, i) =>
      conform(v, kind === 'tuple' ? (arg as CtyType[])[i]! : (arg as CtyType), at(path, i), fromJson),
    );
  }
  if (typeof raw !== 'object' || Array.isArray(raw) || raw instanceof Uint8Array)
    throw fail(path, `expected a ${kind}`);
  const out: TfObject = {};
  if (kind === 'map') {
    const entries = raw instanceof Map ? [...raw.entries()] : Object.entries(raw);
    for (const [k, v] of entries) out[String(k)] = conform(v, arg as CtyType, at(path, String(k)), fromJson);
    return out;
  }
  const attrs = arg as { [k: string]: CtyType };
  const given = raw instanceof Map ? Object.fromEntries([...raw.entries()].map(([k, v]) => [String(k), v])) : raw;
  for (const k in attrs)
    out[k] = conform(
      Object.hasOwn(given, k) ? (given as Record<string, unknown>)[k] : null,
      attrs[k]!,
      at(path, k),
      fromJson,
    );
  return out;
}

/** The wire form of a value: unknowns as extension 0, objects with every attribute of their type. */
function toWire(v: TfValue | undefined, type: CtyType, path: Where): unknown {
  if (v === undefined || v === null) return null;
  if (v === UNKNOWN) return UNKNOWN_EXT;
  if (type === 'dynamic') {
    const t = inferType(v);
    return [Buffer.from(JSON.stringify(t)), toWire(v, t, path)];
  }
  if (type === 'string') {
    if (typeof v !== 'string') throw fail(path, `cannot send ${typeof v} as a string`);
    return v;
  }
  if (type === 'number') {
    if (typeof v !== 'number' || !Number.isFinite(v)) throw fail(path, `cannot send ${JSON.stringify(v)} as a number`);
    return v;
  }
  if (type === 'bool') {
    if (typeof v !== 'boolean') throw fail(path, `cannot send ${typeof v} as a bool`);
    return v;
  }
  const [kind, arg] = type;
  if (kind === 'list' || kind === 'set' || kind === 'tuple') {
    if (!Array.isArray(v)) throw fail(path, `cannot send a non-array as a ${kind}`);
    return v.map((x, i) => toWire(x, kind === 'tuple' ? (arg as CtyType[])[i]! : (arg as CtyType), at(path, i)));
  }
  if (typeof v !== 'object' || Array.isArray(v)) throw fail(path, `cannot send a non-object as a ${kind}`);
  const out: Record<string, unknown> = {};
  if (kind === 'map') {
    for (const k in v) out[k] = toWire(v[k], arg as CtyType, at(path, k));
    return out;
  }
  const attrs = arg as { [k: string]: CtyType };
  for (const k in attrs) out[k] = toWire(v[k], attrs[k]!, at(path, k));
  return out;
}

/** The type of a known value of a `dynamic` attribute (objects for objects, tuples for arrays). */
function inferType(v: TfValue): CtyType {
  if (typeof v === 'string') return 'string';
  if (typeof v === 'number') return 'number';
  if (typeof v === 'boolean') return 'bool';
  if (Array.isArray(v)) return ['tuple', v.map(inferType)];
  if (v && typeof v === 'object')
    return ['object', Object.fromEntries(Object.entries(v).map(([k, x]) => [k, inferType(x)]))];
  return 'dynamic';
}

export function decodeMsgpack(bytes: Uint8Array, type: CtyType): TfValue {
  return conform(decoder.decode(bytes), type, undefined, false);
}

export function encodeMsgpack(value: TfValue, type: CtyType): Buffer {
  const bytes = encoder.encode(toWire(value, type, undefined));
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

export function decodeJson(bytes: Uint8Array | string, type: CtyType): TfValue {
  return conform(
    JSON.parse(typeof bytes === 'string' ? bytes : Buffer.from(bytes).toString('utf8')),
    type,
    undefined,
    true,
  );
}

/**
 * True when parsed JSON state is already exactly a value of `type` as Terraform's JSON form writes
 * it (every attribute present, none extra, dynamic values as {"value","type"}): Terraform then reads
 * the same bytes back as the upgraded state, with no conversion here.
 */
export function jsonFitsType(raw: unknown, type: CtyType): boolean {
  if (raw === null) return true;
  if (type === 'string') return typeof raw === 'string';
  if (type === 'number') return typeof raw === 'number' && Number.isFinite(raw);
  if (type === 'bool') return typeof raw === 'boolean';
  if (type === 'dynamic') {
    if (typeof raw !== 'object' || Array.isArray(raw)) return false;
    const o = raw as Record<string, unknown>;
    let keys = 0;
    for (const k in o) if (k === 'value' || k === 'type') keys++;
    if (keys !== 2 || Object.keys(o).length !== 2) return false;
    let inner: CtyType;
    try {
      inner = parseType(o.type);
    } catch {
      return false;
    }
    return inner !== 'dynamic' && jsonFitsType(o.value, inner);
  }
  const [kind, arg] = type;
  if (kind === 'list' || kind === 'set' || kind === 'tuple') {
    if (!Array.isArray(raw)) return false;
    if (kind === 'tuple') {
      const types = arg as CtyType[];
      return raw.length === types.length && raw.every((v, i) => jsonFitsType(v, types[i]!));
    }
    return raw.every((v) => v !== null && jsonFitsType(v, arg as CtyType));
  }
  if (typeof raw !== 'object' || Array.isArray(raw)) return false;
  const o = raw as Record<string, unknown>;
  if (kind === 'map') {
    for (const k in o) if (!jsonFitsType(o[k], arg as CtyType)) return false;
    return true;
  }
  const attrs = arg as { [k: string]: CtyType };
  let count = 0;
  for (const k in o) {
    const t = attrs[k];
    if (t === undefined || !jsonFitsType(o[k], t)) return false;
    count++;
  }
  return count === Object.keys(attrs).length;
}

export interface DynamicValue {
  msgpack?: Uint8Array;
  json?: Uint8Array;
}

/** A request's DynamicValue: MessagePack when present, else JSON; an absent value is null. */
export function fromDynamic(dv: DynamicValue | null | undefined, type: CtyType): TfValue {
  if (dv?.msgpack && dv.msgpack.length > 0) return decodeMsgpack(dv.msgpack, type);
  if (dv?.json && dv.json.length > 0) return decodeJson(dv.json, type);
  return null;
}

/** Responses always carry MessagePack (the protocol's advice: JSON answers are not read everywhere). */
export function toDynamic(value: TfValue, type: CtyType): { msgpack: Buffer } {
  return { msgpack: encodeMsgpack(value, type) };
}
