// Crash safety: writers are SIGKILLed at random moments, again and again (see crash-helpers.ts).
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgeKeys } from '../../src/secrets/age-keys.js';
import { ITERATIONS, bundleChild, crashRounds, startChild } from './crash-helpers.js';
import { sandbox, type Sandbox } from './helpers.js';
import { SopsFileStore } from '../../src/secrets/sops/file-store.js';
import { patient } from '../support/patience.js';

// Two concurrent writers per round: kills also land while one waits for the other's lock.
const ROUNDS = Math.ceil(ITERATIONS / 2);
const WRITERS = 2;

let sb: Sandbox;
let child: string;

beforeAll(async () => {
  sb = await sandbox();
  child = await bundleChild('store-writer.ts');
  // Create the identity up front so the children share it.
  await new AgeKeys({ env: sb.env }).recipients();
});

afterAll(async () => {
  await sb.cleanup();
});

describe('crash safety under SIGKILL', () => {
  it(
    'SOPS file store: every acknowledged put survives, the file always verifies',
    async () => {
      const file = path.join(sb.dir, 'store', 'secrets.yaml');
      const store = new SopsFileStore(file, { env: sb.env });
      const acked = new Map<string, string>();
      await crashRounds({
        iterations: ROUNDS,
        writers: WRITERS,
        spawn: (i, w) => startChild(child, [file, `it${i}w${w}`], { ...sb.env, PATH: process.env.PATH }),
        afterRound: async (i, runs) => {
          for (const r of runs) {
            for (const line of r.lines) {
              const [tag, name, value] = line.split(' ');
              if (tag === 'ack' && name && value) acked.set(name, value);
            }
          }
          // Never corrupt: the file parses, its MAC verifies, every value decrypts.
          const all = await store.readAll();
          for (const [name, value] of acked) {
            if (all.get(name) !== value)
              throw new Error(`acknowledged secret ${name} lost or changed after iteration ${i}`);
          }
        },
      });
      // The writers did get work done between kills (kept low: a loaded CI machine writes slower).
      expect(acked.size).toBeGreaterThanOrEqual(3);
      // A new writer can always take over (stale locks broken, temp files cleaned).
      await store.put('final/c/k', 'kmsc_final-check-value', {
        projectEnv: 'final',
        client: 'c',
        key: 'k',
        keyId: 'x',
        issuedAt: new Date().toISOString(),
      });
      expect(await store.read('final/c/k')).toBe('kmsc_final-check-value');
      const left = (await fs.readdir(path.dirname(file))).filter((n) => n.includes('.tmp-'));
      expect(left).toEqual([]);
    },
    patient(60_000),
  );
});
