// The generated bindings: reproducible from the schema, and usable from a user-style stack for both
// CDK lines (compiled by plain tsc, synthesized by plain node).
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { checkedInFlavour, FLAVOURS, renderFlavour } from '../../scripts/generate-cdktf-bindings.js';
import { repoRoot, workspace, writeFiles } from '../support/cli.js';
import { cdktfProject, type Flavour } from './helpers.js';
import { patient } from '../support/patience.js';

const run = promisify(execFile);
const packageJson = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string };
const tsc = path.join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc');

const userStack = (flavour: Flavour) => `
import { App, TerraformStack, TerraformVariable } from '${flavour}';
import type { Construct } from 'constructs';
import { KmsProvider, KmsProject, KmsClient, Key, DataKmsEnvironment, type KmsEnvironment } from 'kms-sync/${flavour}';

class Team extends ${'TerraformStack'} {}
function payments(scope: Construct, production: KmsEnvironment): KmsClient {
  const globex = production.addClient('globex', { template: 'gold', ipWhitelist: ['10.0.0.0/8'], metadata: { team: 'payments', trial: true } }, scope);
  const k: Key = globex.addKey('primary', { ttl: '90d', autoRotate: true, secretStore: 'vault' });
  // importFrom makes synth run \`terraform version\` (a cdktf validation): type-checked, not run here.
  if (process.env.KMS_SYNC_IMPORT) k.importFrom('acme-production/globex/primary');
  return globex;
}
const app = new App();
const stack = new TerraformStack(app, 'acme');
new KmsProvider(stack, 'kms', { owner: 'platform', secretStore: [{ name: 'vault', uri: 'file:./secrets', default: true }] });
const url = new TerraformVariable(stack, 'url', { type: 'string', default: 'https://api.acme.example' });
const acme = new KmsProject(stack, 'acme', { slug: 'acme', name: 'Acme Corp' });
const production = acme.addEnvironment('production', { url: url.stringValue, lifecycle: { preventDestroy: true } });
const gold = production.addTemplate('gold', { rateLimitDay: 100000, maxClients: 50 });
const globex = payments(stack, production);
globex.node.addDependency(gold);
const id: string = globex.id;
const staging = new DataKmsEnvironment(stack, 'staging', { projectEnv: 'acme-staging' });
new KmsClient(stack, 'sandbox', { environment: staging.projectEnv, template: 'sandbox', name: 'sandbox-' + id.length, dependsOn: [globex] });
void Team;
app.synth();
`;

const tsconfig = JSON.stringify({
  compilerOptions: {
    target: 'es2023',
    module: 'nodenext',
    moduleResolution: 'nodenext',
    strict: true,
    noEmit: true,
    skipLibCheck: false,
    types: ['node'],
  },
  include: ['*.ts'],
});

describe('binding generation', () => {
  it.each(FLAVOURS)(
    'checked-in %s bindings are exactly what the generator makes from the schema',
    async (flavour) => {
      const fresh = await renderFlavour(flavour);
      const checkedIn = await checkedInFlavour(flavour);
      expect([...checkedIn.keys()].sort(), 'same files (run npm run generate)').toEqual([...fresh.keys()].sort());
      for (const [rel, text] of fresh)
        expect(checkedIn.get(rel), `${flavour}/${rel} differs from a fresh generation: run npm run generate`).toBe(
          text,
        );
      // The two lines differ only in the CDK package the code loads.
      expect(fresh.get('cdk.cjs')).toContain(`require(resolve('${flavour}'))`);
      expect(fresh.get('cdk.d.cts')).toContain(`require('${flavour}')`);
    },
    patient(60_000),
  );
});

