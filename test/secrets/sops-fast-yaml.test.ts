// The store's own YAML reader and emitter (src/secrets/sops/fast-yaml.ts) against the `yaml`
// package: where they accept a text or a tree, they give exactly what the `yaml` package gives (the
// same tree, byte for byte the same text); elsewhere they decline, and the `yaml` package is used.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  emitSopsYaml,
  emitWithYamlPackage,
  map,
  parseWithYamlPackage,
  parseYamlTree,
  scalar,
  type FragmentCache,
  type SMap,
  type SNode,
  type ScalarValue,
} from '../../src/secrets/sops/document.js';
import { emitPair, readStoreYaml, type EntrySlices } from '../../src/secrets/sops/fast-yaml.js';

const enc = () =>
  `ENC[AES256_GCM,data:${randomBytes(24).toString('base64')},iv:${randomBytes(32).toString('base64')},tag:${randomBytes(16).toString('base64')},type:str]`;
const armored = () =>
  `-----BEGIN AGE ENCRYPTED FILE-----\n${randomBytes(48).toString('base64')}\n${randomBytes(20).toString('base64')}\n-----END AGE ENCRYPTED FILE-----\n`;

const entry = (name: string, fields: [string, ScalarValue][] = []): [string, SNode] => [
  name,
  map([
    ['value', scalar(enc())],
    ['projectEnv', scalar('p-prod')],
    ['client', scalar('web')],
    ['key', scalar('primary')],
    ['keyId', scalar('0b8f8a4e-2f0e-4d7c-9a59-6b3d1f0c2a11')],
    ['issuedAt', scalar('2026-01-02T03:04:05.000Z')],
    ['expiresAt', scalar(null)],
    ...fields.map(([k, v]): [string, SNode] => [k, scalar(v)]),
  ]),
];

const sopsOf = (extra: [string, SNode][] = []): SMap =>
  map([
    [
      'age',
      {
        kind: 'seq',
        items: [
          map([
            ['recipient', scalar('age1qqqexample')],
            ['enc', scalar(armored())],
          ]),
          map([
            ['recipient', scalar('age1second')],
            ['enc', scalar(armored())],
          ]),
        ],
      },
    ],
    ['lastmodified', scalar('2026-11-24T01:08:07Z')],
    ['mac', scalar(enc())],
    ['encrypted_regex', scalar('^value$')],
    ['version', scalar('3.10.2')],
    ...extra,
  ]);

// Names and values that are quoted, escaped, typed or shaped in every way the emitter must decide on.
const NAMES = [
  'a/b/c',
  'p-prod/web/primary',
  'yes',
  'no',
  'true',
  'null',
  '~',
  '123',
  '1.5',
  'x: y',
  '#hash',
  'a #b',
  'needs "quotes"',
  'back\\slash',
  'ünï/cödé',
  '',
  ' lead',
  'trail ',
  'tab\there',
  '-dash',
  '?q',
  'a,b',
  '[x]',
  '{y}',
  '&a',
  '*b',
  '!t',
  '%p',
  '@at',
  '`bt',
  "it's",
  'x'.repeat(1100),
];
const VALUES: ScalarValue[] = [
  'plain',
  '',
  'yes',
  'null',
  '123',
  '0x1F',
  '1e3',
  '.inf',
  'two\nlines',
  'end\n',
  ' lead',
  'trail ',
  'q"uote',
  'b\\s',
  'ü',
  'a: b',
  'a #b',
  '#x',
  '-',
  '- x',
  '[x]',
  'tab\t',
  'ENC[AES256_GCM,data:,iv:x,tag:y,type:str]',
  'ENC[odd value]',
  0,
  42,
  -1,
  1.5,
  true,
  false,
  null,
  // service targets (the entry field `target`): a URL with a fragment, a declared free-form one
  'https://kms.example.com/api/v1#live',
  'http://127.0.0.1:8080/api#test',
  'Prod EU (blue) #2 – ü=1?&',
];

describe('fast emitter', () => {
  it('writes every entry it takes byte for byte as the yaml package does, and declines the rest', () => {
    let taken = 0;
    const sops = sopsOf();
    for (const name of NAMES) {
      for (const v of VALUES) {
        const data = map([['secrets', map([entry(name, [['note', v]])])]]);
        const yaml = emitWithYamlPackage(data, sops);
        expect(emitSopsYaml(data, sops)).toBe(yaml);
        const fast = emitPair('secrets', data.entries[0]![1], 'data', 0);
        if (fast !== undefined) {
          taken++;
          expect(yaml.startsWith(fast)).toBe(true);
        }
      }
    }
    expect(taken).toBeGreaterThan(100); // the usual entries do take the fast path
  });

  it('writes the sops mapping as the yaml package does, unknown keys included', () => {
    const extras: [string, SNode][][] = [
      [],
      [['mac_only_encrypted', scalar(true)]],
      [
        ['kms', { kind: 'seq', items: [] }],
        ['gcp_kms', map()],
      ],
      [['shamir_threshold', scalar(0)]],
      [['note', scalar('yes')]],
      [['note', scalar('1.5')]],
      [['note', scalar('a b')]],
      [['unencrypted_suffix', scalar('_unencrypted')]],
      [['list', { kind: 'seq', items: [scalar('a'), scalar('b c'), scalar(null)] }]],
      [['nested', map([['deep', map([['x', scalar('y')]])]])]],
      [['lit', scalar('one\ntwo\n')]],
      [['lit', scalar('no final break')]],
      [['lit', scalar('two breaks\n\n')]],
      [['lit', scalar('  indented\n')]],
    ];
    const data = map([['secrets', map([entry('a/b/c')])]]);
    for (const extra of extras) {
      const sops = sopsOf(extra);
      expect(emitSopsYaml(data, sops)).toBe(emitWithYamlPackage(data, sops));
    }
    expect(emitPair('sops', sopsOf(), 'sops', 0)).toBeDefined();
  });
});

