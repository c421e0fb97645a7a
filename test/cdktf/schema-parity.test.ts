// The provider schema (CDKTF bindings, Terraform provider) and the YAML JSON Schema describe the same
// resource model: every YAML field is exactly one Terraform attribute of the matching resource, with
// a compatible type and the same required-ness, and every configurable attribute is a YAML field or
// names a parent. src/cdktf/mapping.ts (also used by the synth reader) is the line-up.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  KMS_RESOURCE_TYPES,
  PROVIDER_FIELDS,
  PROVIDER_SOURCE,
  RESOURCE_MAPPINGS,
  STORE_BLOCK,
  STORE_FIELDS,
} from '../../src/cdktf/mapping.js';
import { repoRoot } from '../support/cli.js';

type Json = Record<string, any>;
const read = (f: string): Json => JSON.parse(readFileSync(path.join(repoRoot, 'schemas', f), 'utf8'));
const yaml = read('kms-sync.schema.json');
const tf = read('terraform-provider-kms.json').provider_schemas[PROVIDER_SOURCE];

const deref = (s: Json): Json =>
  s.$ref ? { ...yaml.definitions[s.$ref.replace('#/definitions/', '')], ...s, $ref: undefined } : s;

interface Leaf {
  type: string;
  required: boolean;
}

/** Leaf fields of a YAML definition, nested objects (rotation, secret) flattened to `a.b`. */
function yamlLeaves(def: Json, skip: readonly string[], prefix = '', parentRequired = true): Map<string, Leaf> {
  const out = new Map<string, Leaf>();
  for (const [name, raw] of Object.entries(def.properties as Json)) {
    if (!prefix && skip.includes(name)) continue;
    const prop = deref(raw as Json);
    const required = parentRequired && (def.required ?? []).includes(name);
    if (prop.type === 'object' && prop.properties) {
      for (const [k, v] of yamlLeaves(prop, [], `${prefix}${name}.`, required)) out.set(k, v);
      continue;
    }
    const type = prop.type === 'array' ? `array<${deref(prop.items).type}>` : prop.type;
    out.set(`${prefix}${name}`, { type, required });
  }
  return out;
}

const TYPE_FOR: Record<string, string[]> = {
  string: ['"string"'],
  integer: ['"number"'],
  number: ['"number"'],
  boolean: ['"bool"'],
  'array<string>': ['["set","string"]', '["list","string"]'],
  object: ['"dynamic"'],
};

function checkBlock(
  label: string,
  attrs: Json,
  def: Json,
  fields: Readonly<Record<string, string | undefined>>,
  o: {
    parents?: readonly string[];
    children?: readonly string[];
    definedBy?: readonly string[];
  },
) {
  const leaves = yamlLeaves(def, o.children ?? []);
  const mapped = Object.entries(fields).filter((e): e is [string, string] => e[1] !== undefined);
  // Every YAML field is mapped exactly once, and nothing is mapped to a field YAML does not have.
  expect([...mapped.map(([, y]) => y)].sort(), `${label}: YAML fields`).toEqual([...leaves.keys()].sort());
  for (const [attr, field] of mapped) {
    const a = attrs[attr];
    expect(a, `${label}.${attr} exists`).toBeDefined();
    const leaf = leaves.get(field)!;
    expect(TYPE_FOR[leaf.type], `${label}.${attr}: YAML type ${leaf.type} is known`).toBeDefined();
    expect(TYPE_FOR[leaf.type], `${label}.${attr} (${field}): types agree`).toContain(JSON.stringify(a.type));
    expect(Boolean(a.optional || a.required), `${label}.${attr} is configurable`).toBe(true);
    const yamlRequired = leaf.required || (o.definedBy ?? []).includes(field);
    expect(Boolean(a.required), `${label}.${attr} required-ness agrees with YAML ${field}`).toBe(yamlRequired);
  }
  // Every configurable attribute is a YAML field or a parent; everything else is computed only.
  for (const [attr, a] of Object.entries(attrs as Json)) {
    if (attr in fields) continue;
    if ((o.parents ?? []).includes(attr)) {
      expect(a.required, `${label}.${attr} (parent) is required`).toBe(true);
      expect(a.type).toBe('string');
      continue;
    }
    expect(
      { attr, optional: a.optional, required: a.required, computed: a.computed },
      `${label}.${attr} is computed only`,
    ).toEqual({ attr, optional: undefined, required: undefined, computed: true });
  }
}

