import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ConfigError, formatDiagnostics, loadDesiredState } from '../../src/config/index.js';
import { PROJECT, TEAM_HEAD, errorsOf, stateOf, writeTree } from './helpers.js';

// Every error names file:line:column, the field path and a precise message.

describe('schema errors', () => {
  it('reports an unknown field with a suggestion, and the missing required field', async () => {
    const team = `${TEAM_HEAD}        clients:
          - name: globex
            tempalte: gold
`;
    expect(await errorsOf({ 'project.yaml': PROJECT, 'team.yaml': team })).toEqual([
      'team.yaml:7:13: projects[0].environments[0].clients[0]: missing required field "template"',
      'team.yaml:8:13: projects[0].environments[0].clients[0].tempalte: unknown field "tempalte" (did you mean "template"?)',
    ]);
  });

  it('lists the allowed fields when nothing is close', async () => {
    const team = `${TEAM_HEAD}        colour: blue
`;
    expect(await errorsOf({ 'project.yaml': PROJECT, 'team.yaml': team })).toEqual([
      'team.yaml:6:9: projects[0].environments[0].colour: unknown field "colour" (allowed: type, url, protected, templates, clients, endpoints)',
    ]);
  });

  it('reports types, enums, patterns, formats, constants and limits', async () => {
    const file = `apiVersion: kms-sync/v2
projects:
  - slug: Acme_Corp
    name: Acme
    environments:
      - type: prod-eu
        url: not a url
        templates:
          - { name: gold, rateLimitDay: lots, maxClients: 0 }
        endpoints:
          - { method: FETCH, path: v1/users }
        clients:
          - name: ""
            template: gold
            ipWhitelist: 10.0.0.0/8
`;
    expect(await errorsOf({ 'bad.yaml': file })).toEqual([
      'bad.yaml:1:13: apiVersion: must be "kms-sync/v1" (got "kms-sync/v2")',
      'bad.yaml:3:11: projects[0].slug: must be 1-50 lower-case letters, digits or hyphens, starting and ending with a letter or digit (got "Acme_Corp")',
      'bad.yaml:6:15: projects[0].environments[0].type: must be 1-20 lower-case letters or digits, starting with a letter (no hyphens) (got "prod-eu")',
      'bad.yaml:7:14: projects[0].environments[0].url: must be an absolute URL such as https://api.example.com (got "not a url")',
      'bad.yaml:9:41: projects[0].environments[0].templates[0].rateLimitDay: must be an integer (got "lots")',
      'bad.yaml:9:59: projects[0].environments[0].templates[0].maxClients: must be >= 1 (got 0)',
      'bad.yaml:11:23: projects[0].environments[0].endpoints[0].method: must be one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS (got "FETCH")',
      'bad.yaml:11:36: projects[0].environments[0].endpoints[0].path: must start with / (got "v1/users")',
      'bad.yaml:13:19: projects[0].environments[0].clients[0].name: must not be empty',
      'bad.yaml:15:26: projects[0].environments[0].clients[0].ipWhitelist: must be a list (got "10.0.0.0/8")',
    ]);
  });

  it('reports a missing apiVersion and an empty value', async () => {
    const file = `projects:
  - slug: acme
    name:
`;
    expect(await errorsOf({ 'a.yaml': file })).toEqual([
      'a.yaml:1:1: (top level): missing required field "apiVersion"',
      'a.yaml:3:5: projects[0].name: must be a string (got an empty value)',
    ]);
  });

  it('explains attributes set on a reference (dependencies)', async () => {
    const team = `apiVersion: kms-sync/v1
projects:
  - slug: acme
    description: Team view
    environments:
      - type: production
        protected: true
`;
    expect(await errorsOf({ 'project.yaml': PROJECT, 'team.yaml': team })).toEqual([
      'team.yaml:4:5: projects[0].description: "description" can only be set where the project is defined (the occurrence with "name"); an occurrence without "name" only references the project',
      'team.yaml:7:9: projects[0].environments[0].protected: "protected" can only be set where the environment is defined (the occurrence with "url"); an occurrence without "url" only references the environment',
    ]);
  });

  it('rejects a document that is not a mapping', async () => {
    expect(await errorsOf({ 'a.yaml': '- just\n- a list\n' })).toEqual([
      'a.yaml:1:1: (top level): must be a mapping (got a list)',
    ]);
  });
});

