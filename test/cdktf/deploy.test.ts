// `cdktn deploy` and `cdktf deploy` of a fresh app, as a user runs them (issue 27): the CLIs and
// CDK libraries from the npm registry at the versions docs/cdktf.md names, kms-sync installed from
// this checkout by path (a symbolic link, as `npm i ../kms-sync` makes), the provider installed
// with `kms-sync provider install`, the emulator as the service, no Terraform registry. The deploy
// needs `--skip-provider-lock` (documented there: `terraform providers lock` ignores the filesystem
// mirror and asks the public registry); then `kms-sync plan --cdktf .` agrees: no changes.
// The documented install command is also resolved (npm's lock-only install, with kms-sync packed as
// the registry would serve it, in a copy of the line's installed folder): no ERESOLVE. Skipped, loudly, without terraform or
// without the npm registry.
import { execFile, type ExecFileException } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { cliPath, RAW_KEY_PATTERN, repoRoot, workspace } from '../support/cli.js';
import { NO_TERRAFORM, terraformOrSkip } from '../provider/terraform-support.js';
import { skipTest, skipWhen } from '../support/skip.js';
import { assertBuilt, cdktfJson, type Flavour } from './helpers.js';
import { patient } from '../support/patience.js';

const TERRAFORM = terraformOrSkip();
const API_KEY = 'sk_test_cdktfdeployapp0123456789';
const FLAVOURS: Flavour[] = ['cdktn', 'cdktf'];
const KMS_SYNC_VERSION = (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string })
  .version;
const version = (pkg: string) =>
  (JSON.parse(readFileSync(path.join(repoRoot, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string })
    .version;
/** What docs/cdktf.md tells users to install (the CLI at the library's version; constructs 10.7 fits both lines). */
const INSTALL = (f: Flavour) => [`${f}@${version(f)}`, `${f}-cli@${version(f)}`, 'constructs@~10.7.2'];

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}
function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      cmd,
      args,
      { cwd, env, maxBuffer: 64 * 1024 * 1024, timeout: patient(240_000) },
      (e: ExecFileException | null, stdout, stderr) => {
        resolve({ code: e ? (typeof e.code === 'number' ? e.code : 1) : 0, stdout, stderr });
      },
    );
  });
}
const ok = (r: Run, what: string) => expect(r.code, `${what}:\n${r.stdout}\n${r.stderr}`).toBe(0);
const NETWORK = /ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ENETUNREACH|network request/;

const app = (f: Flavour) => `import { App, TerraformStack } from '${f}';
import { KmsProject, KmsProvider } from 'kms-sync/${f}';

const app = new App();
const stack = new TerraformStack(app, 'demo');
new KmsProvider(stack, 'kms', {});
const project = new KmsProject(stack, 'shop', { slug: 'shop-${f}', name: 'Shop (${f})' });
const production = project.addEnvironment('production', { url: 'https://api.shop.example' });
production.addTemplate('gold', { rateLimitDay: 1000, maxClients: 5 });
const globex = production.addClient('globex', { template: production.template('gold') });
globex.addKey('primary', { ttl: '30d' });
app.synth();
`;

let emu: RunningEmulator | undefined;
let root: string;
let env: NodeJS.ProcessEnv;
/** Why the tests cannot run here (no registry), once known. */
let skipped: string | undefined;
const tools = new Map<Flavour, string>();
const resolved = new Map<Flavour, string>();
const resolveRuns = new Map<Flavour, Run>();
const printed: string[] = [];

