// A large environment's clients and endpoints read on a worker thread (config/aside.ts, a plan's
// LoadOptions.readAside) give the model, the places and the problems a load on one thread gives:
// chunks the worker sends as JSON, and those it leaves to the main thread (an interpolation, a
// number JSON would change, a part outside the fast YAML subset), which the main thread reads
// itself from there on. The built modules are loaded: the worker's entry exists only beside them.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { DesiredState } from '../../src/model/index.js';
import { repoRoot } from '../support/cli.js';
import { writeTree } from './helpers.js';

const built = (m: string): Promise<unknown> => import(pathToFileURL(path.join(repoRoot, 'dist', 'config', m)).href);
const { loadDesiredState } = (await built('load.js')) as typeof import('../../src/config/load.js');
const { asideRead } = (await built('aside.js')) as typeof import('../../src/config/aside.js');

const head =
  'apiVersion: kms-sync/v1\nowner: t\nprojects:\n  - slug: p\n    name: p\n    environments:\n' +
  '      - type: dev\n        url: https://api.example.test\n        templates:\n          - name: t\n            rateLimitDay: 1\n';
const client = (i: number, metadata = `index: "${i}"`) =>
  `          - name: c${String(i).padStart(5, '0')}\n            template: t\n            ipWhitelist: [10.0.0.0/8]\n` +
  `            metadata:\n              ${metadata}\n            keys:\n              - name: k\n`;
const fleet = (n: number, metadata: (i: number) => string | undefined = () => undefined) => {
  let text = `${head}        clients:\n`;
  for (let i = 0; i < n; i++) text += client(i, metadata(i));
  return `${text}        endpoints:\n          - method: GET\n            path: /x\n`;
};

type Outcome = { state: DesiredState } | { problems: string[] };

/** The file loaded with its bodies read aside (every size) and on this thread: both outcomes, and the chunks the worker sent. */
async function bothWays(text: string, env: Record<string, string> = {}) {
  const dir = await writeTree({ 'a.yaml': text });
  const load = (aside: boolean): Promise<Outcome> =>
    loadDesiredState(['.'], { cwd: dir, env, ...(aside ? { onParsed: () => undefined, readAside: 0 } : {}) }).then(
      (r) => ({ state: r.state }),
      (e: { diagnostics?: { line: number; path: string; message: string }[] }) => {
        if (!e.diagnostics) throw e;
        return { problems: e.diagnostics.map((d) => `${d.line}: ${d.path}: ${d.message}`) };
      },
    );
  const before = asideRead.chunks;
  const aside = await load(true);
  const read = asideRead.chunks - before;
  return { aside, here: await load(false), read };
}

/** The state without its places (compared apart: they are found from the text on demand). */
const unplaced = (o: Outcome) => {
  if (!('state' in o)) return o;
  const s = o.state;
  return {
    ...s,
    clients: s.clients.map((c) => ({
      ...c,
      source: undefined,
      keys: c.keys.map((k) => ({ ...k, source: undefined })),
    })),
    endpoints: s.endpoints.map((e) => ({ ...e, source: undefined })),
    envs: s.envs.map((e) => ({ ...e, source: undefined })),
    projects: s.projects.map((p) => ({ ...p, source: undefined })),
    templates: s.templates.map((t) => ({ ...t, source: undefined })),
  };
};
const stateIn = (o: Outcome) => {
  if (!('state' in o)) throw new Error(`expected a state, got ${o.problems.join('; ')}`);
  return o.state;
};

describe('bodies read aside', () => {
  it('gives the model and the places of a load on one thread, across chunks', async () => {
    const text = fleet(1200);
    const { aside, here, read } = await bothWays(text);
    expect(read).toBe(4); // three chunks of clients, one of endpoints
    expect(unplaced(aside)).toEqual(unplaced(here));
    const lines = text.split('\n');
    for (const i of [0, 499, 500, 1199]) {
      const c = stateIn(aside).clients[i]!;
      expect(c.source!.path).toBe(`projects[0].environments[0].clients[${i}]`);
      expect(lines[c.source!.line - 1]).toContain(`- name: ${c.name}`);
      expect(c.keys[0]!.source!.line).toBe(stateIn(here).clients[i]!.keys[0]!.source!.line);
    }
  });

  it('leaves a chunk with an interpolation and those after it to this thread', async () => {
    const text = fleet(1200, (i) => (i === 700 ? 'team: ${env:TEAM}' : undefined));
    const { aside, here, read } = await bothWays(text, { TEAM: 'blue' });
    expect(read).toBe(2); // the first chunk of clients, and the endpoints
    expect(stateIn(aside).clients[700]!.metadata).toEqual({ team: 'blue' });
    expect(unplaced(aside)).toEqual(unplaced(here));
  });

  it('leaves numbers JSON would change to this thread', async () => {
    const odd = ['.inf', '-.inf', '.nan', '-0', '-0.0'];
    const text = fleet(1200, (i) => (i >= 600 && i < 605 ? `n: ${odd[i - 600]}` : undefined));
    const { aside, here, read } = await bothWays(text);
    expect(read).toBe(2);
    const metadata = stateIn(aside)
      .clients.slice(600, 605)
      .map((c) => c.metadata!.n);
    expect(metadata[0]).toBe(Number.POSITIVE_INFINITY);
    expect(Number.isNaN(metadata[2])).toBe(true);
    expect(Object.is(metadata[3], -0)).toBe(true);
    expect(unplaced(aside)).toEqual(unplaced(here));
  });

  it('gives way to the whole load for a part outside the fast subset, and reports problems alike', async () => {
    // An anchor in the 601st client (valid YAML the fast reader leaves to the yaml package).
    const anchored = fleet(700).replace(
      'name: c00600\n            template: t',
      'name: c00600\n            template: &a t',
    );
    const loaded = await bothWays(anchored);
    expect(unplaced(loaded.aside)).toEqual(unplaced(loaded.here));
    // A client defined twice and a refused whitelist, after the first chunk.
    const broken = fleet(700)
      .replace('name: c00650', 'name: c00100')
      .replace(/(name: c00550\n {12}template: t\n {12}ipWhitelist: )\[10\.0\.0\.0\/8\]/, '$1[not-a-cidr]');
    const { aside, here } = await bothWays(broken);
    expect('problems' in here && here.problems.length).toBe(2);
    expect(aside).toEqual(here);
  });
});
