// The default store at scale does work proportional to what changes: a rewrite emits and
// re-verifies only the entries that changed, decrypts only new values, and the file it writes is
// byte for byte what the whole-document emitter writes.
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import { parse, stringify } from 'yaml';
import {
  decryptTree,
  emitSopsYaml,
  emitSopsImage,
  encryptSubtree,
  map,
  parseYamlTree,
  scalar,
  type FragmentCache,
  type SMap,
  type SNode,
  walkLeaves,
} from '../../src/secrets/sops/document.js';
import { decryptSopsValue, encryptBytes, encryptSopsString, freshIv, macBytes } from '../../src/secrets/sops/cipher.js';
import { KMS_SYNC_RULES, SopsFileStore } from '../../src/secrets/sops/file-store.js';
import { fakeKey, meta, sandbox, type Sandbox } from './helpers.js';
import { xorshift32 } from '../support/xorshift.js';

let sb: Sandbox;
beforeEach(async () => {
  sb = await sandbox();
});
afterEach(async () => {
  await sb.cleanup();
});

const entry = (i: number, extra: [string, SNode][] = []): [string, SNode] => [
  `p-prod/c${i}/k`,
  map([
    ['value', scalar(`ENC[AES256_GCM,data:${'A'.repeat(8)}${i},iv:x,tag:y,type:str]`)],
    ['projectEnv', scalar('p-prod')],
    ['client', scalar(`c${i}`)],
    ['expiresAt', scalar(null)],
    ['note', scalar(i % 3 === 0 ? 'two\nlines' : i % 3 === 1 ? 'yes' : '123')],
    ...extra,
  ]),
];

describe('incremental emission', () => {
  it('equals the whole-document emitter, and emits only new entries on the next write', () => {
    const names = ['a', 'needs "quotes"', 'ünï/cödé', 'true', '123', 'x: y', '#hash', ''];
    const secrets = map([
      ...Array.from({ length: 20 }, (_, i) => entry(i)),
      ...names.map((n, i): [string, SNode] => [n, entry(100 + i)[1]]),
    ]);
    const sops = map([
      [
        'age',
        {
          kind: 'seq',
          items: [
            map([
              ['recipient', scalar('age1xyz')],
              ['enc', scalar('-----BEGIN AGE ENCRYPTED FILE-----\nabc\n-----END AGE ENCRYPTED FILE-----\n')],
            ]),
          ],
        },
      ],
      ['lastmodified', scalar('2026-01-01T00:00:00Z')],
      ['mac', scalar('ENC[AES256_GCM,data:m,iv:i,tag:t,type:str]')],
      ['version', scalar('3.10.2')],
    ]);
    const data = map([['secrets', secrets]]);
    const cache: FragmentCache = new WeakMap();
    const fresh1: [string, SNode, string][] = [];
    expect(emitSopsImage(data, sops, cache, fresh1)?.toString('utf8')).toBe(emitSopsYaml(data, sops));
    expect(fresh1).toHaveLength(secrets.entries.length + 1); // every entry, and the sops block
    secrets.entries[3] = entry(3, [['rotated', scalar(true)]]);
    const fresh2: [string, SNode, string][] = [];
    expect(emitSopsImage(data, sops, cache, fresh2)?.toString('utf8')).toBe(emitSopsYaml(data, sops));
    expect(fresh2.map(([n]) => n)).toEqual(['p-prod/c3/k', 'sops']);
    // Entries dropped: the bytes around them come from the last image in two runs, nothing is emitted again.
    secrets.entries.splice(5, 2);
    const fresh3: [string, SNode, string][] = [];
    expect(emitSopsImage(data, sops, cache, fresh3)?.toString('utf8')).toBe(emitSopsYaml(data, sops));
    expect(fresh3.map(([n]) => n)).toEqual(['sops']);
  });

  it('text read from a canonical file is reused without being parsed again', () => {
    const data = map([['secrets', map(Array.from({ length: 10 }, (_, i) => entry(i)))]]);
    const sops = map([['version', scalar('3.10.2')]]);
    const text = emitSopsYaml(data, sops);
    const slices: FragmentCache = new WeakMap();
    const root = parseYamlTree(text, slices);
    const fresh: [string, SNode, string][] = [];
    expect(emitSopsImage(map([root.entries[0]!]), sops, slices, fresh)?.toString('utf8')).toBe(text);
    expect(fresh.map(([n]) => n)).toEqual(['sops']);
  });
});