describe('provider schema ↔ YAML schema', () => {
  it.each(KMS_RESOURCE_TYPES)('%s has exactly the fields of its YAML definition', (type) => {
    const m = RESOURCE_MAPPINGS[type];
    const block = tf.resource_schemas[type]?.block;
    expect(block, `${type} is in the provider schema`).toBeDefined();
    const skip = [...m.children, ...(m.elsewhere ? [m.elsewhere] : [])];
    checkBlock(type, block.attributes, yaml.definitions[m.yaml], m.fields, {
      parents: Object.keys(m.parents),
      children: skip,
      definedBy: m.definedBy,
    });
    // "Defined elsewhere" is a YAML flag and, in Terraform, the data source of the same type.
    if (m.elsewhere) {
      expect(yaml.definitions[m.yaml].properties[m.elsewhere].type).toBe('boolean');
      expect(tf.data_source_schemas[type], `data.${type} names a ${type} defined elsewhere`).toBeDefined();
    }
    // Children of the YAML definition are the resources whose parents point here.
    for (const child of m.children) expect(deref(yaml.definitions[m.yaml].properties[child]).type).toBe('array');
    for (const id of m.identity)
      expect(block.attributes[id].required, `${type}.${id} (identity) is required`).toBe(true);
    expect(block.attributes.id, `${type}.id`).toMatchObject({ type: 'string', computed: true });
    expect(block.attributes.id.optional).toBeUndefined();
  });

  it('the provider schema has exactly the six kms_* resources', () => {
    expect(Object.keys(tf.resource_schemas).sort()).toEqual([...KMS_RESOURCE_TYPES].sort());
  });

  it('secret_store blocks are the stores of YAML', () => {
    const store = tf.provider.block.block_types[STORE_BLOCK];
    expect(store.nesting_mode).toBe('list');
    checkBlock('provider.secret_store', store.block.attributes, yaml.definitions.store, STORE_FIELDS, {});
  });

  it('provider attributes are top-level YAML fields or engine-only, and YAML has no other top-level field', () => {
    const attrs = tf.provider.block.attributes as Json;
    expect(Object.keys(attrs).sort()).toEqual(Object.keys(PROVIDER_FIELDS).sort());
    const top = yaml.properties as Json;
    for (const [attr, field] of Object.entries(PROVIDER_FIELDS)) {
      if (field === undefined) continue;
      expect(top[field], `YAML has top-level ${field} (provider ${attr})`).toBeDefined();
      expect(TYPE_FOR[top[field].type]).toContain(JSON.stringify(attrs[attr].type));
    }
    // settings: how kms-sync itself runs (the provider reads KMS_SYNC_ALLOW_LOCAL_STORE instead).
    const yamlOnly = ['apiVersion', 'settings', 'stores', 'projects'];
    expect(
      Object.keys(top)
        .filter((k) => !yamlOnly.includes(k))
        .sort(),
    ).toEqual(
      Object.values(PROVIDER_FIELDS)
        .filter((f) => f !== undefined)
        .sort(),
    );
  });

  it('data sources look up by natural key and return attributes of the same type as the resource', () => {
    const extra: Record<string, string[]> = {
      kms_project: ['environments'],
      kms_environment: [],
      kms_client: ['keys'],
      kms_key: ['generations'],
    };
    expect(Object.keys(tf.data_source_schemas).sort()).toEqual([
      'kms_client',
      'kms_clients',
      'kms_endpoint',
      'kms_endpoints',
      'kms_environment',
      'kms_key',
      'kms_project',
      'kms_projects',
      'kms_template',
      'kms_templates',
    ]);
    // The list data sources (plural) return one computed list; their filters are optional.
    for (const type of ['kms_clients', 'kms_endpoints', 'kms_projects', 'kms_templates']) {
      const attrs = tf.data_source_schemas[type].block.attributes as Json;
      const lists = Object.entries(attrs).filter(
        ([, a]) => a.computed && JSON.stringify(a.type).startsWith('["list",["object"'),
      );
      expect(
        lists.map(([n]) => n),
        `${type} returns one list`,
      ).toEqual([type.slice(4)]);
    }
    for (const [type, ds] of Object.entries(tf.data_source_schemas as Json).filter(([t]) => tf.resource_schemas[t])) {
      const resource = tf.resource_schemas[type].block.attributes as Json;
      const m = RESOURCE_MAPPINGS[type as keyof typeof RESOURCE_MAPPINGS];
      for (const [attr, a] of Object.entries(ds.block.attributes as Json)) {
        if ((extra[type] ?? []).includes(attr)) {
          expect(a.computed).toBe(true);
          continue;
        }
        expect(resource[attr], `data.${type}.${attr} is an attribute of the resource`).toBeDefined();
        expect(JSON.stringify(a.type), `data.${type}.${attr} type`).toBe(JSON.stringify(resource[attr].type));
        if (a.required)
          expect([...m.identity, 'project_env'], `data.${type}.${attr} looks up by identity`).toContain(attr);
        else expect(a.computed, `data.${type}.${attr}`).toBe(true);
      }
    }
  });

  it('no attribute can hold a raw key; only the project key is sensitive', () => {
    const sensitive: string[] = [];
    const names: string[] = [];
    const walk = (label: string, block: Json) => {
      for (const [n, a] of Object.entries((block.attributes ?? {}) as Json)) {
        names.push(n);
        if (a.sensitive) sensitive.push(`${label}.${n}`);
      }
      for (const [n, b] of Object.entries((block.block_types ?? {}) as Json)) walk(`${label}.${n}`, b.block);
    };
    walk('provider', tf.provider.block);
    for (const [t, s] of Object.entries({ ...tf.resource_schemas, ...tf.data_source_schemas } as Json))
      walk(t, s.block);
    expect(sensitive).toEqual(['provider.api_key']);
    for (const forbidden of ['key', 'raw_key', 'secret', 'secret_value', 'value'])
      expect(names).not.toContain(forbidden);
  });
});
