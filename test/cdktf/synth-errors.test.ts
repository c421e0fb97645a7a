// Everything kms-sync cannot evaluate in a stack is an error naming the construct path, the
// attribute and why, and all of them come at once (one synth of a real app).
import { rmSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadCdktf } from '../../src/cdktf/index.js';
import { ConfigError, formatDiagnostic, loadDesiredState } from '../../src/config/index.js';
import { runCli, workspace } from '../support/cli.js';
import { cdktfJson, cdktfProject } from './helpers.js';
import { patient } from '../support/patience.js';

const broken = `
import { App, Fn, Op, TerraformIterator, TerraformProvider, TerraformResource, TerraformStack, TerraformVariable, Token } from 'cdktf';
import type { Construct } from 'constructs';
import { Client, Environment, Key, KmsProvider, Project, Template, Endpoint } from 'kms-sync/cdktf';

class NullProvider extends TerraformProvider {
  constructor(scope: Construct, id: string) { super(scope, id, { terraformResourceType: 'null', terraformGeneratorMetadata: { providerName: 'null' } }); }
}
const app = new App();
const base = new TerraformStack(app, 'base');
new KmsProvider(base, 'kms', {});
new Project(base, 'acme', { slug: 'acme', name: 'Acme' });
const env = new Environment(base, 'prod', { project: 'acme', type: 'production', url: 'https://a.example' });
new Template(base, 'gold', { projectEnv: env.projectEnv, name: 'gold', rateLimitDay: 10 });

const s = new TerraformStack(app, 'teams');
new KmsProvider(s, 'kms', {});
new NullProvider(s, 'null');
const nothing = new TerraformResource(s, 'thing', { terraformResourceType: 'null_resource' });
const noValue = new TerraformVariable(s, 'no_value', { type: 'string' });
const ok = new Client(s, 'ok', { projectEnv: 'acme-production', name: 'ok', template: 'gold' });
new Client(s, 'counted', { projectEnv: 'acme-production', name: 'counted', template: 'gold', count: 2 });
const it = TerraformIterator.fromList(['a', 'b']);
new Client(s, 'looped', { forEach: it, projectEnv: 'acme-production', name: it.value, template: 'gold' });
new Client(s, 'hashed', { projectEnv: 'acme-production', name: Fn.md5('x'), template: 'gold' });
new Client(s, 'added', { projectEnv: 'acme-production', name: 'added', template: 'gold', metadata: { n: Op.add(1, 2) } });
new Client(s, 'cond', { projectEnv: 'acme-production', name: Fn.conditional(true, 'a', 'b'), template: 'gold' });
new Client(s, 'other-provider', { projectEnv: 'acme-production', name: Token.asString(nothing.getStringAttribute('id')), template: 'gold' });
new Client(s, 'cross-stack', { projectEnv: env.projectEnv, name: 'cross', template: 'gold' });
new Client(s, 'computed', { projectEnv: 'acme-production', name: ok.clientUuid, template: 'gold' });
new Client(s, 'unset-var', { projectEnv: 'acme-production', name: noValue.stringValue, template: 'gold' });
new Client(s, 'path-ref', { projectEnv: 'acme-production', name: Token.asString('\${path.module}'), template: 'gold' });
const over = new Client(s, 'override', { projectEnv: 'acme-production', name: 'override', template: 'gold' });
over.addOverride('bogus', 1);
new Key(s, 'orphan-key', { projectEnv: 'acme-production', client: 'nobody', name: 'k' });
new Endpoint(s, 'bad-env', { projectEnv: 'production', method: 'GET', path: '/x' });
new Client(s, 'bad-ttl', { projectEnv: 'acme-production', name: 'bad-ttl', template: 'gold', ipWhitelist: ['10.0.0.999'] }).node;
new Client(s, 'typo-template', { projectEnv: 'acme-production', name: 'typo', template: 'golf' });
app.synth();
`;

