// scripts/third-party-notices.js: which packages a bundle's output holds, and the notices text
// every release file carries for them (test/provider/package.test.ts checks a real release zip).
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a build script in plain JavaScript, without types
import { bundledPackages, noticesText, packageDirOf } from '../../scripts/third-party-notices.js';
import { workspace } from '../support/cli.js';

const roots: string[] = [];
afterAll(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

function fakePackage(dir: string, pkg: object, files: Record<string, string>) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify(pkg));
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
}

describe('third-party notices of a bundle', () => {
  it("finds a module's package folder: the last node_modules on its path, scoped names whole", () => {
    expect(packageDirOf('/r/node_modules/yaml/dist/index.js')).toBe('/r/node_modules/yaml');
    expect(packageDirOf('/r/node_modules/@noble/curves/esm/ed25519.js')).toBe('/r/node_modules/@noble/curves');
    expect(packageDirOf('/r/node_modules/age-encryption/node_modules/@noble/hashes/sha2.js')).toBe(
      '/r/node_modules/age-encryption/node_modules/@noble/hashes',
    );
    expect(packageDirOf('\0/r/node_modules/undici/index.js?commonjs-proxy')).toBe('/r/node_modules/undici');
    expect(packageDirOf('/r/dist/provider/main.js')).toBeUndefined();
    expect(packageDirOf('\0not-bundled:@aws-sdk/client-secrets-manager')).toBeUndefined();
  });

  it('lists each package with code in the output once, with its license files; our modules and shaken-out packages not', () => {
    const r = workspace();
    roots.push(r);
    const nm = path.join(r, 'node_modules');
    fakePackage(
      path.join(nm, 'alpha'),
      { name: 'alpha', version: '1.0.0', license: 'MIT' },
      {
        LICENSE: 'Copyright alpha\n',
        'NOTICE.md': 'alpha notice\n',
        'README.md': 'not a license\n',
      },
    );
    // The same name and version nested twice is listed once; another version of it on its own line.
    fakePackage(
      path.join(nm, '@s', 'beta'),
      { name: '@s/beta', version: '2.0.0', license: 'ISC' },
      { 'LICENCE.txt': 'beta 2\n' },
    );
    fakePackage(
      path.join(nm, 'alpha', 'node_modules', '@s', 'beta'),
      { name: '@s/beta', version: '2.0.0', license: 'ISC' },
      {},
    );
    fakePackage(
      path.join(nm, 'gamma', 'node_modules', '@s', 'beta'),
      { name: '@s/beta', version: '1.5.0', licenses: [{ type: 'BSD-3-Clause' }] },
      {},
    );
    fakePackage(path.join(nm, 'shaken'), { name: 'shaken', version: '1.0.0', license: 'MIT' }, { LICENSE: 'x' });
    const output = [
      {
        type: 'chunk',
        modules: {
          [path.join(r, 'dist', 'main.js')]: { renderedLength: 10 },
          [path.join(nm, 'alpha', 'index.js')]: { renderedLength: 5 },
          // The copy without its license file comes first: the notices take the other's.
          [path.join(nm, 'alpha', 'node_modules', '@s', 'beta', 'a.js')]: { renderedLength: 5 },
          [path.join(nm, '@s', 'beta', 'a.js')]: { renderedLength: 5 },
          [path.join(nm, '@s', 'beta', 'b.js')]: { renderedLength: 5 },
          [path.join(nm, 'gamma', 'node_modules', '@s', 'beta', 'a.js')]: { renderedLength: 1 },
          [path.join(nm, 'shaken', 'index.js')]: { renderedLength: 0 },
        },
      },
      { type: 'asset', fileName: 'x.map' },
    ];
    const packages = bundledPackages(output);
    expect(
      packages.map((p: { name: string; version: string; license: string }) => `${p.name} ${p.version} ${p.license}`),
    ).toEqual(['@s/beta 1.5.0 BSD-3-Clause', '@s/beta 2.0.0 ISC', 'alpha 1.0.0 MIT']);
    const text = noticesText({
      product: 'thing 1.0.0',
      nodeVersion: '22.0.0',
      nodeLicense: 'Node.js is licensed for use as follows:\n',
      packages,
    });
    expect(text).toContain('thing 1.0.0 includes the third-party software below.');
    expect(text).toContain('- Node.js 22.0.0: the runtime');
    expect(text).toContain('Node.js is licensed for use as follows:');
    expect(text).toContain(
      'alpha 1.0.0: LICENSE\n==============================================================================\n\nCopyright alpha\n',
    );
    expect(text).toContain('alpha 1.0.0: NOTICE.md');
    expect(text).toContain('alpha notice');
    expect(text).not.toContain('not a license');
    expect(text).toContain('beta 2\n');
    // A package that ships no license file is still named, with its package.json's license.
    expect(text).toContain(
      '@s/beta 1.5.0\n==============================================================================\n\nLicense: BSD-3-Clause. The package ships no license file.',
    );
    expect(text).not.toContain('shaken');
  });
});
