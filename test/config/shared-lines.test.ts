// The one-environment check (load.ts bodyWordsAtMostOnce) builds the text's line table, and the
// skeleton read that follows takes that table instead of scanning the text again: one table per
// file, whichever load (whole or environment by environment) reads the skeleton. The loads' results
// are those of a load that scans the text itself (loadDesiredState). A large ASCII file's table is
// built from its bytes while they are read (paths.ts readBounded in pieces, fast-yaml.ts
// LineScanner): the text is then not scanned at all, and the table is the one lineTable makes.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { scratchDir } from '../support/scratch.js';

const built: unknown[] = [];
const given: unknown[] = [];
vi.mock('../../src/config/fast-yaml.js', async (original) => {
  const real = await original<typeof import('../../src/config/fast-yaml.js')>();
  return {
    ...real,
    lineTable: (text: string) => {
      const t = real.lineTable(text);
      built.push(t);
      return t;
    },
    fastParseYaml: (...args: Parameters<typeof real.fastParseYaml>) => {
      if (args[2]) given.push(args[3]);
      return real.fastParseYaml(...args);
    },
  };
});

const { loadDesiredState, loadDesiredStateStreamedOrWhole } = await import('../../src/config/load.js');
const { READ_IN_PIECES, readBounded } = await import('../../src/config/paths.js');
const { LineScanner, lineTable: realLineTable } = await import('../../src/config/fast-yaml.js');
type LineTable = import('../../src/config/fast-yaml.js').LineTable;

const head = 'apiVersion: kms-sync/v1\nowner: t\nprojects:\n  - slug: p\n    name: p\n    environments:\n';
const pad = '        ';
const clients = (n: number) =>
  `${pad}clients:\n` +
  Array.from(
    { length: n },
    (_, i) => `${pad}  - name: c${i}\n${pad}    template: t\n${pad}    keys:\n${pad}      - name: k\n`,
  ).join('');
const endpoints = `${pad}endpoints:\n${pad}  - method: GET\n${pad}    path: /x\n`;
const env = (type: string, body: string) =>
  `      - type: ${type}\n        url: https://api.example.test\n        templates:\n          - name: t\n            rateLimitDay: 1\n${body}`;

function write(text: string): string {
  const dir = scratchDir();
  writeFileSync(path.join(dir, 'a.yaml'), text);
  return dir;
}

beforeEach(() => {
  built.length = 0;
  given.length = 0;
});

describe('the line table of the one-environment check', () => {
  it('is the one the whole load reads its skeleton with (one environment)', async () => {
    const dir = write(head + env('dev', clients(3) + '# between\n' + endpoints));
    const shared = await loadDesiredStateStreamedOrWhole(['a.yaml'], { cwd: dir, env: {} });
    expect(built).toHaveLength(1);
    expect(given).toEqual([built[0]]);
    const alone = await loadDesiredState(['a.yaml'], { cwd: dir, env: {} });
    expect(JSON.stringify(shared.state)).toBe(JSON.stringify(alone.state));
  });

  it('is the one the streamed load reads its skeleton with (two environments), taken once', async () => {
    const dir = write(head + env('dev', clients(3)) + env('prod', endpoints));
    const streamed = await loadDesiredStateStreamedOrWhole(['a.yaml'], { cwd: dir, env: {} });
    expect('bodies' in streamed).toBe(true);
    expect(built).toHaveLength(1);
    expect(given).toEqual([built[0]]);
  });
});

/** Small pieces in the tests of a describe, so a small file is read as the 221 MB one is (paths.ts READ_IN_PIECES). */
function readInPieces(from: number, size: number): typeof READ_IN_PIECES {
  const pieces = { ...READ_IN_PIECES };
  beforeEach(() => {
    Object.assign(READ_IN_PIECES, { from, size });
    return () => Object.assign(READ_IN_PIECES, pieces);
  });
  return pieces;
}

