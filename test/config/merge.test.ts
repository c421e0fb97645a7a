import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { expandPaths, loadDesiredState } from '../../src/config/index.js';
import { PROJECT, asData, TEAM_HEAD, stateOf, withoutSources, writeTree } from './helpers.js';

const PAYMENTS = `${TEAM_HEAD}        clients:
          - name: globex
            type: company
            template: gold
            ipWhitelist: [192.168.1.7, 10.1.2.3/8, "2001:DB8::/32", 10.0.0.0/8]
            metadata: { team: payments, nested: { a: [1, 2] } }
            keys:
              - { name: primary, ttl: 90d, autoRotate: true }
              - { name: archive, expiresAt: "2027-01-01T01:00:00+01:00", secret: { name: acme/globex } }
        endpoints:
          - { method: post, path: /v1/payments, name: Create payment }
`;

const PARTNERS = `apiVersion: kms-sync/v1
projects:
  - slug: acme
    environments:
      - type: staging
        clients:
          - { name: hooli, template: sandbox }
---
# a second document in the same file
apiVersion: kms-sync/v1
projects:
  - slug: acme
    environments:
      - type: production
        endpoints:
          - { method: GET, path: "/v1/users/{id}", request: { type: object }, response: { type: object }, metadata: { team: partners } }
---
`;

describe('expandPaths', () => {
  it('recurses into folders, keeps *.yaml/*.yml, skips hidden folders, sorts and de-duplicates', async () => {
    const dir = await writeTree({
      'conf/project.yaml': PROJECT,
      'conf/teams/b.yml': PARTNERS,
      'conf/teams/a.yaml': PAYMENTS,
      'conf/teams/notes.txt': 'not yaml',
      'conf/.hidden/x.yaml': 'broken: [',
      'extra.YAML': 'apiVersion: kms-sync/v1\n',
    });
    const files = await expandPaths(['extra.YAML', 'conf', 'conf/teams/a.yaml'], { cwd: dir });
    expect(files.map((f) => path.relative(dir, f).split(path.sep).join('/'))).toEqual([
      'conf/project.yaml',
      'conf/teams/a.yaml',
      'conf/teams/b.yml',
      'extra.YAML',
    ]);
    expect(files.every((f) => path.isAbsolute(f))).toBe(true);
  });
});

