// Files the package ships beside its code (schemas/, examples/), found from the package root. One
// call works from every place the code runs: src/ (tests), tsc's dist/<layer>/ and the bundled CLI
// in dist/bin/, whose chunks hold modules that sat at other depths.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

let root: string | undefined;

/**
 * Files embedded in a packaged executable (scripts/package-provider.js), which has no package
 * folder: its entry sets this before anything else loads. Paths relative to the package root.
 */
export const EMBEDDED_FILES = Symbol.for('kms-sync.embedded-files');
interface Embedded {
  root: string;
  files: Record<string, string>;
}
const embedded = () => (globalThis as { [EMBEDDED_FILES]?: Embedded })[EMBEDDED_FILES];

/** The package's root folder: the nearest folder above this module that holds a package.json. */
export function packageRoot(): string {
  if (root !== undefined) return root;
  const e = embedded();
  if (e) return (root = e.root);
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

/** The text of a package file (from the executable itself when it is a packaged one). */
export function readPackageText(file: string): string {
  const e = embedded();
  const text =
    e && file.startsWith(e.root) ? e.files[path.relative(e.root, file).split(path.sep).join('/')] : undefined;
  return text ?? readFileSync(file, 'utf8');
}
