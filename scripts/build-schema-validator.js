// Part of `npm run build`: compiles schemas/kms-sync.schema.json into the configuration validator
// (ajv standalone code) at dist/config/schema-validator.generated.cjs, so a run of kms-sync does not
// load ajv's compiler or compile the schema (src/config/schema.ts falls back to doing both when the
// file is missing or was made from another schema).
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { GENERATED_VALIDATOR, standaloneValidatorSource } from '../dist/config/schema.js';

const out = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'config', GENERATED_VALIDATOR);
writeFileSync(out, standaloneValidatorSource());