describe('value errors', () => {
  it('reports bad CIDRs, timestamps and ttls at the exact item', async () => {
    const team = `${TEAM_HEAD}        clients:
          - name: globex
            template: gold
            ipWhitelist: [10.0.0.0/8, 10.0.0.300, 192.168.0.0/33]
            keys:
              - { name: a, expiresAt: 2027-13-45 }
              - { name: b, ttl: 90days }
              - { name: c, ttl: 0d }
              - { name: d, ttl: 30d, expiresAt: 2027-01-01 }
`;
    expect(await errorsOf({ 'project.yaml': PROJECT, 'team.yaml': team })).toEqual([
      'team.yaml:9:39: projects[0].environments[0].clients[0].ipWhitelist[1]: invalid IP address or CIDR range: "10.0.0.300"',
      'team.yaml:9:51: projects[0].environments[0].clients[0].ipWhitelist[2]: invalid prefix length in "192.168.0.0/33" (0-32)',
      'team.yaml:11:39: projects[0].environments[0].clients[0].keys[0].expiresAt: invalid ISO 8601 timestamp: "2027-13-45"',
      'team.yaml:12:33: projects[0].environments[0].clients[0].keys[1].ttl: must be a number and a unit s, m, h, d or w, e.g. 90d (got "90days")',
      'team.yaml:13:33: projects[0].environments[0].clients[0].keys[2].ttl: ttl must be positive: "0d"',
      'team.yaml:14:38: projects[0].environments[0].clients[0].keys[3].expiresAt: "expiresAt" cannot be combined with "ttl": set only one of them',
    ]);
  });
});

