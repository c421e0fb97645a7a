// The precompiled protocol descriptor must be exactly what the .proto files say: this test parses
// them with the full protobufjs parser and compares. UPDATE_PROTOCOL=1 rewrites the JSON.
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { DESCRIPTOR_FILE, loadProtocol, PROTOCOL_DIR, PROTOCOL_FILES } from '../../src/provider/plugin/protocol.js';
import { repoRoot } from '../support/cli.js';

/** Field names as written (snake_case): the provider's messages use them. */
const parse = () =>
  new protobuf.Root().loadSync(
    PROTOCOL_FILES.map((f) => path.join(PROTOCOL_DIR, f)),
    { keepCase: true },
  );

describe('plugin protocol descriptor', () => {
  it('matches schemas/plugin-protocol/*.proto', () => {
    const root = parse();
    const fresh = `${JSON.stringify(root.toJSON(), null, 1)}\n`;
    if (process.env.UPDATE_PROTOCOL) writeFileSync(DESCRIPTOR_FILE, fresh);
    expect(
      readFileSync(DESCRIPTOR_FILE, 'utf8'),
      'descriptor.json is stale: run UPDATE_PROTOCOL=1 npx vitest run test/provider/protocol.test.ts',
    ).toBe(fresh);
  });

  it('keeps the wire numbers Terraform relies on', () => {
    const root = parse();
    const field = (type: string, name: string) => root.lookupType(type).fields[name]!.id;
    expect(field('tfplugin6.DynamicValue', 'msgpack')).toBe(1);
    expect(field('tfplugin6.Schema.Attribute', 'nested_type')).toBe(10);
    expect(field('tfplugin6.PlanResourceChange.Response', 'requires_replace')).toBe(2);
    expect(field('tfplugin6.GetProviderSchema.Response', 'server_capabilities')).toBe(6);
    expect(field('tfplugin6.ValidateProviderConfig.Response', 'diagnostics')).toBe(2);
    expect(Object.keys(root.lookupService('tfplugin6.Provider').methods)).toContain('ApplyResourceChange');
  });

  it('encodes and decodes as the fully parsed protocol does (its types resolve on first use)', () => {
    const root = parse();
    const provider = loadProtocol().provider as unknown as Record<
      string,
      {
        requestSerialize: (o: object) => Buffer;
        responseSerialize: (o: object) => Buffer;
        responseDeserialize: (b: Buffer) => unknown;
      }
    >;
    const full = (type: string, o: object) => {
      const t = root.lookupType(type);
      return Buffer.from(t.encode(t.fromObject(o)).finish());
    };
    const steps = [{ attribute_name: 'name' }, { element_key_int: 3 }, { element_key_string: 'k' }];
    const diagnostics = [{ severity: 'WARNING', summary: 's', detail: 'd', attribute: { steps } }];
    const cases: [string, 'request' | 'response', string, object][] = [
      [
        'PlanResourceChange',
        'response',
        'tfplugin6.PlanResourceChange.Response',
        {
          planned_state: { msgpack: Buffer.from([0x81, 0xa1, 0x61, 0x01]) },
          requires_replace: [{ steps }],
          diagnostics,
        },
      ],
      [
        'UpgradeResourceState',
        'response',
        'tfplugin6.UpgradeResourceState.Response',
        {
          upgraded_state: { json: Buffer.from('{"a":1}') },
          diagnostics: [],
        },
      ],
      [
        'UpgradeResourceState',
        'request',
        'tfplugin6.UpgradeResourceState.Request',
        {
          type_name: 'kms_client',
          version: 3,
          raw_state: { json: Buffer.from('{}'), flatmap: { a: 'b' } },
        },
      ],
      [
        'GetProviderSchema',
        'response',
        'tfplugin6.GetProviderSchema.Response',
        {
          provider: {
            version: 1,
            block: {
              attributes: [{ name: 'a', type: Buffer.from('"string"'), required: true, description_kind: 'MARKDOWN' }],
              block_types: [{ type_name: 'b', nesting: 'LIST', min_items: 1, max_items: 2, block: { version: 0 } }],
            },
          },
          resource_schemas: { x: { version: 2 } },
          server_capabilities: { plan_destroy: true },
          diagnostics,
        },
      ],
      [
        'ReadResource',
        'request',
        'tfplugin6.ReadResource.Request',
        {
          type_name: 't',
          current_state: { msgpack: Buffer.from([0xc0]) },
          private: Buffer.from('p'),
          client_capabilities: { deferral_allowed: true, write_only_attributes_allowed: true },
        },
      ],
    ];
    for (const [method, side, type, message] of cases) {
      const def = provider[method]!;
      const bytes = side === 'request' ? def.requestSerialize(message) : def.responseSerialize(message);
      expect(bytes.equals(full(type, message)), `${type} encodes as the parsed protocol does`).toBe(true);
      if (side === 'response') expect(def.responseDeserialize(bytes)).toMatchObject(message);
    }
  });

  it('loads protobufjs only for a message that has fields (the empty ones of a schema-only start never do)', async () => {
    // The built protocol module in a process of its own: is protobufjs in Node's module cache yet?
    const script = `
      const { loadProtocol } = await import(${JSON.stringify(pathToFileURL(path.join(repoRoot, 'dist', 'provider', 'plugin', 'protocol.js')).href)});
      const { createRequire } = await import('node:module');
      const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((f) => f.includes('/node_modules/protobufjs/'));
      const p = loadProtocol();
      const none = Buffer.alloc(0);
      const requests = [
        p.provider.GetProviderSchema.requestDeserialize(none),
        p.provider.GetMetadata.requestDeserialize(none),
        p.controller.Shutdown.requestDeserialize(none),
        p.stdio.StreamStdio.requestDeserialize(none),
      ];
      const empty = [p.controller.Shutdown.responseSerialize({}).length, p.provider.GetMetadata.requestSerialize({}).length];
      const afterEmpty = loaded();
      let refused = false;
      try { p.provider.GetMetadata.requestDeserialize(Buffer.from([0xff, 0xff, 0xff])); } catch { refused = true; }
      const bytes = p.provider.ValidateProviderConfig.responseSerialize({ diagnostics: [{ severity: 'ERROR', summary: 's' }] });
      console.log(JSON.stringify({ requests, empty, afterEmpty, refused, encoded: bytes.length > 0, afterFields: loaded() }));
    `;
    const out = await new Promise<string>((resolve, reject) =>
      execFile(
        process.execPath,
        ['--input-type=module', '-e', script],
        { env: { PATH: process.env.PATH } },
        (e, o, err) => (e ? reject(new Error(err)) : resolve(o)),
      ),
    );
    expect(JSON.parse(out)).toEqual({
      requests: [{}, {}, {}, {}],
      empty: [0, 0],
      afterEmpty: false,
      // Bytes in an empty message's place are still decoded, and refused when malformed.
      refused: true,
      encoded: true,
      afterFields: true,
    });
  });
});
