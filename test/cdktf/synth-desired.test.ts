// Synth → desired state: a real CDKTF app (run by kms-sync the way `cdktf synth` would) with every
// resource kind and every attribute, references, variables, locals, functions and a data source,
// mixed with a YAML file; the result is exactly the DesiredState the YAML front end builds.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadCdktf } from '../../src/cdktf/index.js';
import { ConfigError, loadDesiredState } from '../../src/config/index.js';
import type { DesiredState } from '../../src/model/index.js';
import { workspace } from '../support/cli.js';
import { cdktfJson, cdktfProject } from './helpers.js';
import { patient } from '../support/patience.js';

const strip = <T>(v: T): T => JSON.parse(JSON.stringify(v, (k, x) => (k === 'source' ? undefined : x))) as T;

const everyAttribute = `
import { App, Fn, TerraformLocal, TerraformStack, TerraformVariable } from 'cdktf';
import { DataKmsEnvironment, Endpoint, Environment, Key, KmsClient, KmsProvider, Project, Template } from 'kms-sync/cdktf';

const app = new App();
const s = new TerraformStack(app, 'main');
new KmsProvider(s, 'kms', {
  baseDir: 'state',
  owner: 'platform-team',
  secretStore: [
    { name: 'vault', uri: 'file:./vault-secrets', default: true },
    { name: 'team', uri: 'file:./team-secrets', options: { recipients: ['age1example'] } },
  ],
});
const region = new TerraformVariable(s, 'region', { type: 'string' });
const limit = new TerraformVariable(s, 'limit', { type: 'number' });
const rotate = new TerraformVariable(s, 'rotate', { type: 'bool', default: true });
const team = new TerraformLocal(s, 'team', 'payments');
const p = new Project(s, 'proj', { slug: 'acme', name: 'Acme Corp', description: 'Public API', protected: true });
const env = new Environment(s, 'prod', { project: p.slug, type: 'production', url: 'https://api.acme.example', protected: false });
const gold = new Template(s, 'gold', { projectEnv: env.projectEnv, name: 'gold', rateLimitDay: limit.numberValue, maxClients: 50, protected: true });
const c = new KmsClient(s, 'globex', {
  environment: env, name: Fn.lower('GLOBEX'), template: gold.id, type: 'company',
  ipWhitelist: ['10.0.0.1', '192.168.0.0/16', '2001:db8::/32'],
  metadata: { team: team.asString, region: region.stringValue, trial: true, nested: { list: [1, 2] } },
  protected: true,
});
new Key(s, 'primary', {
  projectEnv: c.projectEnv, client: c.id, name: 'primary', ttl: '90d', autoRotate: rotate.booleanValue,
  rotationWindow: '14d', rotationOverlap: '0s', secretStore: 'team', secretName: Fn.join('/', ['acme', c.name, 'primary']), protected: true,
});
new Key(s, 'fallback', { projectEnv: 'acme-production', client: 'acme-production/globex', name: 'fallback', expiresAt: '2027-01-01' });
new Endpoint(s, 'pay', {
  projectEnv: env.projectEnv, method: 'post', path: '/v1/payments', name: 'Create payment', description: 'Charges',
  request: { type: 'object', required: ['amount'] }, response: { type: 'object' }, metadata: { team: 'payments' }, protected: true,
});
const beta = new DataKmsEnvironment(s, 'beta', { projectEnv: 'beta-dev' });
new KmsClient(s, 'from-yaml-env', { environment: beta.projectEnv, name: 'cdk-client', template: 'basic', keys: { k: {} } });
app.synth();
`;

const yaml = `apiVersion: kms-sync/v1
projects:
  - slug: beta
    name: Beta
    environments:
      - type: dev
        url: https://beta.example
        templates: [{ name: basic, rateLimitDay: 10 }]
`;