describe('reference errors', () => {
  it('names the templates that exist when a template is unknown', async () => {
    const team = `${TEAM_HEAD}        clients:
          - { name: globex, template: silver }
          - { name: initech, template: golden }
      - type: staging
        clients:
          - { name: hooli, template: gold }
`;
    expect(await errorsOf({ 'project.yaml': PROJECT, 'team.yaml': team })).toEqual([
      'team.yaml:7:39: projects[0].environments[0].clients[0].template: template "silver" is not defined in environment acme-production (defined: gold, bronze)',
      'team.yaml:8:40: projects[0].environments[0].clients[1].template: template "golden" is not defined in environment acme-production (defined: gold, bronze; did you mean "gold"?)',
      'team.yaml:11:38: projects[0].environments[1].clients[0].template: template "gold" is not defined in environment acme-staging (defined: sandbox)',
    ]);
  });

  it('a template may be defined after the clients that name it (a team file read before the project file)', async () => {
    const team = `${TEAM_HEAD}        clients:
          - { name: globex, template: gold }
          - { name: initech, template: golde }
`;
    // "a-team.yaml" is read before "z-project.yaml": its references wait for the templates.
    expect(await errorsOf({ 'a-team.yaml': team, 'z-project.yaml': PROJECT })).toEqual([
      'a-team.yaml:8:40: projects[0].environments[0].clients[1].template: template "golde" is not defined in environment acme-production (defined: gold, bronze; did you mean "gold"?)',
    ]);
    const { state } = await stateOf({
      'a-team.yaml': `${TEAM_HEAD}        clients:\n          - { name: globex, template: gold }\n`,
      'z-project.yaml': PROJECT,
    });
    expect(state.clients.map((c) => [c.name, c.template])).toEqual([['globex', 'gold']]);
  });

  it("warns when a template's declared client maximum is below the clients that name it, across files", async () => {
    const clients = (from: number, n: number) =>
      Array.from({ length: n }, (_, i) => `          - { name: c${from + i}, template: gold }`).join('\n');
    const a = `${TEAM_HEAD}        clients:\n${clients(0, 3)}\n`;
    const b = `${TEAM_HEAD}        clients:\n${clients(3, 3)}\n          - { name: other, template: bronze }\n`;
    const over = await writeTree({ 'project.yaml': PROJECT, 'a.yaml': a, 'b.yaml': b });
    const { warnings } = await loadDesiredState(['.'], { cwd: over, env: {} });
    expect(formatDiagnostics(warnings).split('\n')).toEqual([
      'project.yaml:9:13: projects[0].environments[0].templates[0]: template "gold" in environment acme-production allows 5 client(s) (maxClients), ' +
        'but 6 clients name it: the service may refuse the clients beyond it; raise maxClients or move clients to another template',
    ]);
    // At the maximum: nothing to say.
    const at = await writeTree({
      'project.yaml': PROJECT,
      'a.yaml': `${TEAM_HEAD}        clients:\n${clients(0, 5)}\n`,
    });
    expect((await loadDesiredState(['.'], { cwd: at, env: {} })).warnings).toEqual([]);
  });

  it('finds templates declared in another file', async () => {
    const extra = `${TEAM_HEAD}        templates:
          - { name: silver, rateLimitDay: 50 }
`;
    const team = `${TEAM_HEAD}        clients:
          - { name: globex, template: silver }
`;
    const dir = await writeTree({ 'project.yaml': PROJECT, 'a.yaml': team, 'z.yaml': extra });
    const { state } = await loadDesiredState(['.'], { cwd: dir, env: {} });
    expect(state.templates.map((t) => `${t.projectEnv}/${t.name}`)).toEqual([
      'acme-production/bronze',
      'acme-production/gold',
      'acme-production/silver',
      'acme-staging/sandbox',
    ]);
    expect(state.clients[0]?.template).toBe('silver');
  });

  it('reports unknown stores in secret.store', async () => {
    const stores = `apiVersion: kms-sync/v1
stores:
  - { name: team-vault, uri: "vault://vault.example:8200/secret/kms" }
`;
    const team = `${TEAM_HEAD}        clients:
          - name: globex
            template: gold
            keys:
              - { name: primary, secret: { store: vualt } }
              - { name: second, secret: { store: team-vaul } }
              - { name: third, secret: { store: default } }
`;
    expect(await errorsOf({ 'project.yaml': PROJECT, 'stores.yaml': stores, 'team.yaml': team })).toEqual([
      'team.yaml:10:51: projects[0].environments[0].clients[0].keys[0].secret.store: store "vualt" is not declared under stores (declared: team-vault)',
      'team.yaml:11:50: projects[0].environments[0].clients[0].keys[1].secret.store: store "team-vaul" is not declared under stores (declared: team-vault; did you mean "team-vault"?)',
    ]);
    const noStores = await errorsOf({ 'project.yaml': PROJECT, 'team.yaml': team });
    expect(noStores[0]).toBe(
      'team.yaml:10:51: projects[0].environments[0].clients[0].keys[0].secret.store: store "vualt" is not declared under stores (no stores are declared; leave secret.store out, or use "default", for the default store)',
    );
  });

  it('reports projects and environments that are only referenced, at each reference', async () => {
    const team = `apiVersion: kms-sync/v1
projects:
  - slug: acme
    environments:
      - type: qa
        clients:
          - { name: globex, template: gold }
  - slug: globex
    environments:
      - type: production
`;
    expect(await errorsOf({ 'project.yaml': PROJECT, 'team.yaml': team })).toEqual([
      'team.yaml:5:9: projects[0].environments[0]: environment acme-qa is referenced here but not defined in any file (exactly one occurrence must set "url")',
      'team.yaml:8:5: projects[1]: project "globex" is referenced here but not defined in any file (exactly one occurrence must set "name")',
    ]);
  });
});

