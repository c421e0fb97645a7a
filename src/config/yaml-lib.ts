// The `yaml` package, loaded on first use: the fast path (fast-yaml.ts) and JSON need none of it,
// and importing it costs ~0.1 s of start-up. Loaded synchronously (Node's require of its CommonJS
// build, the same module an ESM import gives) because the loader's in-memory API is synchronous.
import { createRequire } from 'node:module';

type YamlLib = typeof import('yaml');
let lib: YamlLib | undefined;

export function yamlLib(): YamlLib {
  lib ??= createRequire(import.meta.url)('yaml') as YamlLib;
  return lib;
}