describe.skipIf(skipWhen(!TERRAFORM, `test/cdktf/deploy.test.ts: ${NO_TERRAFORM}`))(
  'a fresh CDKTF app deploys with cdktn/cdktf deploy, and kms-sync plan --cdktf agrees',
  () => {
    beforeAll(async () => {
      assertBuilt();
      root = workspace();
      const npmEnv = {
        ...process.env,
        NODE_DISABLE_COMPILE_CACHE: '1',
        npm_config_audit: 'false',
        npm_config_fund: 'false',
        npm_config_update_notifier: 'false',
      };
      // The CLIs and libraries, one folder per line; then the documented install with kms-sync packed
      // (resolved only), in a copy of that line's folder: npm resolves the same command there, with
      // the CLI's own tree already in the lock (from the same registry answers moments ago), so that
      // tree is not resolved a second time; kms-sync and its peers are resolved against it as in a
      // fresh folder. The machine's npm cache answers without a round trip per package to revalidate
      // what it holds (--prefer-offline, as the quick start's npm ci): the lines are pinned, and what
      // the cache lacks still comes from the registry.
      const packed = run(
        'npm',
        ['pack', '--ignore-scripts', '--json', '--pack-destination', root, repoRoot],
        root,
        npmEnv,
      );
      const lines = await Promise.all(
        FLAVOURS.map(async (f) => {
          const dir = path.join(root, `tools-${f}`);
          mkdirSync(dir);
          writeFileSync(path.join(dir, 'package.json'), '{"private":true}\n');
          tools.set(f, dir);
          const install = await run(
            'npm',
            ['install', '--prefer-offline', '--ignore-scripts', ...INSTALL(f)],
            dir,
            npmEnv,
          );
          const pack = await packed;
          if (install.code !== 0) return { install, resolution: install };
          ok(pack, 'npm pack');
          const tarball = path.join(root, (JSON.parse(pack.stdout) as { filename: string }[])[0]!.filename);
          const into = path.join(root, `resolve-${f}`);
          mkdirSync(into);
          for (const file of ['package.json', 'package-lock.json'])
            copyFileSync(path.join(dir, file), path.join(into, file));
          resolved.set(f, into);
          const resolution = await run(
            'npm',
            ['install', '--prefer-offline', '--package-lock-only', '--ignore-scripts', ...INSTALL(f), tarball],
            into,
            npmEnv,
          );
          return { install, resolution };
        }),
      );
      const installs = lines.map((l) => l.install);
      const resolutions = lines.map((l) => l.resolution);
      for (const [i, f] of FLAVOURS.entries()) resolveRuns.set(f, resolutions[i]!);
      const failed = installs.find((r) => r.code !== 0);
      if (failed && NETWORK.test(failed.stderr)) {
        skipped =
          'test/cdktf/deploy.test.ts: the npm registry cannot be reached (cdktn-cli / cdktf-cli are installed from it)';
        return;
      }
      for (const r of installs) ok(r, 'npm install');
      emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
      env = {
        PATH: process.env.PATH,
        HOME: root,
        TF_CLI_CONFIG_FILE: path.join(root, '.terraformrc'),
        CI: 'true',
        CHECKPOINT_DISABLE: '1',
        NODE_DISABLE_COMPILE_CACHE: '1',
        KMS_API_URL: emu.url,
        KMS_API_KEY: API_KEY,
        SOPS_AGE_KEY_FILE: path.join(root, 'age', 'keys.txt'),
        KMS_SYNC_ALLOW_LOCAL_STORE: '1',
      };
      // The provider, the documented way: into ~/.terraform.d/plugins and the CLI configuration.
      const install = await run(process.execPath, [cliPath, 'provider', 'install'], root, env);
      ok(install, 'kms-sync provider install');
      printed.push(install.stdout, install.stderr);
    }, patient(300_000));

    afterAll(async () => {
      await emu?.close();
      for (const o of printed) expect(o).not.toMatch(RAW_KEY_PATTERN);
    });

    it.for(FLAVOURS)(
      '%s deploy --auto-approve --skip-provider-lock, then kms-sync plan --cdktf . plans no change',
      { timeout: patient(240_000) },
      async (f, ctx) => {
        if (skipped) skipTest(ctx, skipped);
        const tool = tools.get(f)!;
        // A fresh app: its own CDK library and constructs (the registry's copies), kms-sync by path.
        const dir = path.join(root, `app-${f}`);
        mkdirSync(path.join(dir, 'node_modules'), { recursive: true });
        for (const pkg of [f, 'constructs'])
          symlinkSync(path.join(tool, 'node_modules', pkg), path.join(dir, 'node_modules', pkg), 'dir');
        symlinkSync(repoRoot, path.join(dir, 'node_modules', 'kms-sync'), 'dir');
        writeFileSync(path.join(dir, 'package.json'), '{"private":true,"type":"module"}\n');
        writeFileSync(path.join(dir, 'cdktf.json'), cdktfJson());
        writeFileSync(path.join(dir, 'main.ts'), app(f));

        const cliPackage = path.join(tool, 'node_modules', `${f}-cli`);
        const bin = (
          JSON.parse(readFileSync(path.join(cliPackage, 'package.json'), 'utf8')) as { bin: Record<string, string> }
        ).bin[f]!;
        const deploy = await run(
          process.execPath,
          [path.join(cliPackage, bin), 'deploy', '--auto-approve', '--skip-provider-lock'],
          dir,
          env,
        );
        printed.push(deploy.stdout, deploy.stderr);
        ok(deploy, `${f} deploy`);
        expect(deploy.stdout).toMatch(/Apply complete! Resources: 5 added, 0 changed, 0 destroyed/);
        const stackDir = path.join(dir, 'cdktf.out', 'stacks', 'demo');
        const synthesized = JSON.parse(readFileSync(path.join(stackDir, 'cdk.tf.json'), 'utf8'));
        expect(synthesized.terraform.required_providers.kms).toEqual({
          source: 'registry.terraform.io/kms-sync/kms',
          version: KMS_SYNC_VERSION,
        });
        // terraform init locked the installed package by hash, for this platform.
        expect(readFileSync(path.join(stackDir, '.terraform.lock.hcl'), 'utf8')).toMatch(
          /provider "registry\.terraform\.io\/kms-sync\/kms"[\s\S]*h1:/,
        );
        const project = (emu!.service.toJSON().projects as { slug: string }[]).map((p) => p.slug);
        expect(project).toContain(`shop-${f}`);

        const plan = await run(process.execPath, [cliPath, 'plan', '--cdktf', '.', '--detailed-exitcode'], dir, env);
        printed.push(plan.stdout, plan.stderr);
        expect(plan.code, plan.stdout + plan.stderr).toBe(0);
        expect(plan.stdout).toContain('No changes.');
        // The key went to the app's store, beside cdktf.json, not into the generated cdktf.out.
        expect(readdirSync(path.join(dir, '.kms-sync'))).toEqual(
          expect.arrayContaining([expect.stringMatching(/sops/)]),
        );
      },
    );

    it.for(FLAVOURS)('the documented install of the %s line with kms-sync resolves (no ERESOLVE)', async (f, ctx) => {
      if (skipped) skipTest(ctx, skipped);
      const dir = resolved.get(f)!;
      ok(resolveRuns.get(f)!, `npm install ${INSTALL(f).join(' ')} kms-sync`);
      const lock = JSON.parse(readFileSync(path.join(dir, 'package-lock.json'), 'utf8')) as {
        packages: Record<string, { version: string }>;
      };
      expect(lock.packages['node_modules/constructs']!.version).toMatch(/^10\.7\./);
      expect(lock.packages[`node_modules/${f}`]!.version).toBe(version(f));
    });
  },
);
