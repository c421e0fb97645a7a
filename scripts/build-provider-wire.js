// Part of `npm run build`: encodes the provider's GetProviderSchema and GetMetadata answers into
// dist/provider/schema-wire.json, so that Terraform's first provider start of each command (which
// asks only for the schema) loads neither the provider implementation nor the schema's protobuf
// codecs (src/provider/schema-wire.ts; the provider encodes them itself when the file is missing or
// was made from other schema or protocol files).
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { encodeSchemaWire, SCHEMA_WIRE_PATH } from '../dist/provider/schema-wire.js';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
writeFileSync(path.join(root, ...SCHEMA_WIRE_PATH), await encodeSchemaWire());
