// Bad input to the config loader gets a clear answer (issue 14): encodings, interpolation, empty
// files, deep nesting, odd keys, alias bombs, terminal escapes, floods of errors, store URIs and
// secret names. In-process where the loader alone answers; real CLI processes for exit codes,
// stderr and the commands' own checks.
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, formatDiagnostics, loadDesiredState } from '../../src/config/index.js';
import { runCli } from '../support/cli.js';
import { PROJECT, asData, errorsOf, stateOf, writeTree } from './helpers.js';

async function bytesErrors(name: string, bytes: Uint8Array): Promise<string[]> {
  const dir = await writeTree({});
  await writeFile(path.join(dir, name), bytes);
  const err = await loadDesiredState(['.'], { cwd: dir, env: {} }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ConfigError);
  return formatDiagnostics((err as ConfigError).diagnostics).split('\n');
}

describe('encodings', () => {
  it('rejects invalid UTF-8 at its line and column instead of replacing it', async () => {
    const text = Buffer.concat([
      Buffer.from('apiVersion: kms-sync/v1\nprojects:\n  - slug: acme\n    name: Caf'),
      Buffer.from([0xe9, 0x20]),
      Buffer.from('Test\n'),
    ]);
    expect(await bytesErrors('a.yaml', text)).toEqual([
      'a.yaml:4:14: (top level): the file is not valid UTF-8 (bytes E9 20 54 65 at byte 62); save it as UTF-8',
    ]);
  });

  it.each([
    [
      'a BOM (little-endian)',
      Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('apiVersion: kms-sync/v1\n', 'utf16le')]),
      'UTF-16 (little-endian, with a byte-order mark)',
    ],
    [
      'a BOM (big-endian)',
      Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from('apiVersion: kms-sync/v1\n', 'utf16le').swap16()]),
      'UTF-16 (big-endian, with a byte-order mark)',
    ],
    ['no BOM (NUL bytes)', Buffer.from('apiVersion: kms-sync/v1\n', 'utf16le'), 'UTF-16 (little-endian)'],
  ])('names UTF-16 with %s', async (_, bytes, what) => {
    expect(await bytesErrors('a.yaml', bytes)).toEqual([
      `a.yaml:1:1: (top level): the file is encoded as ${what}; save it as UTF-8`,
    ]);
  });

  it('accepts a UTF-8 byte-order mark', async () => {
    const dir = await writeTree({});
    await writeFile(path.join(dir, 'a.yaml'), Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(PROJECT)]));
    const r = await loadDesiredState(['.'], { cwd: dir, env: {} });
    expect(r.state.projects.map((p) => p.slug)).toEqual(['acme']);
  });
});

describe('interpolation', () => {
  const file = (value: string) => `apiVersion: kms-sync/v1\nprojects:\n  - slug: acme\n    name: "${value}"\n`;
  it('nests defaults: ${env:A:-${env:B:-x}}', async () => {
    const load = (env: Record<string, string>) =>
      stateOf({ 'a.yaml': file('${env:A:-${env:B:-fallback}}') }, { env }).then((r) => r.state.projects[0]!.name);
    expect(await load({})).toBe('fallback');
    expect(await load({ B: 'bee' })).toBe('bee');
    expect(await load({ A: 'ay', B: 'bee' })).toBe('ay');
  });

  it('an unset variable inside a default is an error, never a literal ${…}', async () => {
    expect(await errorsOf({ 'a.yaml': file('${env:A:-${env:B}}') })).toEqual([
      'a.yaml:4:11: projects[0].name: environment variable B is not set (set it, or give a default: ${env:B:-default})',
    ]);
  });

  it('rejects any other ${…}; $${ is a literal ${', async () => {
    const errors = await errorsOf({ 'a.yaml': file('${HOME} and ${ENV:A}') });
    expect(errors).toHaveLength(2);
    expect(errors[0]).toMatch(/^a\.yaml:4:11: projects\[0\]\.name: malformed reference "\$\{HOME\}": /);
    const { state } = await stateOf({ 'a.yaml': file('$${HOME}') });
    expect(state.projects[0]!.name).toBe('${HOME}');
  });
});