describe('the line table of a large file, built as it is read', () => {
  const pieces = readInPieces(256, 97);

  it('is the one the skeleton read takes: the text is not scanned, and the load is the same', async () => {
    const dir = write(head + env('dev', clients(30)) + env('prod', endpoints));
    const streamed = await loadDesiredStateStreamedOrWhole(['a.yaml'], { cwd: dir, env: {} });
    expect('bodies' in streamed).toBe(true);
    expect(built, 'no line table made of the text').toHaveLength(0);
    expect(given).toHaveLength(1);
    const table = given[0] as LineTable;
    const text = readFileSync(path.join(dir, 'a.yaml'), 'latin1');
    expect(plainTable(table)).toEqual(plainTable(realLineTable(text)));
    built.length = 0;
    // The whole load takes it too (a file read at once: its skeleton read scans the text itself),
    // and loads what a file read at once loads.
    given.length = 0;
    const inPieces = await loadDesiredState(['a.yaml'], { cwd: dir, env: {} });
    expect(given).toHaveLength(1);
    expect(plainTable(given[0] as LineTable)).toEqual(plainTable(table));
    Object.assign(READ_IN_PIECES, pieces);
    const atOnce = await loadDesiredState(['a.yaml'], { cwd: dir, env: {} });
    expect(given).toEqual([given[0], undefined]);
    expect(inPieces.state.clients).toHaveLength(30);
    expect(JSON.stringify(inPieces.state)).toBe(JSON.stringify(atOnce.state));
  });

  it('is none for a file that is not ASCII: its text is scanned as before', async () => {
    const dir = write(head.replace('name: p', 'name: caf\u00e9') + env('dev', clients(30)) + env('prod', endpoints));
    const streamed = await loadDesiredStateStreamedOrWhole(['a.yaml'], { cwd: dir, env: {} });
    expect(built).toHaveLength(1);
    expect(streamed.state.projects[0]?.name).toBe('caf\u00e9');
  });
});

describe('LineScanner', () => {
  it('makes the table lineTable makes of the text, wherever the bytes arrive', () => {
    const bits = ['', ' ', '  ', 'a', 'key: v', '# c', '  # c', '\r', '\r\n', '\n', '\n\n', '   \n', '- x', '\t'];
    let seed = 7;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let round = 0; round < 300; round++) {
      let text = '';
      for (let k = rand(40); k > 0; k--) text += bits[rand(bits.length)];
      const bytes = Buffer.from(text, 'latin1');
      const scanner = new LineScanner(rand(2) ? bytes.length : 0);
      for (let upTo = 0; upTo < bytes.length; ) {
        upTo = Math.min(bytes.length, upTo + 1 + rand(6));
        scanner.scan(bytes, upTo);
      }
      expect(plainTable(scanner.finish(bytes, bytes.length)), JSON.stringify(text)).toEqual(
        plainTable(realLineTable(text)),
      );
    }
  });
});

describe('readBounded in pieces', () => {
  readInPieces(100, 33);
  const limits = { fileBytes: 10_000, totalBytes: 10_000 };

  it('reads the bytes a read at once gives, telling each piece as it comes', async () => {
    const dir = write('x'.repeat(250));
    const file = path.join(dir, 'a.yaml');
    const told: number[] = [];
    const read = await readBounded(file, limits, { left: 10_000 }, false, (bytes, upTo) => {
      expect(bytes.length).toBe(251);
      told.push(upTo);
    });
    expect(told).toEqual([33, 66, 99, 132, 165, 198, 231, 250]);
    if (!('bytes' in read)) throw new Error(read.problem);
    expect(read.bytes.toString()).toBe('x'.repeat(250));
    expect(read.at?.path).toBe(file);
  });

  it('still refuses a file past its limit, and tells nothing of it', async () => {
    const dir = write('x'.repeat(250));
    const told: number[] = [];
    const read = await readBounded(
      path.join(dir, 'a.yaml'),
      { fileBytes: 200, totalBytes: 10_000 },
      { left: 10_000 },
      false,
      (_, upTo) => told.push(upTo),
    );
    expect('problem' in read && read.problem).toMatch(/larger than the limit/);
    expect(told).toEqual([]);
  });
});

function plainTable(t: LineTable) {
  return {
    count: t.count,
    starts: [...t.starts.subarray(0, t.count)],
    ends: [...t.ends.subarray(0, t.count)],
    indents: [...t.indents.subarray(0, t.count)],
  };
}
