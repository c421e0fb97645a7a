// Terraform's value types (cty) as the protocol writes them: compact JSON type constraints
// (`"string"`, `["list","string"]`, `["object",{"a":"number"}]`), and the object type of a schema
// block. Values travel as plain JS (null, string, number, boolean, arrays, objects) plus UNKNOWN.

export type CtyType =
  | 'string'
  | 'number'
  | 'bool'
  | 'dynamic'
  | ['list', CtyType]
  | ['set', CtyType]
  | ['map', CtyType]
  | ['object', { [attr: string]: CtyType }]
  | ['object', { [attr: string]: CtyType }, string[]]
  | ['tuple', CtyType[]];

/** A value not known until apply (msgpack extension 0 on the wire). */
export const UNKNOWN: unique symbol = Symbol('unknown');
export type Unknown = typeof UNKNOWN;

export type TfValue = null | Unknown | string | number | boolean | TfValue[] | { [k: string]: TfValue };
export type TfObject = { [k: string]: TfValue };

export const isUnknown = (v: unknown): v is Unknown => v === UNKNOWN;

/** True when the value or anything inside it is unknown. */
export function containsUnknown(v: TfValue): boolean {
  if (v === UNKNOWN) return true;
  if (Array.isArray(v)) return v.some(containsUnknown);
  if (v !== null && typeof v === 'object') return Object.values(v).some(containsUnknown);
  return false;
}

/** Checks that JSON is a type constraint; throws naming what is wrong. */
export function parseType(json: unknown, where = 'type'): CtyType {
  if (json === 'string' || json === 'number' || json === 'bool' || json === 'dynamic') return json;
  if (Array.isArray(json) && typeof json[0] === 'string') {
    const [kind, arg] = json as [string, unknown];
    if (kind === 'list' || kind === 'set' || kind === 'map') return [kind, parseType(arg, `${where}[1]`)];
    if (kind === 'tuple' && Array.isArray(arg)) return ['tuple', arg.map((t, i) => parseType(t, `${where}[1][${i}]`))];
    if (kind === 'object' && arg && typeof arg === 'object' && !Array.isArray(arg)) {
      const attrs: { [k: string]: CtyType } = {};
      for (const [k, t] of Object.entries(arg)) attrs[k] = parseType(t, `${where}[1].${k}`);
      const optional = json[2];
      return Array.isArray(optional) ? ['object', attrs, optional.map(String)] : ['object', attrs];
    }
  }
  throw new Error(`${where}: not a Terraform type constraint: ${JSON.stringify(json)}`);
}

// ---------------------------------------------------------------- schema JSON (`terraform providers schema -json`)
export interface JsonAttribute {
  type?: unknown;
  nested_type?: { attributes: Record<string, JsonAttribute>; nesting_mode: 'single' | 'list' | 'set' | 'map' };
  description?: string;
  description_kind?: 'plain' | 'markdown';
  required?: boolean;
  optional?: boolean;
  computed?: boolean;
  sensitive?: boolean;
  deprecated?: boolean;
  write_only?: boolean;
}

export interface JsonBlockType {
  nesting_mode: 'single' | 'list' | 'set' | 'map' | 'group';
  block: JsonBlock;
  min_items?: number;
  max_items?: number;
}

export interface JsonBlock {
  attributes?: Record<string, JsonAttribute>;
  block_types?: Record<string, JsonBlockType>;
  description?: string;
  description_kind?: 'plain' | 'markdown';
  deprecated?: boolean;
}

export interface JsonSchema {
  version: number;
  block: JsonBlock;
}

/** True when a type has `dynamic` anywhere inside it. */
export function hasDynamic(t: CtyType): boolean {
  if (t === 'dynamic') return true;
  if (typeof t === 'string') return false;
  if (t[0] === 'object') return Object.values(t[1]).some(hasDynamic);
  if (t[0] === 'tuple') return t[1].some(hasDynamic);
  return hasDynamic(t[1]);
}

function nested(mode: string, obj: CtyType): CtyType {
  // Blocks whose content holds a `dynamic` attribute cannot form a list or map of one element
  // type: Terraform then sends the whole collection as a dynamic value (a tuple, an object).
  if ((mode === 'list' || mode === 'map') && hasDynamic(obj)) return 'dynamic';
  if (mode === 'list') return ['list', obj];
  if (mode === 'set') return ['set', obj];
  if (mode === 'map') return ['map', obj];
  return obj; // single, group
}

export function attributeType(a: JsonAttribute, where: string): CtyType {
  if (a.nested_type) {
    const attrs: { [k: string]: CtyType } = {};
    for (const [k, inner] of Object.entries(a.nested_type.attributes)) attrs[k] = attributeType(inner, `${where}.${k}`);
    return nested(a.nested_type.nesting_mode, ['object', attrs]);
  }
  return parseType(a.type, `${where}.type`);
}

/** The object type a block's values have: one attribute per attribute and per nested block type. */
export function blockType(b: JsonBlock, where = 'block'): CtyType {
  const attrs: { [k: string]: CtyType } = {};
  for (const [k, a] of Object.entries(b.attributes ?? {})) attrs[k] = attributeType(a, `${where}.attributes.${k}`);
  for (const [k, bt] of Object.entries(b.block_types ?? {}))
    attrs[k] = nested(bt.nesting_mode, blockType(bt.block, `${where}.block_types.${k}`));
  return ['object', attrs];
}