describe('decryption at scale', () => {
  it('entries decrypted before are not decrypted again: a wrong key still gives the same MAC for them, and fails on a new one', () => {
    const key = randomBytes(32);
    const enc = (i: number, at = i) =>
      encryptSubtree(
        map([
          ['value', scalar(`kmsc_${i}`)],
          ['keyId', scalar(`id${i}`)],
        ]),
        ['secrets', `e/c${at}/k`],
        KMS_SYNC_RULES,
        key,
      );
    const secrets = map(Array.from({ length: 300 }, (_, i): [string, SNode] => [`e/c${i}/k`, enc(i)]));
    const data = map([['secrets', secrets]]);
    const first = decryptTree(data, KMS_SYNC_RULES, key);
    const wrong = randomBytes(32);
    expect(decryptTree(data, KMS_SYNC_RULES, wrong, first).mac).toBe(first.mac);
    const next = map([['secrets', map([...secrets.entries.slice(0, 299), ['e/c299/k', enc(1000, 299)]])]]);
    expect(() => decryptTree(next, KMS_SYNC_RULES, wrong, first)).toThrow(/failed authentication/);
    const again = decryptTree(next, KMS_SYNC_RULES, key, first);
    expect(again.plainAt(['secrets', 'e/c299/k', 'value'])).toEqual({ type: 'str', value: 'kmsc_1000' });
  });
});

