// The notices a release file must carry for the code of others in it. The provider's executables
// and the single-file kms-sync are Node.js with a bundle of npm packages inside, minified (no
// comment survives): MIT, ISC and BSD licenses ask that their copyright notice and license text go
// with every copy, binaries included, and Apache-2.0 that a NOTICE file does. So each release zip
// holds kms-sync's LICENSE and THIRD_PARTY_NOTICES.txt (release.NOTICES_NAME) beside the executable,
// and the single-file kms-sync executables have kms-sync_<version>_THIRD_PARTY_NOTICES.txt beside them.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** A package's own license and notice files: LICENSE, LICENCE, COPYING, NOTICE (any case, any extension). */
const LICENSE_FILE = /^(licen[cs]e|copying|notice)([.\-_].*)?$/i;
const RULE = '='.repeat(78);

/** The folder of the npm package a bundled module came from (the last node_modules/ on its path), or undefined for our own. */
export function packageDirOf(moduleId) {
  const file = moduleId.replace(/^\0+/, '').split('?')[0];
  const parts = file.split(/[\\/]/);
  const at = parts.lastIndexOf('node_modules');
  if (at < 0 || at + 1 >= parts.length) return undefined;
  const depth = parts[at + 1].startsWith('@') ? 2 : 1;
  if (at + depth >= parts.length) return undefined;
  return parts.slice(0, at + 1 + depth).join('/');
}

/**
 * The packages whose code a rolldown build put in its output: each chunk's modules that rendered
 * any code, grouped by package folder, once per name and version (a package nested twice at one
 * version is listed once, with the license files of the copy that has them). Sorted by name, then version.
 */
export function bundledPackages(output) {
  const dirs = new Set();
  for (const chunk of output) {
    if (chunk.type !== 'chunk') continue;
    for (const [id, m] of Object.entries(chunk.modules)) {
      if (m.renderedLength === 0) continue;
      const dir = packageDirOf(id);
      if (dir) dirs.add(dir);
    }
  }
  const byKey = new Map();
  for (const dir of dirs) {
    const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'));
    const key = `${pkg.name}@${pkg.version}`;
    const files = readdirSync(dir)
      .filter((f) => LICENSE_FILE.test(f))
      .sort()
      .map((f) => ({ name: f, text: readFileSync(path.join(dir, f), 'utf8') }));
    // Of two copies of one version, the one that ships its license files.
    if ((byKey.get(key)?.files.length ?? -1) >= files.length) continue;
    byKey.set(key, { name: pkg.name, version: pkg.version, license: licenseOf(pkg), files });
  }
  return [...byKey.values()].sort((a, b) => (a.name === b.name ? cmp(a.version, b.version) : cmp(a.name, b.name)));
}

const cmp = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
/** The SPDX expression of package.json (also the old `licenses: [{type}]` form). */
function licenseOf(pkg) {
  if (typeof pkg.license === 'string') return pkg.license;
  if (pkg.license?.type) return pkg.license.type;
  if (Array.isArray(pkg.licenses)) return pkg.licenses.map((l) => l.type ?? l).join(' OR ');
  return 'not stated in its package.json';
}

/**
 * THIRD_PARTY_NOTICES.txt: what is inside `product`, a list first, then each license in full:
 * Node.js's own LICENSE (which holds the licenses of what Node.js bundles), then every package's
 * license and notice files as the package ships them. A package that ships none is listed with
 * the license its package.json names, and says so.
 */
export function noticesText({ product, nodeVersion, nodeLicense, packages }) {
  const lines = [
    `${product} includes the third-party software below. Their licenses follow, each in full.`,
    '',
    `- Node.js ${nodeVersion}: the runtime the executable is made of (MIT, and the licenses its LICENSE lists)`,
    ...packages.map((p) => `- ${p.name} ${p.version} (${p.license})`),
    '',
  ];
  const section = (title, body) => lines.push(RULE, title, RULE, '', body.trimEnd(), '');
  section(`Node.js ${nodeVersion}: LICENSE`, nodeLicense);
  for (const p of packages) {
    if (p.files.length === 0)
      section(`${p.name} ${p.version}`, `License: ${p.license}. The package ships no license file.`);
    for (const f of p.files) section(`${p.name} ${p.version}: ${f.name}`, f.text);
  }
  return `${lines.join('\n')}\n`;
}