describe('external projects', () => {
  const EXTERNAL = `apiVersion: kms-sync/v1
projects:
  - slug: acme
    external: true
    environments:
      - type: production
        url: https://api.acme.example
        templates:
          - { name: gold, rateLimitDay: 100 }
`;

  it('a project marked external is referenced without being defined: only its named environments are in scope', async () => {
    const { state, dir } = await stateOf({
      'one.yaml': EXTERNAL,
      'team.yaml': `${TEAM_HEAD}        clients:\n          - { name: globex, template: gold }\n`,
    });
    rmSync(dir, { recursive: true, force: true });
    expect(state.projects).toEqual([]);
    expect(state.externalProjects?.map((p) => [p.slug, `${p.source?.file}:${p.source?.line}`])).toEqual([
      ['acme', 'one.yaml:3'],
    ]);
    expect(state.envs.map((e) => e.projectEnv)).toEqual(['acme-production']);
    expect(state.clients.map((c) => c.name)).toEqual(['globex']);
  });

  it('defined in one file and marked external in another is an error naming both places', async () => {
    expect(await errorsOf({ 'project.yaml': PROJECT, 'zz-export.yaml': EXTERNAL })).toEqual([
      'zz-export.yaml:3:5: projects[0]: project "acme" is marked external here (defined elsewhere) but this configuration defines it (with "name"): ' +
        'defined at project.yaml:3:5, external at zz-export.yaml:3:5; remove "external: true", or the definition (name, description, protected) to only reference it',
      'zz-export.yaml:6:9: projects[0].environments[0]: environment acme-production is defined twice (with "url"): at project.yaml:6:9 and at zz-export.yaml:6:9; other occurrences must only reference it (type, templates, clients, endpoints)',
      'zz-export.yaml:9:13: projects[0].environments[0].templates[0]: template "gold" in environment acme-production is defined twice: at project.yaml:9:13 and at zz-export.yaml:9:13',
    ]);
  });

  it('external together with name in one occurrence, and an environment of an external project that no file defines', async () => {
    const both = EXTERNAL.replace('    external: true\n', '    name: Acme\n    external: true\n');
    expect(await errorsOf({ 'both.yaml': both })).toEqual([
      'both.yaml:5:5: projects[0].external: project "acme" is marked external (defined elsewhere) and defined here (with "name") at once: ' +
        'remove "external: true" to define it in this configuration, or remove name, description and protected to only reference it',
    ]);
    const noUrl = EXTERNAL.replace('        url: https://api.acme.example\n', '');
    expect(await errorsOf({ 'one.yaml': noUrl })).toEqual([
      'one.yaml:6:9: projects[0].environments[0]: environment acme-production is referenced here but not defined in any file (exactly one occurrence must set "url")',
    ]);
    expect(await errorsOf({ 'one.yaml': EXTERNAL.replace('external: true', 'external: yes') })).toEqual([
      'one.yaml:4:15: projects[0].external: must be true or false (got "yes")',
    ]);
  });
});

describe('duplicates', () => {
  it('names both places of every duplicate identity', async () => {
    const a = `apiVersion: kms-sync/v1
stores:
  - { name: vault, uri: "vault://a" , default: true }
projects:
  - slug: acme
    environments:
      - type: production
        templates:
          - { name: gold, rateLimitDay: 1 }
        clients:
          - name: globex
            template: gold
            keys:
              - { name: primary, ttl: 1d }
              - { name: primary, ttl: 2d }
        endpoints:
          - { method: get, path: /v1/users }
`;
    const b = `apiVersion: kms-sync/v1
stores:
  - { name: vault, uri: "vault://b" }
  - { name: local, uri: "file:./keys", default: true }
projects:
  - slug: acme
    name: Acme again
    environments:
      - type: production
        url: https://other.example
        clients:
          - { name: globex, template: gold }
        endpoints:
          - { method: GET, path: /v1/users }
`;
    expect(await errorsOf({ 'a.yaml': a, 'b.yaml': b, 'project.yaml': PROJECT })).toEqual([
      'a.yaml:15:17: projects[0].environments[0].clients[0].keys[1]: key "primary" of client "globex" in environment acme-production is defined twice: at a.yaml:14:17 and at a.yaml:15:17',
      'b.yaml:3:5: stores[0]: store "vault" is defined twice: at a.yaml:3:5 and at b.yaml:3:5',
      'b.yaml:4:5: stores[1]: only one store can be the default: "vault" at a.yaml:3:5 and "local" at b.yaml:4:5 both set default: true',
      'b.yaml:12:13: projects[0].environments[0].clients[0]: client "globex" in environment acme-production is defined twice: at a.yaml:11:13 and at b.yaml:12:13',
      'b.yaml:14:13: projects[0].environments[0].endpoints[0]: endpoint GET:/v1/users in environment acme-production is defined twice: at a.yaml:17:13 and at b.yaml:14:13',
      'project.yaml:3:5: projects[0]: project "acme" is defined twice (with "name"): at b.yaml:6:5 and at project.yaml:3:5; other occurrences must only reference it (slug and environments)',
      'project.yaml:6:9: projects[0].environments[0]: environment acme-production is defined twice (with "url"): at b.yaml:9:9 and at project.yaml:6:9; other occurrences must only reference it (type, templates, clients, endpoints)',
      'project.yaml:9:13: projects[0].environments[0].templates[0]: template "gold" in environment acme-production is defined twice: at a.yaml:9:13 and at project.yaml:9:13',
    ]);
  });
});