describe('CDKTF problems', () => {
  it(
    'reports every unsupported expression with construct path, attribute and reason, all at once',
    async () => {
      const dir = cdktfProject({ 'main.ts': broken, 'cdktf.json': cdktfJson() });
      const cdktf = await loadCdktf({ dir, cwd: dir, env: { ...process.env } });
      const err = await loadDesiredState([], {
        cwd: dir,
        documents: cdktf.documents,
        diagnostics: cdktf.diagnostics,
      }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConfigError);
      const lines = (err as ConfigError).diagnostics.map(formatDiagnostic);
      const expected: Array<[string, RegExp]> = [
        ['teams/counted.count', /count is not supported/],
        ['teams/looped.for_each', /for_each is not supported/],
        ['teams/looped.name', /each\.value: count and for_each are not supported/],
        ['teams/hashed.name', /function md5\(\) is not supported/],
        ['teams/added.metadata', /operator "\+" is not supported/],
        ['teams/cond.name', /conditional expressions .* not supported/],
        ['teams/other-provider.name', /resource of another provider \(null_resource\)/],
        ['teams/cross-stack.project_env', /cross-stack reference/],
        ['teams/computed.name', /computed by the service/],
        ['teams/unset-var.name', /variable "no_value" has no value: set TF_VAR_no_value/],
        ['teams/path-ref.name', /path\.\* is not supported/],
        ['teams/override.bogus', /kms_client has no attribute bogus/],
        ['teams/orphan-key.client', /client "nobody" of acme-production is not a kms_client of stack teams/],
        ['teams/bad-env.project_env', /"production" is not an environment slug/],
        // Value checks of the YAML rules run on what could be read, in the same report.
        ['teams/bad-ttl.ip_whitelist[0]', /invalid IP address or CIDR range: "10\.0\.0\.999"/],
      ];
      for (const [where, why] of expected) {
        const hit = lines.find((l) => l.startsWith(`stack "teams": ${where}: `));
        expect(hit, `${where} in:\n${lines.join('\n')}`).toBeDefined();
        expect(hit).toMatch(why);
      }
      // Cross-checks (is the template defined?) are not run on an incomplete input: they would be noise ...
      expect(lines.length, lines.join('\n')).toBe(expected.length);

      // ... and appear once the stack's own problems are gone.
      const fixed = broken
        .split('\n')
        .filter(
          (l) =>
            !/'(counted|looped|hashed|added|cond|other-provider|cross-stack|computed|unset-var|path-ref|override|orphan-key|bad-env)'/.test(
              l,
            ) && !l.includes('over.addOverride'),
        )
        .join('\n');
      const dir2 = cdktfProject({ 'main.ts': fixed, 'cdktf.json': cdktfJson() });
      const again = await loadCdktf({ dir: dir2, cwd: dir2 });
      expect(again.diagnostics).toEqual([]);
      const err2 = await loadDesiredState([], { cwd: dir2, documents: again.documents }).catch((e: unknown) => e);
      const lines2 = (err2 as ConfigError).diagnostics.map(formatDiagnostic);
      expect(lines2).toEqual([
        expect.stringMatching(/^stack "teams": teams\/bad-ttl\.ip_whitelist\[0\]: .*10\.0\.0\.999/),
        expect.stringMatching(
          /^stack "teams": teams\/typo-template\.template: template "golf" is not defined in environment acme-production .*did you mean "gold"/,
        ),
      ]);
    },
    patient(60_000),
  );

  it(
    'a client defined in YAML and in a stack is one identity defined twice, naming both places',
    async () => {
      const dir = cdktfProject({
        'main.ts': `import { App, TerraformStack } from 'cdktf';
import { Client, KmsProvider } from 'kms-sync/cdktf';
const app = new App();
const s = new TerraformStack(app, 'team');
new KmsProvider(s, 'kms', {});
new Client(s, 'globex', { projectEnv: 'acme-production', name: 'globex', template: 'gold' });
app.synth();
`,
        'cdktf.json': cdktfJson(),
        'acme.yaml': `apiVersion: kms-sync/v1
projects:
  - slug: acme
    name: Acme
    environments:
      - type: production
        url: https://a.example
        templates: [{ name: gold, rateLimitDay: 1 }]
        clients: [{ name: globex, template: gold }]
`,
      });
      const r = await runCli(['validate', '-f', 'acme.yaml', '--cdktf', '.'], { cwd: dir });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(
        'stack "team": team/globex: client "globex" in environment acme-production is defined twice: at acme.yaml:9:19 and at stack "team"',
      );
    },
    patient(60_000),
  );

  it(
    'a project defined in YAML and looked up in a stack (KmsExternalProject) is an error naming both places',
    async () => {
      const dir = cdktfProject({
        'main.ts': `import { App, TerraformStack } from 'cdktf';
import { KmsExternalProject, KmsProvider } from 'kms-sync/cdktf';
const app = new App();
const s = new TerraformStack(app, 'team');
new KmsProvider(s, 'kms', {});
new KmsExternalProject(s, 'acme', { slug: 'acme' }).addEnvironment('qa', { url: 'https://qa.example' }).addTemplate('t', { rateLimitDay: 1 });
app.synth();
`,
        'cdktf.json': cdktfJson(),
        'acme.yaml': `apiVersion: kms-sync/v1
projects:
  - slug: acme
    name: Acme
`,
      });
      const both = await runCli(['validate', '-f', 'acme.yaml', '--cdktf', '.'], { cwd: dir });
      expect(both.code).toBe(1);
      expect(both.stderr).toMatch(
        /stack "team": team\/acme: project "acme" is marked external here \(defined elsewhere\) but this configuration defines it \(with "name"\): defined at acme\.yaml:3:5, external at stack "team"/,
      );
      // The stack alone references acme: valid, and its environment is the only one in scope.
      const alone = await runCli(['validate', '--cdktf', '.'], { cwd: dir });
      expect(alone.code, alone.stderr).toBe(0);
      const cdktf = await loadCdktf({ dir, cwd: dir });
      const { state } = await loadDesiredState([], { cwd: dir, documents: cdktf.documents });
      expect(state.projects).toEqual([]);
      expect(state.externalProjects?.map((p) => p.slug)).toEqual(['acme']);
      expect(state.envs.map((e) => e.projectEnv)).toEqual(['acme-qa']);
      rmSync(dir, { recursive: true, force: true });
    },
    patient(60_000),
  );

  it(
    'a failing app, a missing cdktf.json and an unknown --stack are usage errors',
    async () => {
      const dir = cdktfProject({ 'main.ts': 'throw new Error("boom in the app");\n', 'cdktf.json': cdktfJson() });
      const failing = await runCli(['validate', '--cdktf', dir]);
      expect(failing.code).toBe(1);
      expect(failing.stderr).toMatch(
        /the app of .*cdktf\.json \(node main\.ts\) failed with exit code 1:[\s\S]*boom in the app/,
      );
      const empty = workspace();
      const missing = await runCli(['validate', '--cdktf', empty]);
      expect(missing.stderr).toContain(`no cdktf.json in ${empty}`);
      const stack = await runCli(['validate', '--cdktf', path.join('examples', 'cdktf'), '--stack', 'nope']);
      expect(stack.code).toBe(1);
      expect(stack.stderr).toContain('--stack nope: no such stack (the app has: acme)');
      const noFlag = await runCli(['validate', '--stack', 'acme']);
      expect(noFlag.stderr).toContain('--stack needs --cdktf');
    },
    patient(60_000),
  );

  it(
    "shows the app's stderr when the synth succeeds, each line prefixed and escaped",
    async () => {
      const app =
        `import { App, TerraformStack } from 'cdktf';\nimport { KmsProvider, Project } from 'kms-sync/cdktf';\n` +
        `const app = new App();\nconst s = new TerraformStack(app, 'base');\nnew KmsProvider(s, 'kms', {});\n` +
        `new Project(s, 'acme', { slug: 'acme', name: 'Acme' });\n` +
        `console.error('\\x1b[33mWARNING: construct acme is deprecated\\x1b[0m');\n` +
        `console.error('::add-mask::x \\x1b]0;retitled\\x07 and a token ' + process.env.KMS_API_KEY);\n` +
        `console.log('plain stdout line');\napp.synth();\n`;
      const dir = cdktfProject({ 'main.ts': app, 'cdktf.json': cdktfJson() });
      const r = await runCli(['validate', '--cdktf', dir], { env: { KMS_API_KEY: 'sk_test_stderrshown0123456789' } });
      expect(r.code, r.stderr).toBe(0);
      const shown = r.stderr.split('\n').filter((l) => l.startsWith('cdktf app: '));
      expect(shown).toEqual([
        'cdktf app: WARNING: construct acme is deprecated',
        'cdktf app: ::add-mask::x \\u001b]0;retitled\\u0007 and a token undefined',
      ]);
      expect(r.stderr).not.toContain('\x1b');
      expect(r.stderr).not.toContain('plain stdout line');
      rmSync(dir, { recursive: true, force: true });
    },
    patient(60_000),
  );
});
