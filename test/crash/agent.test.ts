// The agent crash scenario (test/crash/agent.ts), short and seeded, with every `npm test` (the long
// one: `npm run crash -- --only agent`): one aimed SIGKILL per window, then random kills and
// SIGTERMs; the agent restarted on the same state folder loses no key and leaves no stray.
import { describe, expect, it } from 'vitest';
import { runAgentScenario } from './agent.js';
import { formatFigures } from './lib.js';
import { patient } from '../support/patience.js';

const SEED = Number(process.env.KMS_SYNC_CRASH_SEED ?? 20261125);

describe('crash scenario: kms-sync agent', () => {
  it(
    `seed ${SEED}: killed in every window and stopped by SIGTERM, the agent loses no key, leaves no stray, ends with an empty plan`,
    async () => {
      const lines: string[] = [];
      const f = await runAgentScenario({ seed: SEED, iterations: 6, log: (l) => lines.push(l) });
      console.log(formatFigures(f), f.notes.join('; '));
      expect(f.failures, lines.join('\n')).toEqual([]);
      expect(f.keysLost).toBe(0);
      expect(f.strays).toBe(0);
      for (const w of ['issued-not-journaled', 'journaled-not-stored', 'stored-not-cleared', 'revoke-sent'] as const)
        expect(f.killsByWindow[w], `${w}\n${lines.join('\n')}`).toBeGreaterThan(0);
    },
    patient(120_000),
  );
});
