// The benchmark hook (scripts/cdktf-bench.js) stays usable: its generated stack matches the
// emulator's seed, so the plan it times is a real no-op. (Timings belong to the benchmark.)
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { expect, it } from 'vitest';
import { repoRoot } from '../support/cli.js';
import { assertBuilt } from './helpers.js';
import { patient } from '../support/patience.js';

it(
  'synthesizes a seeded stack and times synth, load and a no-op plan separately',
  async () => {
    assertBuilt();
    const hook = (await import(pathToFileURL(path.join(repoRoot, 'scripts', 'cdktf-bench.js')).href)) as {
      benchCdktf(o: { clients: number; templates: number; keysPerClient: number }): Promise<Record<string, unknown>>;
    };
    const r = await hook.benchCdktf({ clients: 25, templates: 3, keysPerClient: 2 });
    expect(r).toMatchObject({ clients: 25, keys: 50, requests: expect.objectContaining({ 'list clients': 1 }) });
    for (const k of ['synthMs', 'loadMs', 'readLiveMs', 'diffMs', 'planMs']) expect(r[k], k).toBeGreaterThan(0);
  },
  patient(60_000),
);