describe.each(FLAVOURS)('user-style stack with kms-sync/%s', (flavour) => {
  it(
    'type-checks with plain tsc, and a wrong attribute type does not',
    async () => {
      const dir = cdktfProject({
        'main.ts': userStack(flavour),
        'tsconfig.json': tsconfig,
      });
      const ok = await run(process.execPath, [tsc, '-p', dir], { cwd: dir }).then(
        () => ({ code: 0, out: '' }),
        (e: { code: number; stdout: string }) => ({ code: e.code, out: e.stdout }),
      );
      expect(ok.out).toBe('');
      expect(ok.code).toBe(0);

      const bad = cdktfProject({
        'main.ts':
          `import { App, TerraformStack } from '${flavour}';\nimport { Template } from 'kms-sync/${flavour}';\n` +
          `const s = new TerraformStack(new App(), 's');\nnew Template(s, 't', { projectEnv: 'acme-production', name: 'gold', rateLimitDay: 'lots' });\n`,
        'tsconfig.json': tsconfig.replace('"skipLibCheck":false', '"skipLibCheck":true'),
      });
      const failed = await run(process.execPath, [tsc, '-p', bad], { cwd: bad }).then(
        () => ({ code: 0, out: '' }),
        (e: { code: number; stdout: string }) => ({ code: e.code, out: e.stdout }),
      );
      expect(failed.code).not.toBe(0);
      expect(failed.out).toMatch(/main\.ts\(4,\d+\): error TS2322: .*string.*number/);
    },
    patient(60_000),
  );

  it(
    'synthesizes with plain node into cdk.tf.json',
    async () => {
      const dir = cdktfProject({ 'main.ts': userStack(flavour) });
      await run(process.execPath, ['main.ts'], {
        cwd: dir,
        env: { ...process.env, CDKTF_OUTDIR: path.join(dir, 'out') },
      });
      const manifest = JSON.parse(readFileSync(path.join(dir, 'out', 'manifest.json'), 'utf8'));
      const stack = JSON.parse(readFileSync(path.join(dir, 'out', manifest.stacks.acme.synthesizedStackPath), 'utf8'));
      // deploy validates required_providers: a version is required, and it is this package's.
      expect(stack.terraform.required_providers.kms).toEqual({
        source: 'registry.terraform.io/kms-sync/kms',
        version: packageJson.version,
      });
      expect(stack.provider.kms[0].secret_store[0]).toEqual({ name: 'vault', uri: 'file:./secrets', default: true });
      const [clientId, client] = Object.entries(stack.resource.kms_client).find(
        ([, c]) => (c as { name: string }).name === 'globex',
      )!;
      expect(client).toMatchObject({
        ip_whitelist: ['10.0.0.0/8'],
        metadata: { team: 'payments', trial: true },
        template: 'gold',
      });
      expect((client as { '//': { metadata: { path: string } } })['//'].metadata.path).toBe('acme/production-globex'); // added from another scope
      const key = Object.values(stack.resource.kms_key)[0] as Record<string, unknown>;
      expect(key).toMatchObject({
        client: `\${kms_client.${clientId}.name}`,
        ttl: '90d',
        auto_rotate: true,
        secret_store: 'vault',
      });
      expect(Object.values(stack.resource.kms_environment)[0]).toMatchObject({
        lifecycle: { prevent_destroy: true },
        url: '${var.url}',
      });
    },
    patient(60_000),
  );
});

describe.each(FLAVOURS)('kms-sync/%s installed from a folder (npm i ../kms-sync: a symbolic link)', (flavour) => {
  it(
    "extends the app's own copy of the CDK library, not the one in the checkout's node_modules",
    async () => {
      // The app has its own copy of the library (a real folder, as npm installs it); kms-sync is
      // the link npm makes for a path install, to this checkout, whose node_modules has another.
      const dir = workspace();
      const nm = path.join(dir, 'node_modules');
      mkdirSync(nm);
      cpSync(path.join(repoRoot, 'node_modules', flavour), path.join(nm, flavour), { recursive: true });
      symlinkSync(path.join(repoRoot, 'node_modules', 'constructs'), path.join(nm, 'constructs'), 'dir');
      symlinkSync(repoRoot, path.join(nm, 'kms-sync'), 'dir');
      writeFiles(dir, {
        'package.json': JSON.stringify({ type: 'module', private: true }) + '\n',
        'main.ts':
          `import { App, TerraformStack, TerraformProvider, TerraformResource } from '${flavour}';\n` +
          `import { KmsProvider, KmsProject } from 'kms-sync/${flavour}';\n` +
          `const app = new App();\nconst stack = new TerraformStack(app, 'acme');\n` +
          `const provider = new KmsProvider(stack, 'kms', {});\nconst project = new KmsProject(stack, 'acme', { slug: 'acme', name: 'Acme' });\n` +
          `console.log(JSON.stringify({ provider: provider instanceof TerraformProvider, project: project instanceof TerraformResource }));\napp.synth();\n`,
      });
      const { stdout } = await run(process.execPath, ['main.ts'], {
        cwd: dir,
        env: { ...process.env, CDKTF_OUTDIR: path.join(dir, 'out') },
      });
      expect(JSON.parse(stdout)).toEqual({ provider: true, project: true });
      const stack = JSON.parse(readFileSync(path.join(dir, 'out', 'stacks', 'acme', 'cdk.tf.json'), 'utf8'));
      expect(stack.terraform.required_providers.kms.version).toBe(packageJson.version);
      expect(Object.keys(stack.resource.kms_project)).toHaveLength(1);
    },
    patient(60_000),
  );
});