describe('empty configurations', () => {
  it.each([
    ['empty', ''],
    ['comments only', '# nothing yet\n'],
    ['a lone ---', '---\n'],
  ])('an %s file is a warning, not an error', async (_, text) => {
    const dir = await writeTree({ 'a.yaml': text, 'b.yaml': PROJECT });
    const r = await loadDesiredState(['.'], { cwd: dir, env: {} });
    expect(r.warnings.map((w) => `${w.file}:${w.line}: ${w.message}`)).toEqual([
      'a.yaml:1: the file is empty (no document, or only comments or "---"): it defines nothing',
    ]);
  });

  it('validate warns; plan with no environment in scope is an error unless --allow-empty', async () => {
    const dir = await writeTree({ 'a.yaml': '# nothing yet\n' });
    const v = await runCli(['validate', '-f', 'a.yaml'], { cwd: dir });
    expect(v.code).toBe(0);
    expect(v.stderr).toContain('warning: a.yaml:1:1: (top level): the file is empty');
    const env = { KMS_API_URL: 'http://127.0.0.1:9/api/v1', KMS_API_KEY: 'sk_test_nothing_listens_here' };
    const p = await runCli(['plan', '-f', 'a.yaml'], { cwd: dir, env });
    expect(p.code).toBe(1);
    expect(p.stderr).toContain('nothing in scope');
  });
});

describe('YAML structure', () => {
  it('refuses deep nesting at the place it goes too deep, without a stack overflow', async () => {
    const errors = await errorsOf({
      'a.yaml': `apiVersion: kms-sync/v1\nprojects: ${'['.repeat(5000)}${']'.repeat(5000)}\n`,
    });
    expect(errors).toEqual(['a.yaml:2:111: (top level): YAML: nesting deeper than 100 levels']);
  });

  it('a key that is a collection is an error at the key, with the path of its mapping', async () => {
    const errors = await errorsOf({
      'a.yaml': 'apiVersion: kms-sync/v1\nprojects:\n  - slug: acme\n    ? [a, b]\n    : x\n',
    });
    expect(errors).toEqual(['a.yaml:4:7: projects[0]: a mapping key must be a plain value, not a list']);
  });

  it('a duplicate key names the field and both places', async () => {
    const errors = await errorsOf({
      'a.yaml': 'apiVersion: kms-sync/v1\nprojects:\n  - slug: acme\n    name: A\n    name: B\n',
    });
    expect(errors).toEqual([
      'a.yaml:5:5: projects[0].name: duplicate key "name" in this mapping (first at line 4, column 5)',
    ]);
  });

  it('an alias bomb is stopped at its first alias', async () => {
    const lines = ['apiVersion: kms-sync/v1', 'x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]'];
    for (let i = 1; i < 10; i++)
      lines.push(
        `x${i}: &a${i} [${Array(9)
          .fill(`*a${i - 1}`)
          .join(', ')}]`,
      );
    const errors = await errorsOf({ 'a.yaml': `${lines.join('\n')}\n` });
    expect(errors).toEqual([
      expect.stringMatching(/^a\.yaml:3:10: x1\[0\]: YAML: aliases here expand to more than 1000 nodes/),
    ]);
  });

  it('no Node warning or stack trace reaches stderr (collection keys, deep nesting)', async () => {
    const dir = await writeTree({
      'a.yaml': 'apiVersion: kms-sync/v1\n? { a: 1 }\n: x\n',
      'b.yaml': `x: ${'['.repeat(3000)}\n`,
    });
    const r = await runCli(['validate', '-f', '.'], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).not.toMatch(/Warning|\bat .+:\d+:\d+\)|RangeError|Maximum call stack/);
    expect(r.stderr).toContain('a.yaml:2:3: (top level): a mapping key must be a plain value, not a mapping');
  });
});

