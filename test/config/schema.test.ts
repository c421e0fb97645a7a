import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import {
  EDITOR_KEYWORDS,
  SCHEMA_ID,
  expandPaths,
  loadDesiredState,
  loadSchema,
  schemaFilePath,
} from '../../src/config/index.js';

const root = path.resolve(import.meta.dirname, '../..');
const addFormats = (addFormatsModule as unknown as { default: (a: Ajv) => Ajv }).default;

type Schema = Record<string, unknown>;

describe('schemas/kms-sync.schema.json', () => {
  const schema = loadSchema();
  const definitions = schema.definitions as Record<string, Schema>;

  it('is the file in schemas/, draft-07, with the $id the modeline uses', () => {
    expect(schemaFilePath()).toBe(path.join(root, 'schemas', 'kms-sync.schema.json'));
    expect(schema.$schema).toBe('http://json-schema.org/draft-07/schema#');
    expect(schema.$id).toBe(SCHEMA_ID);
  });

  it('compiles in ajv strict mode (only the declared editor keywords added) and is a valid draft-07 schema', () => {
    const ajv = new Ajv({ strict: true, allErrors: true });
    addFormats(ajv);
    ajv.addVocabulary([...EDITOR_KEYWORDS]);
    expect(ajv.validateSchema(schema)).toBe(true);
    expect(() => ajv.compile(schema)).not.toThrow();
  });

  it('is closed (additionalProperties: false) everywhere except the free-form objects', () => {
    const open: string[] = [];
    const visit = (s: unknown, where: string): void => {
      if (!s || typeof s !== 'object') return;
      const o = s as Schema;
      if (o.type === 'object' && o.additionalProperties !== false) open.push(where);
      for (const [k, v] of Object.entries(o)) {
        if (k === 'examples' || k === 'default') continue;
        visit(v, `${where}/${k}`);
      }
    };
    visit(schema, '#');
    expect(open).toEqual(['#/definitions/jsonObject']);
  });

  it('documents every property for editor completion', () => {
    const undocumented: string[] = [];
    const visit = (s: Schema, where: string): void => {
      for (const [name, prop] of Object.entries((s.properties ?? {}) as Record<string, Schema>)) {
        const target = typeof prop.$ref === 'string' ? (definitions[prop.$ref.split('/').pop() ?? ''] ?? {}) : {};
        if (!prop.title && !prop.description && !target.title && !target.description)
          undocumented.push(`${where}.${name}`);
      }
    };
    visit(schema, 'root');
    for (const [name, def] of Object.entries(definitions)) visit(def, name);
    expect(undocumented).toEqual([]);
  });

  it('allows protected on every resource and only there', () => {
    const withProtected = Object.entries(definitions)
      .filter(([, d]) => 'protected' in ((d.properties ?? {}) as Schema))
      .map(([n]) => n)
      .sort();
    expect(withProtected).toEqual(['client', 'endpoint', 'environment', 'key', 'project', 'template']);
  });
});

describe('examples/', () => {
  it('every example document is valid against the schema, and the modelines point at it', async () => {
    const ajv = new Ajv({ strict: true, allErrors: true });
    addFormats(ajv);
    ajv.addVocabulary([...EDITOR_KEYWORDS]);
    const validate = ajv.compile(loadSchema());
    // examples/agent/ and the Kubernetes folders hold deployment manifests, not configurations (test/agent/deploy.test.ts
    // and test/engine/shard-examples.test.ts check them).
    const files = (await expandPaths(['examples'], { cwd: root })).filter(
      (f) => !/examples\/agent\/|\/kubernetes\//.test(f.split(path.sep).join('/')),
    );
    expect(files.length).toBeGreaterThanOrEqual(3);
    for (const file of files) {
      const text = await readFile(file, 'utf8');
      const ref = /^# yaml-language-server: \$schema=(.+)$/m.exec(text)?.[1];
      expect(ref, file).toBeDefined();
      expect(path.resolve(path.dirname(file), ref ?? '')).toBe(schemaFilePath());
      for (const doc of parseAllDocuments(text)) {
        // Interpolation happens before validation; the examples only use defaults.
        const value = JSON.parse(JSON.stringify(doc.toJS()).replace(/\$\{env:[A-Z_]+:-([^}]*)\}/g, '$1'));
        expect(validate(value) ? [] : validate.errors, file).toEqual([]);
      }
    }
  });

  it('loads the acme quick start: one project, two environments, ~10 clients, ~8 endpoints, default store', async () => {
    const { state, files } = await loadDesiredState(['examples/acme'], { cwd: root, env: {} });
    expect(files).toEqual([
      'examples/acme/project.yaml',
      'examples/acme/teams/partners.yaml',
      'examples/acme/teams/payments.yaml',
    ]);
    expect(state.projects.map((p) => p.slug)).toEqual(['acme']);
    expect(state.envs.map((e) => e.projectEnv)).toEqual(['acme-production', 'acme-staging']);
    expect(state.templates.length).toBeGreaterThanOrEqual(4);
    expect(state.clients).toHaveLength(10);
    expect(state.endpoints).toHaveLength(8);
    const keys = state.clients.flatMap((c) => c.keys);
    expect(keys.length).toBeGreaterThanOrEqual(10);
    expect(keys.every((k) => k.secret?.store === undefined)).toBe(true);
    expect(state.clients.some((c) => (c.ipWhitelist ?? []).length > 0 && c.metadata)).toBe(true);
    expect(new Set(state.clients.map((c) => c.source?.file))).toEqual(
      new Set(['examples/acme/teams/partners.yaml', 'examples/acme/teams/payments.yaml']),
    );
  });
});
