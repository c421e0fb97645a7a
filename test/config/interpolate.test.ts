import { describe, expect, it } from 'vitest';
import { escapeInterpolation, interpolateString } from '../../src/config/index.js';
import { PROJECT, TEAM_HEAD, errorsOf, stateOf } from './helpers.js';

describe('interpolateString', () => {
  it('substitutes set variables and defaults, shell-style', () => {
    const env = { A: 'x', EMPTY: '' };
    expect(interpolateString('${env:A}/${env:A}', env)).toMatchObject({ value: 'x/x', errors: [], sole: false });
    expect(interpolateString('${env:A}', env)).toMatchObject({ value: 'x', sole: true });
    expect(interpolateString('${env:B:-dflt}', env).value).toBe('dflt');
    expect(interpolateString('${env:EMPTY:-dflt}', env).value).toBe('dflt');
    expect(interpolateString('${env:EMPTY}', env)).toMatchObject({ value: '', errors: [] });
    expect(interpolateString('${env:B:-}', env)).toMatchObject({ value: '', errors: [] });
    expect(interpolateString('no refs ${other} {env:A}', env)).toMatchObject({
      value: 'no refs ${other} {env:A}',
      changed: false,
    });
  });

  it('reports unset variables and malformed references', () => {
    expect(interpolateString('a ${env:NOPE} b', {}).errors).toEqual([
      'environment variable NOPE is not set (set it, or give a default: ${env:NOPE:-default})',
    ]);
    expect(interpolateString('${env:1X}', {}).errors).toEqual([
      'malformed reference "${env:1X}": use ${env:NAME} or ${env:NAME:-default} (NAME: letters, digits, underscores; the default may itself hold references), or $${ for a literal ${',
    ]);
  });

  it('unescapes $${env:...}, and escapeInterpolation is its exact inverse', () => {
    expect(interpolateString('$${env:A}', { A: 'x' }).value).toBe('${env:A}');
    expect(interpolateString('$${env:NOT_SET}', {}).errors).toEqual([]);
    for (const s of ['${env:A}', 'a$${env:A}', '$$${env:A:-d}', 'plain', '${env:}', 'x ${env:A} y ${env:B:-z}']) {
      expect(interpolateString(escapeInterpolation(s), { A: 'set', B: 'set' })).toMatchObject({ value: s, errors: [] });
    }
  });
});

describe('interpolation in files', () => {
  const file = `apiVersion: kms-sync/v1
projects:
  - slug: acme
    name: \${env:PROJECT_NAME}
    description: "Owner: \${env:OWNER:-platform} ($\${env:LITERAL})"
    environments:
      - type: production
        url: \${env:PROD_URL:-https://api.acme.example}
        templates:
          - name: gold
            rateLimitDay: \${env:GOLD_LIMIT:-1000}
            maxClients: \${env:GOLD_MAX:-5}
`;
  const quoted = file.replace('maxClients: ${env:GOLD_MAX:-5}', 'maxClients: "${env:GOLD_MAX:-5}"');

  it('applies values, defaults and escapes before validation; plain sole references are typed', async () => {
    const { state } = await stateOf({ 'a.yaml': file }, { env: { PROJECT_NAME: 'Acme Corp', GOLD_LIMIT: '250' } });
    expect(state.projects[0]).toMatchObject({ name: 'Acme Corp', description: 'Owner: platform (${env:LITERAL})' });
    expect(state.envs[0]?.url).toBe('https://api.acme.example');
    expect(state.templates[0]).toMatchObject({ rateLimitDay: 250, maxClients: 5 });
  });

  it('keeps quoted scalars strings (then the schema says so)', async () => {
    expect(await errorsOf({ 'a.yaml': quoted }, { env: { PROJECT_NAME: 'Acme' } })).toEqual([
      'a.yaml:12:25: projects[0].environments[0].templates[0].maxClients: must be an integer (got "5")',
    ]);
  });

  it('reports an unset variable without default at the scalar, once', async () => {
    expect(await errorsOf({ 'a.yaml': file }, { env: { GOLD_MAX: 'x' } })).toEqual([
      'a.yaml:4:11: projects[0].name: environment variable PROJECT_NAME is not set (set it, or give a default: ${env:PROJECT_NAME:-default})',
      'a.yaml:12:25: projects[0].environments[0].templates[0].maxClients: must be an integer (got "x")',
    ]);
    expect(
      await errorsOf(
        { 'a.yaml': file.replace('${env:GOLD_LIMIT:-1000}', '${env:GOLD_LIMIT}') },
        { env: { PROJECT_NAME: 'A' } },
      ),
    ).toEqual([
      'a.yaml:11:27: projects[0].environments[0].templates[0].rateLimitDay: environment variable GOLD_LIMIT is not set (set it, or give a default: ${env:GOLD_LIMIT:-default})',
    ]);
  });

  it('cannot inject YAML structure', async () => {
    const team = `${TEAM_HEAD}        clients:
          - name: \${env:NAME}
            template: gold
            metadata: { note: "\${env:NOTE}" }
`;
    const evil = 'globex\n            protected: true\n            keys: [{name: x}]';
    const { state } = await stateOf({ 'p.yaml': PROJECT, 't.yaml': team }, { env: { NAME: evil, NOTE: '{a: 1}' } });
    expect(state.clients[0]).toMatchObject({ name: evil, keys: [], metadata: { note: '{a: 1}' } });
    expect(state.clients[0]?.protected).toBeUndefined();
  });

  it('does not interpolate keys', async () => {
    const team = `${TEAM_HEAD}        clients:
          - name: globex
            template: gold
            metadata: { "\${env:K}": v }
`;
    const { state } = await stateOf({ 'p.yaml': PROJECT, 't.yaml': team }, { env: {} });
    expect(state.clients[0]?.metadata).toEqual({ '${env:K}': 'v' });
  });

  it('uses process.env when no env is given, under the default policy (which allows no variable) unless another is given', async () => {
    const { writeTree } = await import('./helpers.js');
    const { loadDesiredState } = await import('../../src/config/index.js');
    const { DEFAULT_POLICY } = await import('../../src/model/policy.js');
    const dir = await writeTree({
      'a.yaml': 'apiVersion: kms-sync/v1\nstores:\n  - { name: s, uri: "${env:KMS_SYNC_TEST_URI}" }\n',
    });
    process.env.KMS_SYNC_TEST_URI = 'file:./from-process-env';
    try {
      await expect(loadDesiredState(['.'], { cwd: dir })).rejects.toThrow(
        /environment variable KMS_SYNC_TEST_URI is not allowed by the operator policy/,
      );
      const { state } = await loadDesiredState(['.'], {
        cwd: dir,
        policy: { ...DEFAULT_POLICY, envAllow: ['KMS_SYNC_TEST_*'] },
      });
      expect(state.stores[0]?.uri).toBe('file:./from-process-env');
      expect(state.envReferences).toEqual(['KMS_SYNC_TEST_URI']);
    } finally {
      delete process.env.KMS_SYNC_TEST_URI;
    }
  });
});
