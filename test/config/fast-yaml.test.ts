// The fast YAML reader (config/fast-yaml.ts) against the `yaml` package on documents that repeat
// keys the way configurations do: the reader reuses a key string it has read when the same text
// comes again (Reader.knownKeys), and must still give exactly the values `yaml` gives.
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { fastParseYaml } from '../../src/config/fast-yaml.js';

const sameAsYaml = (text: string) => {
  const fast = fastParseYaml(text, false);
  expect(fast, `the fast reader gave up on:\n${text}`).toBeDefined();
  expect(isDeepStrictEqual(fast!.value, parse(text)), `differs from yaml:\n${text}`).toBe(true);
  return fast!.value;
};

describe('fast YAML reader, repeated keys', () => {
  it('keys alike in first character and length, prefixes of each other, and with spaces before the colon', () => {
    const value = sameAsYaml(`clients:
  - name: a
    nbme: b
    name2: c
    nam: d
  - name  : e
    nbme: f
    "name2": g
    'nam': h
  - nbme: i
    name: j
    n: k
    names: l
`) as { clients: Record<string, string>[] };
    expect(value.clients.map((c) => Object.keys(c))).toEqual([
      ['name', 'nbme', 'name2', 'nam'],
      ['name', 'nbme', 'name2', 'nam'],
      ['nbme', 'name', 'n', 'names'],
    ]);
    expect(value.clients[1]).toEqual({ name: 'e', nbme: 'f', name2: 'g', nam: 'h' });
  });

  it('a key read before is still refused where it repeats in one mapping, and keys the core schema retypes still go to the full parser', () => {
    expect(fastParseYaml('a:\n  name: x\nb:\n  name: y\n  name: z\n', false)).toBeUndefined();
    expect(fastParseYaml('a:\n  tru: 1\nb:\n  true: 2\n', false)).toBeUndefined();
    sameAsYaml('a:\n  tru: 1\nb:\n  tru: 2\n  truE: 3\n');
  });

  it('many distinct keys sharing slots', () => {
    const keys = Array.from({ length: 600 }, (_, i) => `k${i.toString(36)}`);
    const text = `${[0, 1, 2].map((n) => `m${n}:\n${keys.map((k, i) => `  ${k}: ${i * (n + 1)}`).join('\n')}`).join('\n')}\n`;
    const value = sameAsYaml(text) as Record<string, Record<string, number>>;
    expect(value.m2!.k10).toBe(36 * 3);
  });

  it('plain scalars of every core-schema type, in blocks and in flows', () => {
    const scalars = [
      '/r/1',
      '~',
      '',
      '-1',
      '+1',
      '.5',
      '-.5',
      '5.',
      '.inf',
      '-.Inf',
      '.NaN',
      'null',
      'Null',
      'NULL',
      'true',
      'False',
      '0x1F',
      '0o17',
      '017',
      '1e3',
      '-1E-3',
      '10.0.0.0/8',
      '1.2.3',
      '+',
      '-x',
      '.x',
      '~x',
      '_x',
      '=x',
      '$x',
      'x y',
    ];
    const text = `block:\n${scalars.map((v, i) => `  k${i}: ${v}`).join('\n')}\nflow: [${scalars.filter((v) => v !== '').join(', ')}]\n`;
    const value = sameAsYaml(text) as { block: Record<string, unknown> };
    expect(value.block.k0).toBe('/r/1');
    expect(value.block.k3).toBe(-1);
  });
});

describe('fast YAML reader, characters it leaves to the full parser', () => {
  it('CRLF line ends are read; a CR inside a line, a tab, a control or a line-separator character are refused', () => {
    sameAsYaml('a: 1\r\nb:\r\n  - x\r\n  - y\r\n');
    for (const odd of [
      'a: 1\rb: 2\n',
      'a: x\ry\n',
      'a: 1\r',
      'a:\t1\n',
      'a: b\u0007c\n',
      'a: b\u2028c\n',
      '\ufeffa: 1\n',
      'a: b\u0085c\n',
    ]) {
      expect(fastParseYaml(odd, false), JSON.stringify(odd)).toBeUndefined();
    }
  });
});

describe('fast YAML reader, quoted scalars with many escapes', () => {
  it('gives what yaml gives for values of thousands of escapes and runs, across the lots they are joined in', () => {
    // Escapes of every kind between runs of every length, more than 1,024 pieces in one value, so
    // the value is joined from several lots (config/fast-yaml.ts, Pieces).
    const escapes = ['\\"', '\\\\', '\\n', '\\t', '\\x41', '\\u00e9', '\\U0001F600', '\\/', '\\0'];
    let double = '';
    let single = '';
    for (let i = 0; i < 5_000; i++) {
      double += `${'r'.repeat(i % 7)}${escapes[i % escapes.length]}`;
      single += `${'s'.repeat(i % 5)}''`;
    }
    const value = sameAsYaml(`a: "${double}"\nb: '${single}'\nc: "plain"\nd: 'plain'\ne: ""\nf: ''\n`) as Record<
      string,
      string
    >;
    expect(value.b?.startsWith("'s'ss'sss'ssss''s'")).toBe(true);
    expect(value.c).toBe('plain');
  });
});