describe('messages', () => {
  it('escapes control characters and ANSI escapes from the configuration', async () => {
    const file = `apiVersion: kms-sync/v1
projects:
  - slug: acme
    name: Acme
    environments:
      - type: production
        url: https://api.acme.example
        templates: [{ name: gold, rateLimitDay: 10 }]
        clients:
          - { name: x, template: "gold\\e[2J\\u202e" }
`;
    const errors = await errorsOf({ 'a.yaml': file });
    const text = errors.join('\n');
    expect(text).not.toMatch(/[\u001b\u202e]/);
    expect(text).toContain('gold\\u001b[2J\\u202e');
  });

  it('lists at most 50 problems, then counts the rest', async () => {
    const clients = Array.from(
      { length: 3000 },
      (_, i) => `          - { name: c${i}, template: gold, colour: red }`,
    ).join('\n');
    const file = `${PROJECT.replace('      - type: staging\n        url: https://staging.acme.example\n        templates:\n          - { name: sandbox, rateLimitDay: 10 }\n', '')}        clients:\n${clients}\n`;
    const dir = await writeTree({ 'a.yaml': file });
    const err = (await loadDesiredState(['.'], { cwd: dir, env: {} }).catch((e: unknown) => e)) as ConfigError;
    expect(err.diagnostics).toHaveLength(3000);
    const lines = formatDiagnostics(err.diagnostics).split('\n');
    expect(lines).toHaveLength(51);
    expect(lines[50]).toBe('…and 2950 more (3000 problems in all; fix these first)');
  });
});

describe('store URIs and secret names (validate)', () => {
  it('an unknown store scheme points at the store URI, an empty name segment at the secret name', async () => {
    const dir = await writeTree({
      'a.yaml': `apiVersion: kms-sync/v1
stores:
  - { name: vault1, uri: "vualt://v:8200/secret/kms" }
projects:
  - slug: acme
    name: Acme
    environments:
      - type: production
        url: https://api.acme.example
        templates: [{ name: gold, rateLimitDay: 10 }]
        clients:
          - name: globex
            template: gold
            keys:
              - { name: a, secret: { store: vault1 } }
              - { name: b, secret: { store: vault1 } }
              - { name: c, secret: { name: "acme//c" } }
`,
    });
    const r = await runCli(['validate', '-f', 'a.yaml'], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).not.toContain('collide');
    const lines = r.stderr.trim().split('\n');
    expect(lines[0]).toBe('Error: configuration is not valid:');
    expect(lines[1]).toMatch(/^a\.yaml:3:5: stores\[0\]\.uri: unknown store scheme 'vualt:'/);
    expect(lines[2]).toMatch(
      /^a\.yaml:17:17: projects\[0\]\.environments\[0\]\.clients\[0\]\.keys\[2\]\.secret\.name: .*invalid logical secret name 'acme\/\/c': empty segment/,
    );
    expect(lines).toHaveLength(3);
  });
});

/** `line:column` (1-based) of the first occurrence of `needle` in `text`. */
function placeOf(text: string, needle: string): string {
  const at = text.indexOf(needle);
  if (at < 0) throw new Error(`${needle} not in the text`);
  const before = text.slice(0, at).split('\n');
  return `${before.length}:${before.at(-1)!.length + 1}`;
}