describe('YAML and file errors', () => {
  it('reports syntax errors with their position, next to errors of other files', async () => {
    const broken = `apiVersion: kms-sync/v1
projects:
  - slug: acme
    name: [unclosed
`;
    const dup = `apiVersion: kms-sync/v1
apiVersion: kms-sync/v1
`;
    const other = `apiVersion: kms-sync/v1
stores:
  - { name: s, uri: "x://", colour: red }
`;
    const errors = await errorsOf({ 'a.yaml': broken, 'b.yaml': dup, 'c.yaml': other });
    expect(errors).toHaveLength(3);
    expect(errors[0]).toMatch(/^a\.yaml:5:1: projects\[0\]\.name(\[0\])?: YAML: /);
    expect(errors[1]).toBe(
      'b.yaml:2:1: apiVersion: duplicate key "apiVersion" in this mapping (first at line 1, column 1)',
    );
    expect(errors[2]).toBe(
      'c.yaml:3:29: stores[0].colour: unknown field "colour" (allowed: name, uri, default, options)',
    );
  });

  it('does not report references as undefined when the defining file is broken', async () => {
    const broken = `apiVersion: kms-sync/v1
projects:
  - slug: acme
    name: Acme
    environments: [
`;
    const team = `${TEAM_HEAD}        clients:
          - { name: globex, template: gold }
`;
    const errors = await errorsOf({ 'project.yaml': broken, 'team.yaml': team });
    expect(errors.every((e) => e.startsWith('project.yaml:'))).toBe(true);
  });

  it('reports missing paths and empty folders', async () => {
    const errors = await errorsOf(
      { 'empty/readme.txt': 'x', 'ok.yaml': PROJECT },
      { args: ['ok.yaml', 'missing.yaml', 'empty'] },
    );
    expect(errors).toEqual([
      'missing.yaml: no such file or folder',
      'empty: folder contains no *.yaml, *.yml or *.json files',
    ]);
  });

  it('throws one ConfigError carrying every diagnostic, with a readable message', async () => {
    const dir = await writeTree({
      'a.yaml': 'apiVersion: kms-sync/v1\nprojectz: []\n',
      'b.yaml': 'apiVersion: kms-sync/v1\nstores: {}\n',
    });
    const err = await loadDesiredState(['.'], { cwd: dir, env: {} }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    const ce = err as ConfigError;
    expect(ce.diagnostics).toEqual([
      {
        file: 'a.yaml',
        line: 2,
        column: 1,
        path: 'projectz',
        message: 'unknown field "projectz" (did you mean "projects"?)',
      },
      { file: 'b.yaml', line: 2, column: 9, path: 'stores', message: 'must be a list (got a mapping)' },
    ]);
    expect(ce.message).toBe(`2 configuration errors:\n${formatDiagnostics(ce.diagnostics)}`);
    expect(formatDiagnostics(ce.diagnostics)).toBe(
      'a.yaml:2:1: projectz: unknown field "projectz" (did you mean "projects"?)\n' +
        'b.yaml:2:9: stores: must be a list (got a mapping)',
    );
  });
});
