// The short, seeded crash campaign that runs with every `npm test` (the long one: `npm run crash`).
// See campaign.ts for what it does and checks; lib.ts for the invariant.
import { describe, expect, it } from 'vitest';
import { runCampaign } from './campaign.js';
import { formatFigures } from './lib.js';
import { patient } from '../support/patience.js';

const SEED = Number(process.env.KMS_SYNC_CRASH_SEED ?? 20261123);
// 10: the five aimed disturbances (every window, a lost response) first, then five at random; `npm run crash` runs 100.
const ITERATIONS = Number(process.env.KMS_SYNC_CRASH_ITERATIONS ?? 10);

describe('crash campaign: kill the real process, lose no key', () => {
  it(
    `seed ${SEED}, ${ITERATIONS} iterations: no lost key, no stray live, empty journal, empty plan`,
    async () => {
      const lines: string[] = [];
      const report = await runCampaign({ seed: SEED, iterations: ITERATIONS, log: (l) => lines.push(l) });
      console.log(formatFigures(report));
      expect(report.failures, lines.join('\n')).toEqual([]);
      expect(report.keysLost).toBe(0);
      expect(report.strays).toBe(0);
      // The campaign did reach the windows it aims at (not a run where nothing was killed).
      expect(report.killsByWindow['issued-not-journaled']).toBeGreaterThan(0);
      expect(report.killsByWindow['journaled-not-stored']).toBeGreaterThan(0);
      expect(report.killsByWindow['stored-not-cleared']).toBeGreaterThan(0);
      expect(report.killsByWindow['revoke-sent']).toBeGreaterThan(0);
      expect(report.keysIssued).toBeGreaterThan(ITERATIONS);
    },
    patient(600_000),
  );
});
