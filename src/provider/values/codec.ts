// DynamicValue codec: MessagePack with unknown values as extension 0 (any extension reads as
// unknown, refinements ignored), JSON where Terraform sends it (state to upgrade). Decoding
// conforms the value to its type: object attributes absent on the wire become null, numbers sent
// as strings become numbers, `dynamic` values are unwrapped.
import { decode, encode, ExtData } from '@msgpack/msgpack';
import { UNKNOWN, type CtyType, type TfObject, type TfValue } from './types.js';

/** cty writes an unknown as fixext1 type 0 (the payload is ignored by readers). Reading, the
 * msgpack library hands every extension over as ExtData, which is how unknowns are recognised. */
const UNKNOWN_EXT = new ExtData(0, new Uint8Array([0]));

export class ValueError extends Error {
  readonly path: (string | number)[];
  constructor(path: (string | number)[], message: string) {
    super(path.length ? `${path.join('.')}: ${message}` : message);
    this.path = path;
  }
}

function conform(raw: unknown, type: CtyType, path: (string | number)[], fromJson: boolean): TfValue {
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
    if (typeof raw !== 'string') throw new ValueError(path, `expected a string, got ${typeof raw}`);
    return raw;
  }
  if (type === 'number') {
    if (typeof raw === 'number') return raw;
    if (typeof raw === 'bigint') return Number(raw);
    if (typeof raw === 'string' && raw.trim() !== '' && Number.isFinite(Number(raw))) return Number(raw);
    throw new ValueError(path, `expected a number, got ${JSON.stringify(raw)}`);
  }
  if (type === 'bool') {
    if (typeof raw !== 'boolean') throw new ValueError(path, `expected a bool, got ${typeof raw}`);
    return raw;
  }
  const [kind, arg] = type;
  if (kind === 'list' || kind === 'set' || kind === 'tuple') {
    if (!Array.isArray(raw)) throw new ValueError(path, `expected a ${kind}`);
    return raw.map((v, i) =>
      conform(v, kind === 'tuple' ? (arg as CtyType[])[i]! : (arg as CtyType), [...path, i], fromJson),
    );
  }
  if (typeof raw !== 'object' || Array.isArray(raw) || raw instanceof Uint8Array)
    throw new ValueError(path, `expected a ${kind}`);
  const entries = raw instanceof Map ? [...raw.entries()] : Object.entries(raw);
  const out: TfObject = {};
  if (kind === 'map') {
    for (const [k, v] of entries) out[String(k)] = conform(v, arg as CtyType, [...path, String(k)], fromJson);
    return out;
  }
  const attrs = arg as { [k: string]: CtyType };
  const given = new Map(entries.map(([k, v]) => [String(k), v]));
  for (const [k, t] of Object.entries(attrs)) out[k] = conform(given.get(k), t, [...path, k], fromJson);
  return out;
}

/** The wire form of a value: unknowns as extension 0, objects with every attribute of their type. */
function toWire(v: TfValue | undefined, type: CtyType, path: (string | number)[]): unknown {
  if (v === undefined || v === null) return null;
  if (v === UNKNOWN) return UNKNOWN_EXT;
  if (type === 'dynamic') {
    const t = inferType(v);
    return [Buffer.from(JSON.stringify(t)), toWire(v, t, path)];
  }
  if (type === 'string') {
    if (typeof v !== 'string') throw new ValueError(path, `cannot send ${typeof v} as a string`);
    return v;
  }
  if (type === 'number') {
    if (typeof v !== 'number' || !Number.isFinite(v))
      throw new ValueError(path, `cannot send ${JSON.stringify(v)} as a number`);
    return v;
  }
  if (type === 'bool') {
    if (typeof v !== 'boolean') throw new ValueError(path, `cannot send ${typeof v} as a bool`);
    return v;
  }
  const [kind, arg] = type;
  if (kind === 'list' || kind === 'set' || kind === 'tuple') {
    if (!Array.isArray(v)) throw new ValueError(path, `cannot send a non-array as a ${kind}`);
    return v.map((x, i) => toWire(x, kind === 'tuple' ? (arg as CtyType[])[i]! : (arg as CtyType), [...path, i]));
  }
  if (typeof v !== 'object' || Array.isArray(v)) throw new ValueError(path, `cannot send a non-object as a ${kind}`);
  const out: Record<string, unknown> = {};
  if (kind === 'map') {
    for (const [k, x] of Object.entries(v)) out[k] = toWire(x, arg as CtyType, [...path, k]);
    return out;
  }
  for (const [k, t] of Object.entries(arg as { [k: string]: CtyType })) out[k] = toWire(v[k], t, [...path, k]);
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
  return conform(decode(bytes), type, [], false);
}

export function encodeMsgpack(value: TfValue, type: CtyType): Buffer {
  const bytes = encode(toWire(value, type, []));
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

export function decodeJson(bytes: Uint8Array | string, type: CtyType): TfValue {
  return conform(JSON.parse(typeof bytes === 'string' ? bytes : Buffer.from(bytes).toString('utf8')), type, [], true);
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