describe('JSON configurations', () => {
  const yaml = PROJECT;
  const json = JSON.stringify(
    {
      apiVersion: 'kms-sync/v1',
      projects: [
        {
          slug: 'acme',
          name: 'Acme',
          environments: [
            {
              type: 'production',
              url: 'https://api.acme.example',
              templates: [
                { name: 'gold', rateLimitDay: 100, maxClients: 5 },
                { name: 'bronze', rateLimitDay: 10 },
              ],
            },
            {
              type: 'staging',
              url: 'https://staging.acme.example',
              templates: [{ name: 'sandbox', rateLimitDay: 10 }],
            },
          ],
        },
      ],
    },
    null,
    2,
  );

  it('gives the same desired state as the YAML it mirrors', async () => {
    const a = await stateOf({ 'a.yaml': yaml });
    const b = await stateOf({ 'a.json': json });
    const strip = (s: unknown) => JSON.parse(JSON.stringify(s, (k, v: unknown) => (k === 'source' ? undefined : v)));
    expect(strip(b.state)).toEqual(strip(a.state));
    expect(asData(b.state.templates[0]!.source)).toEqual({
      file: 'a.json',
      line: 17,
      column: 13,
      path: 'projects[0].environments[0].templates[1]',
    });
  });

  it('reports schema errors, syntax errors and duplicate keys with line, column and field path', async () => {
    expect(await errorsOf({ 'a.json': json.replace('"rateLimitDay": 100', '"rateLimitDay": "lots"') })).toEqual([
      'a.json:14:31: projects[0].environments[0].templates[0].rateLimitDay: must be an integer (got "lots")',
    ]);
    expect(
      await errorsOf({
        'a.json': '{\n  "apiVersion": "kms-sync/v1",\n  "projects": [\n    { "slug": "acme", }\n  ]\n}\n',
      }),
    ).toEqual(['a.json:4:23: projects[0]: JSON: expected a key in double quotes, found character "}"']);
    expect(await errorsOf({ 'a.json': '{"apiVersion": "kms-sync/v1",\n "apiVersion": "kms-sync/v1"}' })).toEqual([
      'a.json:2:2: apiVersion: duplicate key "apiVersion" in this object (first at line 1, column 2)',
    ]);
  });

  it('finds duplicate keys that JSON.parse would merge, whatever the strings around them hold', async () => {
    // Colons, quotes and backslashes inside strings must not hide the second key from the count.
    const tricky = '{"apiVersion": "kms-sync/v1", "owner": "a:\\"b\\":\\\\",\n "owner": "c\\\\"}';
    expect(await errorsOf({ 'a.json': tricky })).toEqual([
      'a.json:2:2: owner: duplicate key "owner" in this object (first at line 1, column 31)',
    ]);
    const nested = json.replace('"name": "bronze"', '"name": "bronze", "name": "br:onze"');
    const first = placeOf(nested, '"name": "bronze"');
    expect(await errorsOf({ 'a.json': nested })).toEqual([
      `a.json:${placeOf(nested, '"name": "br:onze"')}: projects[0].environments[0].templates[1].name: duplicate key "name" in this object ` +
        `(first at line ${first.split(':')[0]}, column ${first.split(':')[1]})`,
    ]);
  });

  it('places interpolation and later errors of a clean JSON file at their line and column', async () => {
    const withRef = json.replace('"url": "https://staging.acme.example"', '"url": "${env:STAGING_URL}"');
    expect(await errorsOf({ 'a.json': withRef })).toEqual([
      `a.json:${placeOf(withRef, '"${env:STAGING_URL}"')}: projects[0].environments[1].url: environment variable STAGING_URL is not set ` +
        '(set it, or give a default: ${env:STAGING_URL:-default})',
    ]);
    const { state } = await stateOf({ 'a.json': withRef }, { env: { STAGING_URL: 'https://s.acme.example' } });
    expect(state.envs.find((e) => e.type === 'staging')?.url).toBe('https://s.acme.example');
    const badSlug = json.replace('"slug": "acme"', '"slug": "Acme!"');
    expect(await errorsOf({ 'a.json': badSlug })).toEqual([
      expect.stringMatching(new RegExp(`^a\\.json:${placeOf(badSlug, '"Acme!"')}: projects\\[0\\]\\.slug: `)),
    ]);
  });

  it('refuses nesting deeper than 100 levels as the YAML path does, with a place', async () => {
    const deep = `{"apiVersion": "kms-sync/v1", "x": ${'['.repeat(120)}${']'.repeat(120)}}`;
    expect(await errorsOf({ 'a.json': deep })).toEqual([
      expect.stringMatching(/^a\.json:1:\d+: .*JSON: nesting deeper than 100 levels/),
    ]);
  });

  it('in a folder, reads the JSON files of the format and leaves package.json, tsconfig.json and saved plans alone', async () => {
    const dir = await writeTree({
      'a.json': json,
      'b.json': '{"projects": []}',
      'package.json': '{"name": "x"}',
      'plan.json': '{"kind": "kms-sync/saved-plan"}',
    });
    const err = (await loadDesiredState(['.'], { cwd: dir, env: {} }).catch((e: unknown) => e)) as ConfigError;
    // b.json is read (and is missing its apiVersion); the others are not configuration.
    expect(formatDiagnostics(err.diagnostics)).toBe('b.json:1:1: (top level): missing required field "apiVersion"');
    const named = await loadDesiredState(['a.json', 'package.json'], { cwd: dir, env: {} }).catch((e: unknown) => e);
    expect(formatDiagnostics((named as ConfigError).diagnostics)).toMatch(
      /^package\.json:1:1: \(top level\): missing required field "apiVersion"/,
    );
  });
});
