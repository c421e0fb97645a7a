// `npm pack` (prepack / postpack): the package carries npm-shrinkwrap.json, a copy of
// package-lock.json, so `npm i -g kms-sync-<version>.tgz` installs exactly the dependency tree this
// repository tested (a lock file is never published; a shrinkwrap is, and npm honours it for a
// package installed as a dependency or globally). The copy lives only while npm packs: in the
// checkout, package-lock.json stays the one lock file (npm would prefer a shrinkwrap beside it).
import { copyFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const shrinkwrap = path.join(root, 'npm-shrinkwrap.json');
if (process.argv[2] === 'remove') rmSync(shrinkwrap, { force: true });
else copyFileSync(path.join(root, 'package-lock.json'), shrinkwrap);
