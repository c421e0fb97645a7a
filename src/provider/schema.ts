// The provider's schema, read at run time from schemas/terraform-provider-kms.json: the one
// schema the CDKTF bindings are generated from too, in the format of `terraform providers schema
// -json`. From it come the GetProviderSchema answer and the value type of every resource.
import { packageFile, readPackageText } from '../model/package-files.js';
import {
  attributeType,
  blockType,
  type CtyType,
  type JsonAttribute,
  type JsonBlock,
  type JsonSchema,
} from './values/types.js';

export const SCHEMA_FILE = packageFile('schemas', 'terraform-provider-kms.json');

export interface ProviderSchemas {
  /** Registry address, e.g. registry.terraform.io/kms-sync/kms. */
  address: string;
  provider: JsonSchema;
  resources: Record<string, JsonSchema>;
  dataSources: Record<string, JsonSchema>;
  /** Ephemeral resources (Terraform >= 1.10): opened, never planned or stored. */
  ephemeralResources: Record<string, JsonSchema>;
}

export function loadSchemas(file = SCHEMA_FILE): ProviderSchemas {
  const doc = JSON.parse(readPackageText(file)) as {
    provider_schemas?: Record<
      string,
      {
        provider: JsonSchema;
        resource_schemas?: Record<string, JsonSchema>;
        data_source_schemas?: Record<string, JsonSchema>;
        ephemeral_resource_schemas?: Record<string, JsonSchema>;
      }
    >;
  };
  const entries = Object.entries(doc.provider_schemas ?? {});
  if (entries.length !== 1)
    throw new Error(`${file}: expected exactly one provider under provider_schemas, found ${entries.length}`);
  const [address, s] = entries[0]!;
  return {
    address,
    provider: s.provider,
    resources: s.resource_schemas ?? {},
    dataSources: s.data_source_schemas ?? {},
    ephemeralResources: s.ephemeral_resource_schemas ?? {},
  };
}

/** Object type of a schema's values (memoised per schema object). */
const types = new WeakMap<JsonSchema, CtyType>();
export function valueType(s: JsonSchema): CtyType {
  let t = types.get(s);
  if (!t) types.set(s, (t = blockType(s.block)));
  return t;
}

// ---------------------------------------------------------------- JSON schema → protocol messages
const kind = (k: string | undefined) => (k === 'markdown' ? 'MARKDOWN' : 'PLAIN');

function protoAttribute(name: string, a: JsonAttribute, where: string): Record<string, unknown> {
  return {
    name,
    // The attribute's type travels as compact JSON bytes.
    type: a.nested_type ? Buffer.alloc(0) : Buffer.from(JSON.stringify(attributeType(a, where))),
    ...(a.nested_type
      ? {
          nested_type: {
            attributes: Object.entries(a.nested_type.attributes).map(
              ([n, x]): Record<string, unknown> => protoAttribute(n, x, `${where}.${n}`),
            ),
            nesting: a.nested_type.nesting_mode.toUpperCase(),
          },
        }
      : {}),
    description: a.description ?? '',
    description_kind: kind(a.description_kind),
    required: Boolean(a.required),
    optional: Boolean(a.optional),
    computed: Boolean(a.computed),
    sensitive: Boolean(a.sensitive),
    deprecated: Boolean(a.deprecated),
    write_only: Boolean(a.write_only),
  };
}

function protoBlock(b: JsonBlock, version: number, where: string): unknown {
  return {
    version,
    attributes: Object.entries(b.attributes ?? {}).map(([n, a]) => protoAttribute(n, a, `${where}.${n}`)),
    block_types: Object.entries(b.block_types ?? {}).map(([n, bt]) => ({
      type_name: n,
      block: protoBlock(bt.block, version, `${where}.${n}`),
      nesting: bt.nesting_mode.toUpperCase(),
      min_items: bt.min_items ?? 0,
      max_items: bt.max_items ?? 0,
    })),
    description: b.description ?? '',
    description_kind: kind(b.description_kind),
    deprecated: Boolean(b.deprecated),
  };
}

export function protoSchema(s: JsonSchema, where: string) {
  return { version: s.version ?? 0, block: protoBlock(s.block, s.version ?? 0, where) };
}

/** Attributes the schema marks sensitive, as top-level names (what redaction needs). */
export function sensitiveAttributes(s: JsonSchema): string[] {
  return Object.entries(s.block.attributes ?? {})
    .filter(([, a]) => a.sensitive)
    .map(([n]) => n);
}

/** Attributes the schema marks write-only, as top-level names: never in a plan or state (null there). */
export function writeOnlyAttributes(s: JsonSchema): string[] {
  return Object.entries(s.block.attributes ?? {})
    .filter(([, a]) => a.write_only)
    .map(([n]) => n);
}