describe('fast reader', () => {
  const same = (text: string) => {
    const fast = readStoreYaml(text);
    if (fast !== undefined) expect(fast).toEqual(parseWithYamlPackage(text));
    return fast !== undefined;
  };

  it("reads what the emitter writes to the same tree as the yaml package, with each entry's text", () => {
    const data = map([
      [
        'secrets',
        map([...Array.from({ length: 50 }, (_, i) => entry(`e/c${i}/k`)), entry('needs space'), entry('yes')]),
      ],
    ]);
    const text = emitSopsYaml(data, sopsOf());
    const slices: EntrySlices = [];
    const tree = readStoreYaml(text, slices);
    expect(tree).toEqual(parseWithYamlPackage(text));
    expect(slices.map(([, s]) => s.name)).toEqual(
      data.entries[0]![1].kind === 'map' ? data.entries[0]![1].entries.map(([k]) => k) : [],
    );
    expect(`secrets:\n${slices.map(([, s]) => s.text).join('')}`).toBe(text.slice(0, text.indexOf('sops:\n')));
    const cache: FragmentCache = new WeakMap();
    expect(parseYamlTree(text, cache)).toEqual(tree);
  });

  it('agrees with the yaml package on every variant it accepts, and declines the others', () => {
    const all: ScalarValue[] = VALUES;
    for (const name of NAMES) {
      for (const v of all) {
        const text = emitWithYamlPackage(map([['secrets', map([entry(name, [['note', v]])])]]), sopsOf());
        same(text);
      }
    }
    const base = emitWithYamlPackage(map([['secrets', map([entry('a/b/c'), entry('d/e/f')])]]), sopsOf());
    const variants = [
      base.replace('secrets:\n', '# a comment\nsecrets:\n'),
      base.replace(/\n {4}d\/e\/f:/, '\n\n    d/e/f:'),
      base.replace(/ {8}client: "web"/, '        client: web # note'),
      base.replace(/ {8}client: "web"/, '        client:   "web"'),
      base.replace(/ {8}client: "web"/, '        client: "web"  '),
      base.replace(/ {8}client: "web"/, "        client: 'web'"),
      base.replace(/ {8}client: "web"/, '        client: "w\\u0065b"'),
      base.replace(/ {8}client: "web"/, '        client: 0x1F'),
      base.replace(/ {8}client: "web"/, '        client: 1.0'),
      base.replace(/ {8}client: "web"/, '        client: 007'),
      base.replace(/ {8}client: "web"/, '        client: True'),
      base.replace(/ {8}client: "web"/, '        client: ~'),
      base.replace(/ {8}client: "web"/, '        client:'),
      base.replace(/ {8}client: "web"/, '        client: &a web'),
      base.replace(/ {8}client: "web"/, '        client: [a, b]'),
      base.replace(/ {8}client: "web"/, '        client: {a: b}'),
      base.replace(/ {8}client: "web"/, '        client: "web"\n        client: "again"'),
      base.replace(/ {8}client: "web"/, '        "client": "web"'),
      base.replace(/ {8}client: "web"/, '        null: "web"'),
      base.replace(/ {8}client: "web"/, '        client: web:x'),
      base.replace(/ {8}client: "web"/, '        client: >\n            folded'),
      base.replace(/ {8}client: "web"/, '        client: |-\n            kept'),
      base.replace(/ {8}client: "web"/, '        client: |\n            a\n              b'),
      base.replace(/ {8}client: "web"/, '        client: |\n          under'),
      base.replace(/ {8}client: "web"/, '        client:\n            - a\n            - b'),
      base.replace(/ {8}client: "web"/, '        client:\n        - a'),
      base.replace(/ {8}client: "web"/, '        client:\n            -\n                x: y'),
      base.replace(/ {8}client: "web"/, '       client: "web"'),
      base.replace(/ {8}client: "web"/, '         client: "web"'),
      base.replace(/ {8}client: "web"/, '\tclient: "web"'),
      base.replace('\n', '\r\n'),
      base.replace(/\n$/, ''),
      `---\n${base}`,
      `${base}---\nother: doc\n`,
      base.replace('secrets:', 'secrets: &s'),
      base.replace('ENC[', 'ENC ['),
      base.replace(/ {8}client: "web"/, '        client: "a # b"'),
      base.replace(/ {8}client: "web"/, '        client: a#b'),
      base.replace(/ {8}client: "web"/, '        client: -x'),
      base.replace(/ {8}client: "web"/, '        client: ?x'),
      base.replace(/ {8}client: "web"/, '        client: 12'),
    ];
    const accepted = variants.filter(same);
    // Only the plain variants that mean the same tree are taken; the rest go to the yaml package.
    expect(accepted.length).toBeGreaterThan(0);
    expect(accepted.length).toBeLessThan(variants.length / 2);
    expect(same(base)).toBe(true);
  });
});
