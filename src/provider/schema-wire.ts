// The GetProviderSchema and GetMetadata answers as protobuf bytes, encoded once by `npm run build`
// (scripts/build-provider-wire.js) into dist/provider/schema-wire.json. Terraform's first provider
// start of every command asks only for the schema; answered from these bytes, that start loads
// neither the provider implementation (provider.ts and the modules under it) nor protobufjs's codecs
// for the ~23 KB schema message (~40 ms of a ~0.27 CPU-s start). The bytes are used only while the
// schema and protocol files they were encoded from are unchanged (their digest is recorded beside
// them); otherwise the provider encodes its answers as before.
import { createHash } from 'node:crypto';
import { packageFile, readPackageText } from '../model/package-files.js';

/** Where the build writes the encoded answers (a package file: the packaged executable embeds it). */
export const SCHEMA_WIRE_PATH = ['dist', 'provider', 'schema-wire.json'] as const;
/** The answers kept encoded: they depend on the schema file alone, never on the configuration. */
export const ENCODED_METHODS = ['GetProviderSchema', 'GetMetadata'] as const;
/** The files the answers are encoded from: the provider's schema and the protocol's descriptor. */
const SOURCES = [
  ['schemas', 'terraform-provider-kms.json'],
  ['schemas', 'plugin-protocol', 'descriptor.json'],
] as const;

/** Digest of the files the answers are encoded from, as they are now. */
export function wireSourcesDigest(): string {
  const h = createHash('sha256');
  for (const f of SOURCES) h.update(readPackageText(packageFile(...f))).update('\0');
  return h.digest('hex');
}

interface WireFile {
  sources: string;
  answers: Record<string, string>;
}

/** The file's text for these encoded answers (method → response bytes). */
export function wireFileText(answers: Record<string, Buffer>): string {
  const file: WireFile = {
    sources: wireSourcesDigest(),
    answers: Object.fromEntries(Object.entries(answers).map(([m, b]) => [m, b.toString('base64')])),
  };
  return `${JSON.stringify(file, null, 1)}\n`;
}

/** The file's text, the answers encoded by the provider itself (the build runs this on dist/). */
export async function encodeSchemaWire(): Promise<string> {
  const [{ loadProtocol }, { createProvider }] = await Promise.all([
    import('./plugin/protocol.js'),
    import('./provider.js'),
  ]);
  const service = loadProtocol().provider;
  const provider = createProvider({ env: {} });
  const answers: Record<string, Buffer> = {};
  for (const m of ENCODED_METHODS) answers[m] = service[m]!.responseSerialize(await provider[m]!({}));
  return wireFileText(answers);
}

/**
 * The encoded answers (method → response bytes), or undefined when there are none or they were
 * encoded from other schema or protocol files than today's (the provider then encodes its own).
 */
export function readSchemaWire(): Partial<Record<string, Buffer>> | undefined {
  try {
    return parseSchemaWire(readPackageText(packageFile(...SCHEMA_WIRE_PATH)), wireSourcesDigest());
  } catch {
    return undefined; // not built (running from src/), or unreadable: encode as before
  }
}

/** The answers of a wire file's text, or undefined unless it was encoded from sources of digest `sources`. */
export function parseSchemaWire(text: string, sources: string): Partial<Record<string, Buffer>> | undefined {
  const file = JSON.parse(text) as Partial<WireFile> | null;
  if (typeof file?.sources !== 'string' || file.sources !== sources || !file.answers) return undefined;
  const answers = file.answers;
  return Object.fromEntries(
    ENCODED_METHODS.filter((m) => typeof answers[m] === 'string').map((m) => [m, Buffer.from(answers[m]!, 'base64')]),
  );
}
