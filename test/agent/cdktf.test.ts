// kms-sync agent --cdktf as a real process: the configuration is a CDKTF app in the repository
// (its dependencies linked into it, as an installed node_modules would be); the agent runs the app
// of each new commit, as `plan --cdktf DIR` does, and applies what it describes.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { printedSecrets, repoRoot } from '../crash/lib.js';
import { fixture, startAgent, until, type Fixture } from './lib.js';
import { patient } from '../support/patience.js';

const stack = (clients: string[]) => `
import { App, TerraformStack } from 'cdktf';
import { KmsProvider, KmsProject } from 'kms-sync/cdktf';
const app = new App();
const stack = new TerraformStack(app, 'agent');
new KmsProvider(stack, 'kms', { owner: 'agent-cdktf' });
const project = new KmsProject(stack, 'cdk', { slug: 'cdk', name: 'CDK' });
const production = project.addEnvironment('production', { url: 'https://api.cdk.example' });
production.addTemplate('std', { rateLimitDay: 1000, maxClients: 10 });
${clients.map((c) => `production.addClient('${c}', { template: 'std' }).addKey('primary', {});`).join('\n')}
app.synth();
`;

describe('kms-sync agent --cdktf', () => {
  let f: Fixture;
  beforeAll(async () => {
    f = await fixture();
  });
  afterAll(async () => {
    expect(printedSecrets(f.outputs)).toEqual([]);
    await f.cleanup();
  });

  it(
    'runs the CDKTF app of each commit and applies it',
    async () => {
      f.repo.link('infra/node_modules/kms-sync', repoRoot);
      for (const pkg of ['cdktf', 'constructs'])
        f.repo.link(`infra/node_modules/${pkg}`, path.join(repoRoot, 'node_modules', pkg));
      const first = f.repo.push(
        {
          'infra/package.json': '{ "type": "module", "private": true }\n',
          'infra/cdktf.json':
            JSON.stringify({
              language: 'typescript',
              app: 'node main.ts',
              projectId: 'agent',
              sendCrashReports: 'false',
              terraformProviders: [],
              terraformModules: [],
              context: {},
            }) + '\n',
          'infra/main.ts': stack(['alpha']),
        },
        'cdktf app',
      );
      const agent = await startAgent(f, ['--path', 'infra', '--cdktf', '--interval', '1s', '--mode', 'sync']);
      await until(agent, 'the app applied', (x) => x.revision.synced === first, 60_000);
      expect((await f.emu.clients('cdk-production')).map((c) => c.name)).toEqual(['alpha']);
      const second = f.repo.push({ 'infra/main.ts': stack(['alpha', 'beta']) }, 'add beta');
      await until(agent, 'the pushed commit applied', (x) => x.revision.synced === second, 60_000);
      expect((await f.emu.clients('cdk-production')).map((c) => c.name).sort()).toEqual(['alpha', 'beta']);
      agent.child.kill('SIGTERM');
      expect(await agent.exit).toBe(0);
    },
    patient(150_000),
  );
});
