// The one-environment check (load.ts bodyWordsAtMostOnce) builds the text's line table, and the
// skeleton read that follows takes that table instead of scanning the text again: one table per
// file, whichever load (whole or environment by environment) reads the skeleton. The loads' results
// are those of a load that scans the text itself (loadDesiredState).
import { writeFileSync } from 'node:fs';
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
