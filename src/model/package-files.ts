// Files the package ships beside its code (schemas/, examples/), found from the package root. One
// call works from every place the code runs: src/ (tests), tsc's dist/<layer>/ and the bundled CLI
// in dist/bin/, whose chunks hold modules that sat at other depths.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

let root: string | undefined;

/** The package's root folder: the nearest folder above this module that holds a package.json. */
export function packageRoot(): string {
  if (root !== undefined) return root;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'package.json'))) {
    const up = path.dirname(dir);
    if (up === dir) throw new Error(`kms-sync: no package.json in any folder above ${dir}`);
    dir = up;
  }
  root = dir;
  return root;
}

/** Absolute path of a file or folder of the package, e.g. packageFile('schemas', 'kms-sync.schema.json'). */
export const packageFile = (...segments: string[]): string => path.join(packageRoot(), ...segments);
