// A streamed load whose environments are read on worker threads (LoadOptions.bodiesHere false)
// keeps no text of an ASCII file: each environment's part is read again from the file by offset
// (config/paths.ts readPart), on the worker or, for what is left, on this thread, and only while
// the file is the one read (device, inode, size, modification and change times): otherwise
// NotStreamable, and the caller loads the whole again. A file that is not ASCII keeps its text.
import { renameSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  loadDesiredState,
  loadDesiredStateStreamed,
  NotStreamable,
  StreamedBodies,
  type StreamedLoad,
} from '../../src/config/index.js';
import { readBounded, readPart } from '../../src/config/paths.js';
import { scratchDir } from '../support/scratch.js';

const env = (type: string, clients: number, note = '') =>
  `      - type: ${type}\n        url: https://api.example.test\n        templates:\n          - name: t\n            rateLimitDay: 1\n` +
  `        clients:\n${Array.from(
    { length: clients },
    (_, i) =>
      `          - name: ${type}-${i}${note}\n            template: t\n            keys:\n              - name: k\n`,
  ).join('')}        endpoints:\n          - method: GET\n            path: /${type}\n`;
const fleet = (note = '') =>
  `apiVersion: kms-sync/v1\nowner: t\nprojects:\n  - slug: p\n    name: p\n    environments:\n` +
  `${env('dev', 700, note)}${env('prod', 3)}${env('qa', 40)}`;

/** A value's fields without its places (`source`, at any depth). */
const unplaced = (v: unknown): unknown =>
  Array.isArray(v)
    ? v.map(unplaced)
    : v && typeof v === 'object'
      ? Object.fromEntries(Object.entries(v).flatMap(([k, x]) => (k === 'source' ? [] : [[k, unplaced(x)]])))
      : v;
/** What a test compares of the clients and endpoints. */
const plain = (x: { clients: object[]; endpoints: object[] }) => unplaced([...x.clients, ...x.endpoints]) as unknown[];

const limits = { fileBytes: 1 << 30, totalBytes: 1 << 30 };
const opts = { env: {}, limits, bodiesHere: () => false };

async function streamed(file: string): Promise<StreamedLoad> {
  const loaded = await loadDesiredStateStreamed([file], { ...opts, cwd: path.dirname(file) });
  if (!loaded) throw new Error('not streamed');
  return loaded;
}

describe('a streamed load read from its files by offset', () => {
  it('gives each environment as the whole load does, read here or handed to another thread', async () => {
    const dir = scratchDir();
    const file = path.join(dir, 'kms.yaml');
    writeFileSync(file, fleet());
    const whole = (await loadDesiredState([file], { env: {}, cwd: dir })).state;
    const { bodies } = await streamed(file);
    // Another thread's bodies: built from the skeleton alone; the part is handed as nothing (no text,
    // no lines): that thread reads it from the file and scans its lines.
    const other = StreamedBodies.assemble(bodies.portable(), {}, () => '')!;
    const handed = bodies.handOver('p-dev');
    expect(handed).toEqual([{}]);
    const dev = await other.take('p-dev', handed);
    expect(plain(dev)).toEqual(
      plain({
        clients: whole.clients.filter((c) => c.projectEnv === 'p-dev'),
        endpoints: whole.endpoints.filter((e) => e.projectEnv === 'p-dev'),
      }),
    );
    for (const pe of ['p-prod', 'p-qa'])
      expect(plain(await bodies.take(pe))).toEqual(
        plain({
          clients: whole.clients.filter((c) => c.projectEnv === pe),
          endpoints: whole.endpoints.filter((e) => e.projectEnv === pe),
        }),
      );
  });

  it('gives way to the whole load when the file changed since its skeleton was read', async () => {
    const dir = scratchDir();
    const file = path.join(dir, 'kms.yaml');
    const changes: [string, () => void][] = [
      ['its content, same size', () => writeFileSync(file, fleet().replace('dev-1\n', 'dev-9\n'))],
      ['its times only', () => utimesSync(file, new Date(2001, 1, 1), new Date(2001, 1, 1))],
      [
        'another file renamed over it',
        () => {
          writeFileSync(`${file}.new`, fleet());
          renameSync(`${file}.new`, file);
        },
      ],
      ['removed', () => rmSync(file)],
    ];
    for (const [what, change] of changes) {
      writeFileSync(file, fleet());
      const { bodies } = await streamed(file);
      expect(plain(await bodies.take('p-prod')).length, what).toBe(4);
      change();
      await expect(bodies.take('p-dev'), what).rejects.toBeInstanceOf(NotStreamable);
    }
  });

  it('keeps the text of a file that is not ASCII', async () => {
    const dir = scratchDir();
    const file = path.join(dir, 'kms.yaml');
    writeFileSync(file, fleet('-é'));
    const { bodies } = await streamed(file);
    expect(bodies.handOver('p-prod')[0]!.text).toContain('prod-2');
    rmSync(file);
    expect((await bodies.take('p-dev')).clients.map((c) => c.name)).toContain('dev-699-é');
  });

  it('checks the characters the fast reader leaves to the yaml package in each block as it is read', async () => {
    const dir = scratchDir();
    const file = path.join(dir, 'kms.yaml');
    // A tab in a quoted value of a client (legal YAML, outside the fast subset), then one in the skeleton.
    for (const [name, where] of [
      ['dev-5', 'p-dev'],
      ['qa-39', 'p-qa'],
    ] as const) {
      writeFileSync(file, fleet().replace(`name: ${name}\n`, `name: "${name}\t"\n`));
      const whole = (await loadDesiredState([file], { env: {}, cwd: dir })).state;
      expect(whole.clients.map((c) => c.name)).toContain(`${name}\t`);
      const { bodies } = await streamed(file);
      // The skeleton read, and the other environments, do not stop at it; its block gives way.
      expect(plain(await bodies.take('p-prod'))).toHaveLength(4);
      await expect(bodies.take(where)).rejects.toBeInstanceOf(NotStreamable);
    }
    writeFileSync(file, fleet().replace('url: https://api.example.test', 'url: "https://api.example.test\t"'));
    expect(await loadDesiredStateStreamed([file], { ...opts, cwd: dir })).toBeUndefined();
  });

  it('reads an identified file only when it did not change while read', async () => {
    const dir = scratchDir();
    const file = path.join(dir, 'kms.yaml');
    writeFileSync(file, fleet());
    const read = await readBounded(file, limits, { left: limits.totalBytes });
    expect('at' in read && read.at?.path).toBe(file);
  });

  it('reads a part as text only while its bytes are ASCII', async () => {
    const dir = scratchDir();
    const file = path.join(dir, 'kms.yaml');
    writeFileSync(file, 'name: caf\u00e9\nnext: x\n');
    const read = await readBounded(file, limits, { left: limits.totalBytes });
    if (!('at' in read) || !read.at) throw new Error('not identified');
    // The bytes of 'é' (UTF-8) are no text of the byte-per-character kind; the ASCII line is.
    expect(readPart(read.at, 0, read.bytes.length)).toBeUndefined();
    expect(readPart(read.at, read.bytes.indexOf('next'), read.bytes.length)).toBe('next: x\n');
  });
});
