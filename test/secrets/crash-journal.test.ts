// Crash safety: writers are SIGKILLed at random moments, again and again (see crash-helpers.ts).
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgeKeys } from '../../src/secrets/age-keys.js';
import { ITERATIONS, bundleChild, crashRounds, startChild } from './crash-helpers.js';
import { sandbox, type Sandbox } from './helpers.js';
import { Journal } from '../../src/secrets/journal.js';
import { patient } from '../support/patience.js';

const ROUNDS = ITERATIONS;
const WRITERS = 1;

let sb: Sandbox;
let child: string;

beforeAll(async () => {
  sb = await sandbox();
  child = await bundleChild('journal-writer.ts');
  // Create the identity up front so the children share it.
  await new AgeKeys({ env: sb.env }).recipients();
});

afterAll(async () => {
  await sb.cleanup();
});

describe('crash safety under SIGKILL', () => {
  it(
    'journal: every acknowledged append survives, acknowledged clears stay cleared',
    async () => {
      const file = path.join(sb.dir, 'cfg', '.kms-sync', 'journal');
      const journal = new Journal(file, { env: sb.env });
      const acked = new Map<string, string>();
      const cleared = new Set<string>();
      const clearing = new Set<string>(); // a clear that was under way when its writer was killed may or may not have happened
      await crashRounds({
        iterations: ROUNDS,
        writers: WRITERS,
        spawn: (i, w) => startChild(child, [file, `it${i}w${w}`], { ...sb.env, PATH: process.env.PATH }),
        afterRound: async (i, runs) => {
          for (const r of runs) {
            for (const line of r.lines) {
              const [tag, id, value] = line.split(' ');
              if (tag === 'ack' && id && value) acked.set(id, value);
              if (tag === 'clearing' && id) clearing.add(id);
              if (tag === 'cleared' && id) cleared.add(id);
            }
          }
          // Every round: the frames are intact (length + CRC) and the right ones are there. Every
          // fifth round and at the end: they also decrypt to the acknowledged values.
          const full = i % 5 === 4 || i === ROUNDS - 1;
          const pending = full
            ? new Map((await journal.pending()).map((e) => [e.id, e.value]))
            : new Map((await journal.pendingIds()).map((id) => [id, undefined]));
          for (const [id, value] of acked) {
            if (cleared.has(id)) {
              if (pending.has(id)) throw new Error(`cleared journal entry ${id} came back after round ${i}`);
            } else if (clearing.has(id)) {
              if (full && pending.has(id) && pending.get(id) !== value) throw new Error(`journal entry ${id} changed`);
            } else if (!pending.has(id) || (full && pending.get(id) !== value)) {
              throw new Error(`acknowledged journal entry ${id} lost or changed after round ${i}`);
            }
          }
        },
      });
      // Work got done between kills (kept low: a loaded CI machine writes slower).
      expect(acked.size).toBeGreaterThanOrEqual(3);
      // The next append trims any torn tail and lands intact.
      const id = await journal.append({
        storeUri: 'sops:x.yaml',
        name: 'final/c/k',
        value: 'kmsc_final-journal-value',
        meta: { projectEnv: 'final', client: 'c', key: 'k', keyId: 'x', issuedAt: new Date().toISOString() },
      });
      const last = (await journal.pending()).find((e) => e.id === id);
      expect(last?.value).toBe('kmsc_final-journal-value');
    },
    patient(60_000),
  );
});
