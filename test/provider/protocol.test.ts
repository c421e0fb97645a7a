// The precompiled protocol descriptor must be exactly what the .proto files say: this test parses
// them with the full protobufjs parser and compares. UPDATE_PROTOCOL=1 rewrites the JSON.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { DESCRIPTOR_FILE, PROTOCOL_DIR, PROTOCOL_FILES } from '../../src/provider/plugin/protocol.js';

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
});
