// The gRPC service definitions of the plugin protocol, built from a JSON descriptor precompiled
// from the .proto files in schemas/plugin-protocol/ (test/provider/protocol.test.ts keeps the two
// in step and rewrites the JSON). protobufjs/light reads it without the .proto parser: this runs
// on every provider start, before the handshake.
import type { ServiceDefinition } from '@grpc/grpc-js';
import path from 'node:path';
import protobuf from 'protobufjs/light.js';
import { packageFile, readPackageText } from '../../model/package-files.js';

export const PROTOCOL_DIR = packageFile('schemas', 'plugin-protocol') + path.sep;
export const PROTOCOL_FILES = ['tfplugin6.proto', 'go-plugin.proto', 'health.proto'];
export const DESCRIPTOR_FILE = `${PROTOCOL_DIR}descriptor.json`;

/** How messages look in JS: field names as in the proto, int64 as number, enums by name, bytes as Buffer. */
const TO_OBJECT: protobuf.IConversionOptions = {
  longs: Number,
  enums: String,
  bytes: Buffer,
  defaults: true,
  oneofs: true,
};

function service(root: protobuf.Root, fullName: string): ServiceDefinition {
  const svc = root.lookupService(fullName);
  const def: Record<string, unknown> = {};
  for (const m of svc.methodsArray) {
    m.resolve();
    const req = m.resolvedRequestType!;
    const res = m.resolvedResponseType!;
    const serialize = (t: protobuf.Type) => (o: object) => Buffer.from(t.encode(t.fromObject(o)).finish());
    const deserialize = (t: protobuf.Type) => (b: Buffer) => t.toObject(t.decode(b), TO_OBJECT);
    def[m.name] = {
      path: `/${fullName}/${m.name}`,
      requestStream: Boolean(m.requestStream),
      responseStream: Boolean(m.responseStream),
      requestSerialize: serialize(req),
      requestDeserialize: deserialize(req),
      responseSerialize: serialize(res),
      responseDeserialize: deserialize(res),
      originalName: m.name,
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
  // Not Root.fromJSON: it resolves every type of the protocol up front (~25 ms of each of the
  // provider's several starts per command); a type resolves on its first use instead.
  const root = new protobuf.Root();
  root.addJSON((JSON.parse(readPackageText(DESCRIPTOR_FILE)) as protobuf.INamespace).nested!);
  return {
    provider: service(root, 'tfplugin6.Provider'),
    controller: service(root, 'plugin.GRPCController'),
    stdio: service(root, 'plugin.GRPCStdio'),
    health: service(root, 'grpc.health.v1.Health'),
  };
}