describe('multi-file merge', () => {
  it('merges a project file and team files from a folder into one normalised model', async () => {
    const { state, files } = await stateOf(
      { 'conf/project.yaml': PROJECT, 'conf/teams/payments.yaml': PAYMENTS, 'conf/teams/partners.yml': PARTNERS },
      { args: ['conf'] },
    );
    expect(files).toEqual(['conf/project.yaml', 'conf/teams/partners.yml', 'conf/teams/payments.yaml']);
    expect(asData(state.projects)).toEqual([
      { slug: 'acme', name: 'Acme', source: { file: 'conf/project.yaml', line: 3, column: 5, path: 'projects[0]' } },
    ]);
    expect(state.envs.map((e) => [e.projectEnv, e.project, e.type, e.url])).toEqual([
      ['acme-production', 'acme', 'production', 'https://api.acme.example'],
      ['acme-staging', 'acme', 'staging', 'https://staging.acme.example'],
    ]);
    expect(state.clients.map((c) => `${c.projectEnv}/${c.name}`)).toEqual([
      'acme-production/globex',
      'acme-staging/hooli',
    ]);
    const globex = state.clients[0];
    expect(asData(globex)).toEqual({
      projectEnv: 'acme-production',
      name: 'globex',
      type: 'company',
      template: 'gold',
      ipWhitelist: ['10.0.0.0/8', '192.168.1.7/32', '2001:db8::/32'],
      metadata: { team: 'payments', nested: { a: [1, 2] } },
      source: { file: 'conf/teams/payments.yaml', line: 7, column: 13, path: 'projects[0].environments[0].clients[0]' },
      keys: [
        {
          projectEnv: 'acme-production',
          client: 'globex',
          name: 'archive',
          expiresAt: '2027-01-01T00:00:00.000Z',
          secret: { name: 'acme/globex' },
          source: {
            file: 'conf/teams/payments.yaml',
            line: 14,
            column: 17,
            path: 'projects[0].environments[0].clients[0].keys[1]',
          },
        },
        {
          projectEnv: 'acme-production',
          client: 'globex',
          name: 'primary',
          ttl: '90d',
          autoRotate: true,
          source: {
            file: 'conf/teams/payments.yaml',
            line: 13,
            column: 17,
            path: 'projects[0].environments[0].clients[0].keys[0]',
          },
        },
      ],
    });
    expect(state.endpoints.map((e) => [e.projectEnv, e.method, e.path, e.source?.file, e.source?.line])).toEqual([
      ['acme-production', 'POST', '/v1/payments', 'conf/teams/payments.yaml', 16],
      ['acme-production', 'GET', '/v1/users/{id}', 'conf/teams/partners.yml', 16],
    ]);
    expect(state.endpoints[1]).toMatchObject({
      request: { type: 'object' },
      response: { type: 'object' },
      metadata: { team: 'partners' },
    });
    expect(state.templates.map((t) => [t.projectEnv, t.name, t.rateLimitDay, t.maxClients])).toEqual([
      ['acme-production', 'bronze', 10, undefined],
      ['acme-production', 'gold', 100, 5],
      ['acme-staging', 'sandbox', 10, undefined],
    ]);
    expect(asData(state.stores)).toEqual([]);
  });

  it('gives the same state whatever the argument order or file names', async () => {
    const a = await stateOf(
      { 'p.yaml': PROJECT, 'x.yaml': PAYMENTS, 'y.yaml': PARTNERS },
      { args: ['y.yaml', 'x.yaml', 'p.yaml'] },
    );
    const b = await stateOf({ 'z.yaml': PROJECT, 'b.yaml': PARTNERS, 'a.yaml': PAYMENTS });
    expect(withoutSources(a.state)).toEqual(withoutSources(b.state));
    expect(JSON.stringify(withoutSources(a.state))).toBe(JSON.stringify(withoutSources(b.state)));
  });

  it('keeps protected flags on every kind of resource, and stores with options', async () => {
    const file = `apiVersion: kms-sync/v1
stores:
  - name: team-vault
    uri: vault://vault.example:8200/secret/kms
    default: true
    options: { namespace: payments }
projects:
  - slug: acme
    name: Acme
    description: d
    protected: true
    environments:
      - type: production
        url: https://api.acme.example
        protected: true
        templates:
          - { name: gold, rateLimitDay: 1, protected: true }
        clients:
          - name: globex
            template: gold
            protected: true
            keys:
              - { name: k, protected: true, secret: { store: team-vault, name: acme/globex } }
        endpoints:
          - { method: DELETE, path: /v1/x, protected: true }
`;
    const { state } = await stateOf({ 'a.yaml': file });
    for (const r of [
      state.projects[0],
      state.envs[0],
      state.templates[0],
      state.clients[0],
      state.clients[0]?.keys[0],
      state.endpoints[0],
    ]) {
      expect(r?.protected).toBe(true);
    }
    expect(state.projects[0]?.description).toBe('d');
    expect(state.clients[0]?.keys[0]?.secret).toEqual({ store: 'team-vault', name: 'acme/globex' });
    expect(asData(state.stores)).toEqual([
      {
        name: 'team-vault',
        uri: 'vault://vault.example:8200/secret/kms',
        default: true,
        options: { namespace: 'payments' },
        source: { file: 'a.yaml', line: 3, column: 5, path: 'stores[0]' },
      },
    ]);
  });

  it('resolves YAML anchors and aliases', async () => {
    const file = `apiVersion: kms-sync/v1
projects:
  - slug: acme
    name: Acme
    environments:
      - type: production
        url: https://api.acme.example
        templates: [{ name: gold, rateLimitDay: 1 }]
        clients:
          - { name: a, template: gold, metadata: &meta { team: payments } }
          - { name: b, template: gold, metadata: *meta }
`;
    const { state } = await stateOf({ 'a.yaml': file });
    expect(state.clients.map((c) => c.metadata)).toEqual([{ team: 'payments' }, { team: 'payments' }]);
  });

  it('ignores empty documents and comment-only files', async () => {
    const { state, files } = await stateOf({
      'a.yaml': PROJECT,
      'b.yaml': '# nothing here yet\n',
      'c.yaml': '---\n---\n',
    });
    expect(files).toEqual(['a.yaml', 'b.yaml', 'c.yaml']);
    expect(state.projects).toHaveLength(1);
  });

  it('reports files relative to cwd', async () => {
    const dir = await writeTree({ 'deep/er/p.yaml': PROJECT });
    const { state, files } = await loadDesiredState([path.join(dir, 'deep')], { cwd: path.join(dir, 'deep'), env: {} });
    expect(files).toEqual(['er/p.yaml']);
    expect(state.envs[0]?.source?.file).toBe('er/p.yaml');
  });
});