describe('SopsFileStore at scale', () => {
  it('writes to a store of 500 secrets keep every value; a fresh instance reads them all back', async () => {
    const file = path.join(sb.dir, 's.yaml');
    const store = new SopsFileStore(file, { env: sb.env });
    const values = new Map<string, string>();
    await store.putMany(
      Array.from({ length: 500 }, (_, i) => {
        const name = `e/c${i}/k`;
        values.set(name, fakeKey());
        return { name, value: values.get(name)!, meta: meta(name) };
      }),
    );
    const other = new SopsFileStore(file, { env: sb.env });
    for (let i = 0; i < 4; i++) {
      const name = `e/c${i * 100}/k`;
      values.set(name, fakeKey());
      await (i % 2 ? other : store).put(name, values.get(name)!, meta(name)); // two instances take turns: each sees the other's file
    }
    const all = await new SopsFileStore(file, { env: sb.env }).readAll();
    expect(all).toEqual(values);
    expect((await fs.readFile(file, 'utf8')).match(/^ {4}"?e\//gm)).toHaveLength(500);
  });

  it('random writes (new names before, between and after the others; replacements; removals) each leave the file the whole-document emitter writes', async () => {
    const draw = xorshift32(3707);
    const file = path.join(sb.dir, 'r.yaml');
    const store = new SopsFileStore(file, { env: sb.env });
    const values = new Map<string, string>();
    const name = () => `e/c${String(draw(1000)).padStart(3, '0')}/${draw(3) === 0 ? 'k2' : 'k'}`;
    const put = (n: string) => {
      values.set(n, fakeKey());
      return { name: n, value: values.get(n)!, meta: meta(n) };
    };
    await store.putMany(Array.from({ length: 150 }, name).map(put));
    for (let w = 0; w < 24; w++) {
      if (w % 6 === 5) {
        const gone = [...values.keys()].filter(() => draw(10) === 0);
        for (const n of gone) values.delete(n);
        await store.deleteMany(gone.map((n) => ({ name: n })));
      } else {
        // 1-8 entries: some replace a secret, most add one wherever its name sorts.
        await store.putMany(
          Array.from({ length: 1 + draw(8) }, () =>
            put(draw(4) === 0 ? [...values.keys()][draw(values.size)]! : name()),
          ),
        );
      }
      const text = await fs.readFile(file, 'utf8');
      const root = parseYamlTree(text);
      const names = root.entries[0]![1].kind === 'map' ? root.entries[0]![1].entries.map(([n]) => n) : [];
      expect(names).toEqual([...values.keys()].sort());
      expect(text).toBe(emitSopsYaml(map([root.entries[0]!]), root.entries[1]![1] as SMap));
    }
    expect(await new SopsFileStore(file, { env: sb.env }).readAll()).toEqual(values);
  });

  it.each([
    ['2-space indentation', (t: string) => stringify(parse(t), { indent: 2 })],
    [
      'the sops block first and no final line break',
      (t: string) => {
        const at = t.indexOf('sops:\n');
        return `${t.slice(at)}${t.slice(0, at)}`.trimEnd();
      },
    ],
    [
      'comments between entries',
      (t: string) => t.replace(/^( {4}"?e\/c1\/k"?:)$/m, '    # a comment a person added\n$1'),
    ],
  ])('a file in another layout (%s) is rewritten correctly', async (_, reformat) => {
    const file = path.join(sb.dir, 'f.yaml');
    const first = new SopsFileStore(file, { env: sb.env });
    const values = new Map<string, string>();
    await first.putMany(
      Array.from({ length: 20 }, (_, i) => {
        const name = `e/c${i}/k`;
        values.set(name, fakeKey());
        return { name, value: values.get(name)!, meta: meta(name) };
      }),
    );
    await fs.writeFile(file, reformat(await fs.readFile(file, 'utf8')));
    const second = new SopsFileStore(file, { env: sb.env });
    expect(await second.readAll()).toEqual(values); // read first: the entries' text and place are taken from this file
    values.set('e/c5/k', fakeKey());
    await second.put('e/c5/k', values.get('e/c5/k')!, meta('e/c5/k'));
    values.set('e/new/k', fakeKey());
    await second.put('e/new/k', values.get('e/new/k')!, meta('e/new/k'));
    expect(await new SopsFileStore(file, { env: sb.env }).readAll()).toEqual(values);
  });
});

describe('value IVs', () => {
  it('each value gets IV bytes of its own, across draws of the IV pool, and decrypts', () => {
    const key = randomBytes(32);
    const ivs = new Set<string>();
    // 300 values: more than two draws of 128 IVs.
    for (let i = 0; i < 300; i++) {
      const aad = `secrets:v${i}:value:`;
      const enc = encryptSopsString(`kmsc_value-${i}`, key, aad);
      const iv = /,iv:([^,]+),/.exec(enc)?.[1] ?? '';
      expect(Buffer.from(iv, 'base64')).toHaveLength(32);
      ivs.add(iv);
      expect(decryptSopsValue(enc, key, aad)).toEqual({ type: 'str', value: `kmsc_value-${i}` });
    }
    expect(ivs.size).toBe(300);
    // An IV handed out is not changed by the ones after it (a slice of the pool, never refilled in place).
    const first = freshIv();
    const copy = Buffer.from(first);
    for (let i = 0; i < 200; i++) freshIv();
    expect(first.equals(copy)).toBe(true);
  });
});

describe('MAC bytes', () => {
  it("an entry's leaves joined give the bytes of each leaf encoded alone: surrogates at the joins, bytes values, numbers, booleans", () => {
    const key = randomBytes(32);
    const hi = '\ud83d'; // a high surrogate alone
    const lo = '\ude00'; // a low surrogate alone
    const leaves: [string, SNode][][] = [
      [
        ['note', scalar(`ends ${hi}`)],
        ['next', scalar(`${lo} starts`)],
      ],
      [
        ['a', scalar(`x${hi}`)],
        ['b', scalar(`${lo}`)],
        ['c', scalar(`${hi}${lo} pair`)],
      ],
      [
        ['n', scalar(42)],
        ['f', scalar(1.5)],
        ['t', scalar(true)],
        ['u', scalar('ünï 🙂')],
      ],
      [['plain', scalar('text')]],
    ];
    const entries = leaves.map((extra, i): [string, SNode] => {
      const name = `e/c${i}/k`;
      const value =
        i === 3
          ? scalar(encryptBytes(new Uint8Array([0xff, 0x00, 0xd8]), 'bytes', key, `secrets:${name}:value:`))
          : scalar(encryptSopsString(`kmsc_${hi}${i}`, key, `secrets:${name}:value:`));
      return [name, map([['value', value], ...extra])];
    });
    const data = map([['secrets', map(entries)]]);
    const tree = decryptTree(data, KMS_SYNC_RULES, key);
    // SOPS's MAC: each leaf's bytes on their own, in document order, hashed together.
    const parts: Uint8Array[] = [];
    for (const [name, node] of entries)
      walkLeaves(node, ['secrets', name], (leaf, path) => {
        parts.push(macBytes(path.at(-1) === 'value' ? tree.plainAt(path)! : (leaf.value as string | number | boolean)));
      });
    expect(tree.mac).toBe(createHash('sha512').update(Buffer.concat(parts)).digest('hex').toUpperCase());
  });
});
