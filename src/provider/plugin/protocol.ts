// The gRPC service definitions of the plugin protocol, built from a JSON descriptor precompiled
// from the .proto files in schemas/plugin-protocol/ (test/provider/protocol.test.ts keeps the two
// in step and rewrites the JSON). protobufjs/light reads it without the .proto parser. This runs on
// every provider start, before the handshake: the methods come from the JSON alone, and protobufjs
// (~25 ms of a start to load) is loaded on the first message that needs a codec. Terraform's first
// start of each command asks only for the schema, answered with bytes encoded at build time
// (schema-wire.ts), and its other messages there are empty: that start never loads protobufjs.
import type { ServiceDefinition } from '@grpc/grpc-js';
import { createRequire } from 'node:module';
import path from 'node:path';
import type protobuf from 'protobufjs/light.js';
import { packageFile, readPackageText } from '../../model/package-files.js';

export const PROTOCOL_DIR = packageFile('schemas', 'plugin-protocol') + path.sep;
export const PROTOCOL_FILES = ['tfplugin6.proto', 'go-plugin.proto', 'health.proto'];
export const DESCRIPTOR_FILE = `${PROTOCOL_DIR}descriptor.json`;

// A plain require, on first use (the provider's bundles turn it into one: scripts/bundle-cli.js).
const requireHere = createRequire(import.meta.url);

/** How messages look in JS: field names as in the proto, int64 as number, enums by name, bytes as Buffer. */
const TO_OBJECT: protobuf.IConversionOptions = {
  longs: Number,
  enums: String,
  bytes: Buffer,
  defaults: true,
  oneofs: true,
};

/** The descriptor's JSON: namespaces, message types (fields) and services (methods). */
interface JsonNode {
  nested?: Record<string, JsonNode>;
  fields?: Record<string, unknown>;
  oneofs?: Record<string, unknown>;
  methods?: Record<
    string,
    { requestType: string; responseType: string; requestStream?: boolean; responseStream?: boolean }
  >;
}

/** A type named as a method names it, looked up as protobuf does: from the innermost enclosing namespace out. */
function lookup(root: JsonNode, scope: string[], name: string): JsonNode | undefined {
  const parts = name.replace(/^\./, '').split('.');
  for (let depth = name.startsWith('.') ? 0 : scope.length; depth >= 0; depth--) {
    let node: JsonNode | undefined = root;
    for (const p of [...scope.slice(0, depth), ...parts]) node = node?.nested?.[p];
    if (node) return node;
  }
  return undefined;
}

/** A message type with no fields (go-plugin's Empty, GetProviderSchema.Request): its encoding is always empty. */
const fieldless = (t: JsonNode | undefined) =>
  t !== undefined && Object.keys(t.fields ?? {}).length === 0 && Object.keys(t.oneofs ?? {}).length === 0;

function service(json: JsonNode, types: () => protobuf.Root, fullName: string): ServiceDefinition {
  const names = fullName.split('.');
  const svc = names.reduce<JsonNode | undefined>((n, p) => n?.nested?.[p], json);
  if (!svc?.methods) throw new Error(`${DESCRIPTOR_FILE}: no service ${fullName}`);
  const scope = names.slice(0, -1);
  const def: Record<string, unknown> = {};
  for (const [name, m] of Object.entries(svc.methods)) {
    let resolved: { req: protobuf.Type; res: protobuf.Type } | undefined;
    const codecs = () => {
      if (!resolved) {
        const method = types().lookupService(fullName).methods[name]!;
        method.resolve();
        resolved = { req: method.resolvedRequestType!, res: method.resolvedResponseType! };
      }
      return resolved;
    };
    const emptyRequest = fieldless(lookup(json, scope, m.requestType));
    const emptyResponse = fieldless(lookup(json, scope, m.responseType));
    const serialize = (empty: boolean, type: () => protobuf.Type) => (o: object) =>
      empty ? Buffer.alloc(0) : Buffer.from(type().encode(type().fromObject(o)).finish());
    // Only empty bytes skip protobufjs: anything else is decoded (and refused when malformed) as before.
    const deserialize = (empty: boolean, type: () => protobuf.Type) => (b: Buffer) =>
      empty && b.length === 0 ? {} : type().toObject(type().decode(b), TO_OBJECT);
    def[name] = {
      path: `/${fullName}/${name}`,
      requestStream: Boolean(m.requestStream),
      responseStream: Boolean(m.responseStream),
      requestSerialize: serialize(emptyRequest, () => codecs().req),
      requestDeserialize: deserialize(emptyRequest, () => codecs().req),
      responseSerialize: serialize(emptyResponse, () => codecs().res),
      responseDeserialize: deserialize(emptyResponse, () => codecs().res),
      originalName: name,
    };
  }
  return def as unknown as ServiceDefinition;
}

export interface Protocol {
  provider: ServiceDefinition;
  controller: ServiceDefinition;
  stdio: ServiceDefinition;
  health: ServiceDefinition;
}

export function loadProtocol(): Protocol {
  const text = readPackageText(DESCRIPTOR_FILE);
  const json = JSON.parse(text) as JsonNode;
  // Not Root.fromJSON: it resolves every type of the protocol up front (~25 ms of each of the
  // provider's several starts per command); a type resolves on its first use instead.
  let root: protobuf.Root | undefined;
  const types = () => {
    if (!root) {
      const lib = requireHere('protobufjs/light.js') as typeof protobuf;
      root = new lib.Root();
      root.addJSON((JSON.parse(text) as protobuf.INamespace).nested!);
    }
    return root;
  };
  return {
    provider: service(json, types, 'tfplugin6.Provider'),
    controller: service(json, types, 'plugin.GRPCController'),
    stdio: service(json, types, 'plugin.GRPCStdio'),
    health: service(json, types, 'grpc.health.v1.Health'),
  };
}