describe('CDKTF synth → desired state', () => {
  it(
    'maps every kind and attribute like YAML, resolving references, variables, locals and functions',
    async () => {
      const dir = cdktfProject({
        'main.ts': everyAttribute,
        'cdktf.json': cdktfJson(),
        'terraform.tfvars': 'limit = 100000 # from tfvars\n',
      });
      const yamlDir = workspace({ 'beta.yaml': yaml });
      const cdktf = await loadCdktf({
        dir,
        env: { ...process.env, TF_VAR_region: 'eu-west', TF_VAR_limit: '1' },
        cwd: dir,
      });
      expect(cdktf.diagnostics).toEqual([]);
      expect(cdktf.files).toEqual(['stack "main"']);
      expect(cdktf.baseDir).toBe(path.join(dir, 'state'));
      const { state, files } = await loadDesiredState([path.join(yamlDir, 'beta.yaml')], {
        cwd: yamlDir,
        documents: cdktf.documents,
        diagnostics: cdktf.diagnostics,
      });
      expect(files).toEqual(['beta.yaml', 'stack "main"']);
      const expected: DesiredState = {
        projects: [
          { slug: 'acme', name: 'Acme Corp', description: 'Public API', protected: true },
          { slug: 'beta', name: 'Beta' },
        ],
        envs: [
          { project: 'acme', type: 'production', projectEnv: 'acme-production', url: 'https://api.acme.example' },
          { project: 'beta', type: 'dev', projectEnv: 'beta-dev', url: 'https://beta.example' },
        ],
        templates: [
          { projectEnv: 'acme-production', name: 'gold', rateLimitDay: 100000, maxClients: 50, protected: true },
          { projectEnv: 'beta-dev', name: 'basic', rateLimitDay: 10 },
        ],
        clients: [
          {
            projectEnv: 'acme-production',
            name: 'globex',
            template: 'gold',
            type: 'company',
            ipWhitelist: ['10.0.0.1/32', '192.168.0.0/16', '2001:db8::/32'],
            metadata: { nested: { list: [1, 2] }, region: 'eu-west', team: 'payments', trial: true },
            protected: true,
            keys: [
              {
                projectEnv: 'acme-production',
                client: 'globex',
                name: 'fallback',
                expiresAt: '2027-01-01T00:00:00.000Z',
              },
              {
                projectEnv: 'acme-production',
                client: 'globex',
                name: 'primary',
                ttl: '90d',
                autoRotate: true,
                rotation: { window: '14d', overlap: '0s' },
                secret: { store: 'team', name: 'acme/globex/primary' },
                protected: true,
              },
            ],
          },
          {
            projectEnv: 'beta-dev',
            name: 'cdk-client',
            template: 'basic',
            keys: [{ projectEnv: 'beta-dev', client: 'cdk-client', name: 'k' }],
          },
        ],
        endpoints: [
          {
            projectEnv: 'acme-production',
            method: 'POST',
            path: '/v1/payments',
            name: 'Create payment',
            description: 'Charges',
            request: { required: ['amount'], type: 'object' },
            response: { type: 'object' },
            metadata: { team: 'payments' },
            protected: true,
          },
        ],
        stores: [
          { name: 'team', uri: 'file:./team-secrets', options: { recipients: ['age1example'] } },
          { name: 'vault', uri: 'file:./vault-secrets', default: true },
        ],
        owner: 'platform-team',
      };
      expect(strip(state)).toEqual(expected);
      // Sources name the construct path (for duplicate and collision messages).
      expect(state.clients[0]!.keys[1]!.source).toMatchObject({ file: 'stack "main"', path: 'main/primary' });
    },
    patient(60_000),
  );

  it(
    'the example stack describes exactly what examples/acme describes',
    async () => {
      const repo = path.resolve(__dirname, '..', '..');
      const cdktf = await loadCdktf({ dir: path.join(repo, 'examples', 'cdktf'), cwd: repo });
      expect(cdktf.diagnostics).toEqual([]);
      const fromCdktf = await loadDesiredState([], { cwd: repo, documents: cdktf.documents });
      const fromYaml = await loadDesiredState([path.join(repo, 'examples', 'acme')], { cwd: repo });
      expect(strip(fromCdktf.state)).toEqual(strip(fromYaml.state));
      expect(fromYaml.state.clients.length).toBeGreaterThan(5);
    },
    patient(60_000),
  );

  it(
    'reads an existing synth output (--cdktf-out), giving file:line:column of problems',
    async () => {
      const dir = cdktfProject({
        'main.ts': everyAttribute.replace("'10.0.0.1'", "'10.0.0.300'"),
        'cdktf.json': cdktfJson(),
      });
      const { execFileSync } = await import('node:child_process');
      execFileSync(process.execPath, ['main.ts'], {
        cwd: dir,
        env: { ...process.env, CDKTF_OUTDIR: path.join(dir, 'cdktf.out'), TF_VAR_region: 'x', TF_VAR_limit: '5' },
      });
      const cdktf = await loadCdktf({
        outDir: path.join(dir, 'cdktf.out'),
        cwd: dir,
        env: { TF_VAR_region: 'x', TF_VAR_limit: '5' },
      });
      const err = await loadDesiredState([], {
        cwd: dir,
        documents: cdktf.documents,
        diagnostics: cdktf.diagnostics,
      }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConfigError);
      const [d] = (err as ConfigError).diagnostics.filter((x) => x.path.includes('ip_whitelist'));
      expect(d).toMatchObject({
        file: path.join('cdktf.out', 'stacks', 'main', 'cdk.tf.json'),
        path: 'main/globex.ip_whitelist[0]',
      });
      const text = readFileSync(path.join(dir, 'cdktf.out', 'stacks', 'main', 'cdk.tf.json'), 'utf8').split('\n');
      expect(text[d!.line - 1]).toContain('10.0.0.300');
    },
    patient(60_000),
  );
});
