// Part of `npm run build`: the flavours' CDK loaders (src/cdktf/flavours/<flavour>/cdk.cjs and its
// types, cdk.d.cts, both generated) are plain CommonJS that tsc does not emit; copy them to dist.
import { copyFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const flavours = path.join(root, 'src', 'cdktf', 'flavours');
for (const flavour of readdirSync(flavours)) {
  for (const file of ['cdk.cjs', 'cdk.d.cts']) {
    copyFileSync(path.join(flavours, flavour, file), path.join(root, 'dist', 'cdktf', 'flavours', flavour, file));
  }
}
