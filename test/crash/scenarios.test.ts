// The crash scenarios of issue 24, short and seeded, with every `npm test` (the long ones:
// `npm run crash`): one folder applied to two services sharing a store, CI with a committed store,
// and `rotate --revoke-old` whose revoke is lost, or whose key-issuing response is lost before a
// kill (issue 40). Each checks the invariant independently of kms-sync's code (lib.ts
// checkInvariant); a failure lists every live key that breaks it.
import { describe, expect, it } from 'vitest';
import { runCiStore } from './ci-store.js';
import { formatFigures } from './lib.js';
import { runRotateRevoke } from './rotate-revoke.js';
import { runTwoServices } from './two-services.js';
import { patient } from '../support/patience.js';

const SEED = Number(process.env.KMS_SYNC_CRASH_SEED ?? 20261124);

describe('crash scenarios (issue 24)', () => {
  it(
    `one folder, two services (sk_test_ then sk_live_), one store: every live key of both held, or the second apply refused (seed ${SEED})`,
    async () => {
      const lines: string[] = [];
      const f = await runTwoServices({ seed: SEED, rounds: 2, log: (l) => lines.push(l) });
      console.log(formatFigures(f));
      expect(f.failures, lines.join('\n')).toEqual([]);
      expect(f.keysLost).toBe(0);
    },
    patient(300_000),
  );

  it(
    `CI=true with a committed store: apply and rotate issue nothing unless opted in (seed ${SEED})`,
    async () => {
      const lines: string[] = [];
      const f = await runCiStore({ seed: SEED, log: (l) => lines.push(l) });
      console.log(formatFigures(f));
      expect(f.failures, lines.join('\n')).toEqual([]);
    },
    patient(300_000),
  );

  it(
    `rotate --revoke-old killed as its revoke goes out, or after a lost key-issuing response (issue 40): reported until finished, then gone (seed ${SEED})`,
    async () => {
      const lines: string[] = [];
      const f = await runRotateRevoke({
        seed: SEED,
        rounds: 4,
        log: (l) => lines.push(l),
        modes: [
          'kill-as-revoke-goes-out',
          'lost-response:reissue-unsent',
          'lost-response:revoke-sent',
          'revoke-dropped',
        ],
      });
      console.log(formatFigures(f));
      expect(f.failures, lines.join('\n')).toEqual([]);
      expect(f.strays).toBe(0);
      expect(f.killsByWindow['revoke-sent']).toBeGreaterThan(1);
      expect(f.killsByWindow['issued-not-journaled']).toBeGreaterThan(0);
    },
    patient(300_000),
  );
});
